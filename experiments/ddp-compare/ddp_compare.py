#!/usr/bin/env python3
"""Side by side: PyTorch DDP with no hook, the AdaComp hook (with and without
overlap), torch's fp16 hook and torch's PowerSGD hook (rank 1, 2, 4), same
model, data, seed and steps, on loopback and on a 2-host cluster with shaped
links (scripts/cluster.sh). Reports test accuracy, bytes per step and time per
step; writes experiments/ddp-compare/data/compare/ddp_compare.{json,md} and prints the table.

    sudo /usr/bin/python3 experiments/ddp-compare/ddp_compare.py                      # everything (~15-40 min)
    /usr/bin/python3 experiments/ddp-compare/ddp_compare.py --envs loopback            # no root needed
    /usr/bin/python3 experiments/ddp-compare/ddp_compare.py --envs 100mbit --configs adacomp,adacomp-no-overlap

Every run is examples/ddp_fashion_mnist.py (2 processes, 1 torch thread each,
batch 32 per process, SGD momentum 0.9, lr 0.02, seed 0) for --epochs on the
first --train-limit training images, scored on the full test set, with
--summary-json. Loopback: the example spawns 2 processes on 127.0.0.1. A
cluster environment: `scripts/cluster.sh --name NAME up 2 [--rate R]`, then
`run --each` per configuration with the interface counters read around it;
the cluster is taken down at the end.

Bytes per step, three figures:
- hook: what one rank hands to its collectives per timed step (the example's
  count: AdaComp's transport_bytes, frames + 8-byte headers; fp16 / none the
  all-reduced gradient bytes, computed; PowerSGD its own element counter x 4);
- link (timed): bytes each host's eth0 sent per timed step, read from
  /sys/class/net inside the hosts around the timed steps (Ethernet, IP, TCP
  headers and ACKs included);
- link (run): `cluster.sh counters` difference around the whole run / steps /
  hosts: includes start-up (rendezvous, DDP's parameter broadcast), the warm-up
  steps and the test-set evaluation.

A configuration that fails (a non-zero exit, a timeout, no summary) is recorded
with its exit status and the error lines of its output instead of numbers.
"""

import argparse
import datetime
import json
import os
import platform
import shlex
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # resultslib
from resultslib.cluster import CLUSTER, counters, error_lines, log, sh  # noqa: E402
from resultslib.paths import ROOT, experiment, module_dir  # noqa: E402

EXAMPLE = os.path.join(ROOT, "examples", "ddp_fashion_mnist.py")
PYTHON = "/usr/bin/python3"

CONFIGS = {
    "none": ["--hook", "none"],
    "adacomp": ["--hook", "adacomp"],
    "adacomp-no-overlap": ["--hook", "adacomp", "--no-overlap"],
    "fp16": ["--hook", "fp16"],
    "powersgd-r1": ["--hook", "powersgd", "--powersgd-rank", "1"],
    "powersgd-r2": ["--hook", "powersgd", "--powersgd-rank", "2"],
    "powersgd-r4": ["--hook", "powersgd", "--powersgd-rank", "4"],
    # Not in the default list: overlap on even steps, off on odd ones, in one run.
    "adacomp-alternate": ["--hook", "adacomp", "--alternate-overlap"],
}
DEFAULT_CONFIGS = ("none", "adacomp", "adacomp-no-overlap", "fp16", "powersgd-r1",
                   "powersgd-r2", "powersgd-r4")
ENVS = ("loopback", "100mbit", "unshaped")


def example_args(args, config, summary):
    return (["--epochs", str(args.epochs), "--train-limit", str(args.train_limit),
             "--batch-size", str(args.batch_size), "--powersgd-start-iter",
             str(args.powersgd_start_iter), "--warmup-steps", str(args.warmup_steps),
             "--summary-json", summary] +
            (["--bucket-cap-mb", str(args.bucket_cap_mb)] if args.bucket_cap_mb else []) +
            CONFIGS[config])


def run_loopback(args, config, summary, logdir):
    env = dict(os.environ, PYTHONPATH=args.pythonpath)
    cmd = [PYTHON, EXAMPLE, "--procs", "2"] + example_args(args, config, summary)
    t0 = time.time()
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=args.timeout, env=env)
        rc, out, err = r.returncode, r.stdout, r.stderr
    except subprocess.TimeoutExpired as e:
        rc = 124
        out = e.stdout.decode() if isinstance(e.stdout, bytes) else (e.stdout or "")
        err = (e.stderr.decode() if isinstance(e.stderr, bytes) else (e.stderr or "")) + \
            f"\ntimed out after {args.timeout} s"
    with open(os.path.join(logdir, "out"), "w") as f:
        f.write(out)
    with open(os.path.join(logdir, "err"), "w") as f:
        f.write(err)
    return {"rc": rc, "wall_s": time.time() - t0, "command": shlex.join(cmd),
            "output": out + err}


def run_cluster(args, config, summary, logdir, port):
    cmd = [CLUSTER, "--name", args.cluster_name, "run", "--each", "--timeout",
           str(args.timeout), "--port", str(port), "--logs", logdir, "--",
           "env", f"PYTHONPATH={args.pythonpath}", PYTHON, EXAMPLE] + \
        example_args(args, config, summary)
    before = counters(args.cluster_name)
    t0 = time.time()
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=args.timeout + 60)
        rc, extra = r.returncode, r.stdout + r.stderr
    except subprocess.TimeoutExpired:
        rc, extra = 124, f"timed out after {args.timeout + 60} s"
    wall = time.time() - t0
    after = counters(args.cluster_name)
    text = extra
    for name in sorted(os.listdir(logdir)):
        with open(os.path.join(logdir, name), errors="replace") as f:
            text += f"\n--- {name}\n" + f.read()
    tx = sum(after[h][1] - before[h][1] for h in after if h in before)
    rx = sum(after[h][0] - before[h][0] for h in after if h in before)
    return {"rc": rc, "wall_s": wall, "command": shlex.join(cmd), "output": text,
            "link_run_tx_bytes": tx, "link_run_rx_bytes": rx, "hosts": len(after)}


def cluster_up(args, env):
    sh([CLUSTER, "--name", args.cluster_name, "down"], check=False)
    cmd = [CLUSTER, "--name", args.cluster_name, "up", "2"]
    if env != "unshaped":
        cmd += ["--rate", env]
    r = sh(cmd, check=False)
    if r.returncode != 0:
        raise RuntimeError(f"{shlex.join(cmd)}: exit {r.returncode}: "
                           f"{(r.stdout + r.stderr).strip()}")
    log(r.stdout.strip())


def one_run(args, env, config, rep, port):
    tag = f"{env}_{config}_r{rep}"
    logdir = os.path.join(args.log_dir, tag)
    os.makedirs(logdir, exist_ok=True)
    summary = os.path.join(logdir, "summary.json")
    if os.path.exists(summary):
        os.remove(summary)
    if env == "loopback":
        res = run_loopback(args, config, summary, logdir)
    else:
        res = run_cluster(args, config, summary, logdir, port)
    row = {"env": env, "config": config, "repeat": rep, "rc": res["rc"],
           "wall_s": round(res["wall_s"], 2), "command": res["command"]}
    s = None
    if res["rc"] == 0 and os.path.exists(summary):
        with open(summary) as f:
            s = json.load(f)
    if s is None:
        row["status"] = "failed"
        row["error"] = error_lines(res["output"]) or [f"exit {res['rc']}, no summary"]
        return row
    row["status"] = "ok"
    for k in ("test_acc", "steps", "timed_steps", "warmup_steps", "step_time_mean_s",
              "step_time_median_s", "bytes_per_step", "bytes_how", "frame_bytes_per_step",
              "compression_rate", "link_tx_per_host_step", "link_rx_per_host_step", "title",
              "buckets_per_step", "step_time_overlap_mean_s", "step_time_overlap_median_s",
              "step_time_no_overlap_mean_s", "step_time_no_overlap_median_s",
              "hook_time_per_step_s", "hook_time_overlap_per_step_s",
              "hook_time_no_overlap_per_step_s"):
        if k in s and s[k] is not None:
            row[k] = s[k]
    if "link_run_tx_bytes" in res and s.get("steps"):
        row["link_run_tx_per_host_step"] = res["link_run_tx_bytes"] / res["hosts"] / s["steps"]
        row["link_run_tx_bytes"] = res["link_run_tx_bytes"]
        row["link_run_rx_bytes"] = res["link_run_rx_bytes"]
    return row


def fmt_bytes(v):
    return "" if v is None else f"{v:,.0f}"


def aggregate(rows):
    """One line per (env, config): the mean over repeats that ran."""
    out = []
    keys = []
    for r in rows:
        k = (r["env"], r["config"])
        if k not in keys:
            keys.append(k)
    for k in keys:
        rs = [r for r in rows if (r["env"], r["config"]) == k]
        ok = [r for r in rs if r["status"] == "ok"]
        a = {"env": k[0], "config": k[1], "runs": len(rs), "ok": len(ok)}
        if ok:
            for f in ("test_acc", "step_time_mean_s", "step_time_median_s", "bytes_per_step",
                      "frame_bytes_per_step", "link_tx_per_host_step",
                      "link_run_tx_per_host_step", "wall_s", "buckets_per_step",
                      "step_time_overlap_mean_s", "step_time_overlap_median_s",
                      "step_time_no_overlap_mean_s", "step_time_no_overlap_median_s",
                      "hook_time_per_step_s", "hook_time_overlap_per_step_s",
                      "hook_time_no_overlap_per_step_s"):
                vals = [r[f] for r in ok if f in r]
                if vals:
                    a[f] = sum(vals) / len(vals)
            a["step_time_mean_s_each"] = [r["step_time_mean_s"] for r in ok]
            a["steps"] = ok[0].get("steps")
            a["timed_steps"] = ok[0].get("timed_steps")
        failed = [r for r in rs if r["status"] != "ok"]
        if failed:
            a["errors"] = [{"repeat": r["repeat"], "rc": r["rc"], "error": r["error"]}
                           for r in failed]
        out.append(a)
    return out


def markdown(meta, agg):
    lines = [
        f"DDP hooks side by side ({meta['date']}): {meta['workload']}.",
        "",
        f"Command: `{meta['command']}`",
        "",
        f"Machine: {meta['machine']}. Times are means over the timed steps of each run "
        f"(rank 0, forward + backward + optimizer step, after the warm-up), then over "
        f"{meta['repeats']} repeat(s); each repeat's mean is in the JSON.",
        "",
        "| link | hook | test acc | ms/step (mean) | ms/step (median) | hook bytes/step/rank "
        "| link tx/step/host (timed) | link tx/step/host (whole run) | runs ok |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for a in agg:
        if a["ok"]:
            lines.append(
                f"| {a['env']} | {a['config']} | {a['test_acc']:.4f} | "
                f"{1e3 * a['step_time_mean_s']:.1f} | {1e3 * a['step_time_median_s']:.1f} | "
                f"{fmt_bytes(a.get('bytes_per_step'))} | "
                f"{fmt_bytes(a.get('link_tx_per_host_step'))} | "
                f"{fmt_bytes(a.get('link_run_tx_per_host_step'))} | {a['ok']}/{a['runs']} |")
        else:
            err = a["errors"][0]
            why = "; ".join(err["error"])[:300].replace("|", "\\|")
            lines.append(f"| {a['env']} | {a['config']} | failed (exit {err['rc']}): {why} "
                         f"| | | | | | 0/{a['runs']} |")
    lines.append("")
    ov = overlap_figures(agg)
    if ov:
        lines.append("Overlap (AdaComp hook, ms/step mean, overlap vs --no-overlap):")
        lines.append("")
        for env, on, off, how in ov:
            lines.append(f"- {env}, {how}: {1e3 * on:.1f} with overlap, {1e3 * off:.1f} without "
                         f"({100 * (off - on) / off:+.1f} % of the no-overlap step saved)")
        lines.append("")
        for a in agg:
            if "hook_time_per_step_s" in a:
                both = (f" (overlap steps {1e3 * a['hook_time_overlap_per_step_s']:.2f}, "
                        f"no-overlap steps {1e3 * a['hook_time_no_overlap_per_step_s']:.2f})"
                        if "hook_time_overlap_per_step_s" in a else "")
                lines.append(f"- {a['env']} {a['config']}: {1e3 * a['hook_time_per_step_s']:.2f} "
                             f"ms/step on the calling thread inside the hook{both}")
        lines.append("")
        bk = [a.get("buckets_per_step") for a in agg if a.get("buckets_per_step")]
        if bk:
            lines.append(f"DDP buckets per step: {bk[0]:.2f}.")
            lines.append("")
    fails = [a for a in agg if a.get("errors")]
    if fails:
        lines.append("Failures:")
        lines.append("")
        for a in fails:
            for e in a["errors"]:
                lines.append(f"- {a['env']} {a['config']} repeat {e['repeat']}: exit {e['rc']}: "
                             + " / ".join(e["error"]))
        lines.append("")
    return "\n".join(lines)


def overlap_figures(agg):
    by = {(a["env"], a["config"]): a for a in agg if a["ok"]}
    res = []
    for env in ENVS:
        on, off = by.get((env, "adacomp")), by.get((env, "adacomp-no-overlap"))
        if on and off:
            res.append((env, on["step_time_mean_s"], off["step_time_mean_s"],
                        f"separate runs ({min(on['ok'], off['ok'])} each)"))
        alt = by.get((env, "adacomp-alternate"))
        if alt and "step_time_overlap_mean_s" in alt:
            res.append((env, alt["step_time_overlap_mean_s"], alt["step_time_no_overlap_mean_s"],
                        f"alternate steps of the same run ({alt['ok']} run(s))"))
    return res


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--envs", default=",".join(ENVS),
                    help="comma list of loopback, unshaped, or a cluster rate such as 100mbit")
    ap.add_argument("--configs", default=",".join(DEFAULT_CONFIGS),
                    help="comma list of " + ", ".join(CONFIGS) + " (default: all but adacomp-alternate)")
    ap.add_argument("--bucket-cap-mb", type=float, default=0,
                    help="DDP bucket_cap_mb and first-bucket limit for every run (default: DDP's: "
                         "one bucket for this model)")
    ap.add_argument("--repeats", type=int, default=2,
                    help="rounds over the configurations (interleaved, so load spreads evenly)")
    ap.add_argument("--epochs", type=int, default=1)
    ap.add_argument("--train-limit", type=int, default=25600)
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--powersgd-start-iter", type=int, default=10)
    ap.add_argument("--warmup-steps", type=int, default=5)
    ap.add_argument("--timeout", type=int, default=300, help="seconds per run")
    ap.add_argument("--cluster-name", default="ddpc")
    ap.add_argument("--port", type=int, default=29640, help="first rendezvous port on the cluster")
    ap.add_argument("--pythonpath", default=module_dir())
    ap.add_argument("--out", default=experiment("ddp-compare", "data", "compare"))
    ap.add_argument("--name", default="ddp_compare", help="result file stem")
    ap.add_argument("--log-dir", default="/tmp/ddp_compare_logs")
    ap.add_argument("--keep-cluster", action="store_true", help="leave the last cluster up")
    args = ap.parse_args()
    envs = [e for e in args.envs.split(",") if e]
    configs = [c for c in args.configs.split(",") if c]
    for c in configs:
        if c not in CONFIGS:
            ap.error(f"unknown configuration {c!r}; one of {', '.join(CONFIGS)}")
    os.makedirs(args.out, exist_ok=True)
    os.makedirs(args.log_dir, exist_ok=True)
    try:
        import torch
        torch_version = torch.__version__
    except ImportError:
        torch_version = "?"
    cpu = "?"
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next((ln.split(":", 1)[1].strip() for ln in f if ln.startswith("model name")), "?")
    except OSError:
        pass
    meta = {
        "date": datetime.datetime.now().strftime("%Y-%m-%d %H:%M"),
        "command": shlex.join([PYTHON] + [os.path.relpath(sys.argv[0], ROOT)] + sys.argv[1:]),
        "machine": (f"{os.cpu_count()} CPUs ({cpu}), shared with other jobs; Python "
                    f"{platform.python_version()}, torch {torch_version}, Gloo"),
        "workload": (f"examples/ddp_fashion_mnist.py, 2 ranks x batch {args.batch_size}, "
                     f"{args.epochs} epoch(s) on the first {args.train_limit} training images "
                     f"({args.epochs * args.train_limit // (2 * args.batch_size)} steps), "
                     f"test accuracy on the full 10,000 test images; PowerSGD "
                     f"start_powerSGD_iter {args.powersgd_start_iter}; timed steps: after "
                     f"{args.warmup_steps} warm-up steps (PowerSGD: after "
                     f"{args.powersgd_start_iter + args.warmup_steps})"
                     + (f"; DDP bucket_cap_mb {args.bucket_cap_mb:g}" if args.bucket_cap_mb else "")),
        "repeats": args.repeats,
        "load_before": os.getloadavg(),
    }
    rows = []
    json_path = os.path.join(args.out, f"{args.name}.json")
    md_path = os.path.join(args.out, f"{args.name}.md")

    def save():
        agg = aggregate(rows)
        meta["load_after"] = os.getloadavg()
        with open(json_path, "w") as f:
            json.dump({"meta": meta, "summary": agg, "runs": rows}, f, indent=1)
        with open(md_path, "w") as f:
            f.write(markdown(meta, agg) + "\n")
        return agg

    port = args.port
    started = time.time()
    cluster_made = False
    try:
        for env in envs:
            if env != "loopback":
                try:
                    cluster_up(args, env)
                    cluster_made = True
                except (RuntimeError, subprocess.TimeoutExpired) as e:
                    log(f"{env}: no cluster: {e}")
                    for c in configs:
                        rows.append({"env": env, "config": c, "repeat": 0, "rc": 77,
                                     "status": "failed", "error": [f"no cluster: {e}"]})
                    save()
                    continue
            for rep in range(args.repeats):
                for c in configs:
                    log(f"{env} {c} repeat {rep} ...")
                    row = one_run(args, env, c, rep, port)
                    port += 1
                    rows.append(row)
                    if row["status"] == "ok":
                        log(f"  acc {row['test_acc']:.4f}  {1e3 * row['step_time_mean_s']:.1f} ms/step"
                            f"  {row.get('bytes_per_step', 0):,.0f} B/step  wall {row['wall_s']:.0f}s")
                    else:
                        log(f"  FAILED (exit {row['rc']}): {' / '.join(row['error'])}")
                    save()
    finally:
        if cluster_made and not args.keep_cluster:
            sh([CLUSTER, "--name", args.cluster_name, "down"], check=False)
    meta["elapsed_s"] = round(time.time() - started, 1)
    agg = save()
    print(markdown(meta, agg))
    print(f"\n(written: {os.path.relpath(json_path, ROOT)}, {os.path.relpath(md_path, ROOT)})")


if __name__ == "__main__":
    main()
