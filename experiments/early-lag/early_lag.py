#!/usr/bin/python3
"""Measures AdaComp's early lag behind dense and what the bin-size schedules do to it.

In-process runs of `adacomp train` (4 learners, global batch 128), each
scored on the whole 10,000-image test set every 16 steps and at each epoch
end, for seeds 1, 2, 3:

  dense     the float32 all-reduce
  adacomp   the paper's default (ternary, L_T 50 conv / 500 otherwise)
  ramp-*    the default with a bin-size ramp (--ramp-steps, --ramp-start,
            --ramp-stages)
  adapt     the default with the adaptive bin size (--adapt-threshold 0.5)
  local-fc  the default with momentum correction on the fc weights
            (--local-optimizer-types fc)
  local     the default with the optimizer's moments on each learner
            (--local-optimizer)
  l8, l8-fp32  L_T 8 for every tensor throughout, ternary and with float32
            values: what removing the lag costs (not schedules)

--model also takes the other cells of experiments/accuracy/report.md's grid: fc-dnn, cifar-cnn,
char-lstm, and MODEL-adam for Adam (experiments/early-lag/early_lag_grid.py runs them); char-lstm
is scored on its test loss.

--model ddp-example runs the PyTorch path instead: examples/ddp_fashion_mnist.py,
2 DDP processes on Gloo with 32 images each per step (937 steps an epoch), SGD
lr 0.02 momentum 0.9, scored on all 10,000 test images every 32 steps
(--eval-every) and at each epoch end, with the hook's
settings of DDP_CONFIGS (no hook for dense, the local optimizer through
adacomp.torch.split_optimizer).

From the summaries (experiments/early-lag/data/<model>/<config>-s<seed>.json) it
writes experiments/early-lag/report.md (mnist-cnn; other models experiments/early-lag/<model>.md),
experiments/early-lag/img/early_lag_<model>.png and early_lag_tradeoff_<model>.png (steps
against the whole-run rate, experiments/early-lag/early_lag_tradeoff.py):

  - the target: dense's test accuracy after one epoch (mean over seeds);
  - steps to it per run (the first evaluation at or above it), the mean over
    seeds and the ratio against dense's mean (target: at most 1.15x);
  - the gap to dense at each epoch end (mean over seeds) against the larger
    of 1 point and the seed spreads;
  - each schedule's bytes over the measured epochs, and the compression rate
    a full-length run would have (the measured steps, then the default's
    bytes per step for the rest of the full length, FULL_EPOCHS), against
    the default's;
  - the mean gap over two windows of the first epoch (its first 0.4, then to
    1.16 epochs), steadier than the step a curve first crosses the target.

Usage:
  /usr/bin/python3 experiments/early-lag/early_lag.py [--model mnist-cnn] [--epochs 2]
      [--seeds 1,2,3] [--only REGEX] [--report-only] [--adacomp PATH]

Each run is written once, atomically; a rerun skips the runs present, so an
interrupted set resumes. Standard library, plus matplotlib for the plot
(skipped without it).
"""

import argparse
import datetime
import json
import os
import platform
import re
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # resultslib
from early_lag_tradeoff import plot_tradeoff, tradeoff_points  # noqa: E402
from resultslib import curves, runner  # noqa: E402
from resultslib.paths import ROOT, adacomp_binary, experiment, module_dir  # noqa: E402
from resultslib.util import cores, cpu_name, pyplot  # noqa: E402

OUT = experiment("early-lag", "data")
DOC = experiment("early-lag", "report.md")

# name, extra flags, label
CONFIGS = [
    ("dense", ["--codec", "dense"], "dense (float32 all-reduce)"),
    ("adacomp", [], "AdaComp, fixed L_T (the default)"),
    ("ramp-468", ["--ramp-steps", "468", "--ramp-start", "16",
                  "--ramp-stages", "4"],
     "AdaComp, ramp L_T 16 -> target over 468 steps (one epoch), 4 stages"),
    ("ramp-128", ["--ramp-steps", "128", "--ramp-start", "8",
                  "--ramp-stages", "4"],
     "AdaComp, ramp L_T 8 -> target over 128 steps, 4 stages"),
    ("adapt", ["--adapt-threshold", "0.5"],
     "AdaComp, adaptive L_T (threshold 0.5, defaults otherwise)"),
    ("ramp-64", ["--ramp-steps", "64", "--ramp-start", "16",
                 "--ramp-stages", "2"],
     "AdaComp, ramp L_T 16 -> target over 64 steps, 2 stages"),
    ("local-fc", ["--local-optimizer-types", "fc"],
     "AdaComp, momentum correction on the fc weights (--local-optimizer-types fc)"),
    ("local", ["--local-optimizer"],
     "AdaComp, each learner's own optimizer moments (--local-optimizer)"),
    # What the lag costs to remove: light compression throughout, ternary and with the
    # selected values sent as float32 (not schedules: their rates are far below 0.8x).
    ("l8", ["--bin-size", "8"], "AdaComp, fixed L_T 8 for every tensor (--bin-size 8)"),
    ("l8-fp32", ["--bin-size", "8", "--values", "fp32"],
     "AdaComp, fixed L_T 8, float32 values (--bin-size 8 --values fp32)"),
]
# The same questions through the DDP hook (examples/ddp_fashion_mnist.py; an epoch
# is 937 steps of 2 x 32 images).
DDP_CONFIGS = [
    ("dense", ["--hook", "none"], "no hook (DDP's float32 all-reduce)"),
    ("adacomp", [], "AdaComp hook, fixed L_T (the default)"),
    ("ramp-937", ["--ramp-steps", "937", "--ramp-start", "16", "--ramp-stages", "4"],
     "AdaComp hook, ramp L_T 16 -> target over 937 steps (one epoch), 4 stages"),
    ("ramp-128", ["--ramp-steps", "128", "--ramp-start", "8", "--ramp-stages", "4"],
     "AdaComp hook, ramp L_T 8 -> target over 128 steps, 4 stages"),
    ("local", ["--local-optimizer"],
     "AdaComp hook, momentum kept on each rank (--local-optimizer)"),
]
DDP_EXAMPLE = os.path.join(ROOT, "examples", "ddp_fashion_mnist.py")
# Settings kept on for the whole run (not schedules that end): their whole-run rate is
# taken as their rate over the measured epochs against the default's over the same
# epochs, not as those epochs followed by the default's bytes.
KEPT_ON = {"local", "local-fc", "l8", "l8-fp32"}
FULL_EPOCHS = {"mnist-cnn": 12, "fc-dnn": 12, "cifar-cnn": 8, "ddp-example": 8}


def configs(model):
    return DDP_CONFIGS if model == "ddp-example" else CONFIGS


def cell_parts(cell):
    """A cell of the grid of experiments/accuracy/report.md: "MODEL" (SGD with momentum, the
    trainer's default) or "MODEL-adam". Returns the trainer's model and the
    optimizer's flags."""
    if cell.endswith("-adam"):
        return cell[:-len("-adam")], ["--optimizer", "adam"]
    return cell, []


# What a cell is scored on: (summary key, higher is better, unit, how a gap is
# printed from the difference of the means, tolerance of a gap). char-lstm is
# scored on the test loss in nats per character, as in experiments/accuracy/report.md.
ACCURACY = ("test_accuracy", True, "pt", lambda d: f"{100 * d:+.2f} pt", 0.01)
LOSS = ("test_loss", False, "nats", lambda d: f"{-d:+.3f}", 0.05)


def metric(cell):
    return LOSS if cell_parts(cell)[0] == "char-lstm" else ACCURACY


def doc_path(model):
    return DOC if model == "mnist-cnn" else experiment("early-lag", f"{model}.md")


def machine():
    return f"{cpu_name(platform.processor() or platform.machine())}, {cores()} cores"


def run_path(model, name, seed):
    return os.path.join(OUT, model, f"{name}-s{seed}.json")


def run_one(adacomp, model, epochs, name, flags, seed):
    path = run_path(model, name, seed)
    if os.path.exists(path):
        return
    os.makedirs(os.path.dirname(path), exist_ok=True)
    tmp = path + ".tmp"
    if model == "ddp-example":  # the hook from this checkout's build
        cmd = [sys.executable, DDP_EXAMPLE, "--procs", "2", "--batch-size", "32",
               "--lr", "0.02", "--epochs", str(epochs), "--seed", str(seed),
               "--eval-every", "32", "--summary-json", tmp] + flags
        env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONPATH=module_dir() + os.pathsep + os.environ.get("PYTHONPATH", ""))
        read = from_example
    else:
        trainer_model, optimizer = cell_parts(model)
        cmd = [adacomp, "train", "--model", trainer_model, "--epochs", str(epochs),
               "--seed", str(seed), "--eval-every", "16",
               "--summary-out", tmp] + optimizer + flags
        env, read = None, dict
    print("run:", " ".join(cmd), flush=True)
    rc, out, seconds = runner.run_command(cmd, env=env)
    if rc != 0:
        sys.exit(f"failed ({rc}): {out[-2000:]}")
    summary = read(runner.load_and_remove(tmp))
    summary["early_lag"] = {
        "command": cmd[1:], "config": name,
        "date": datetime.date.today().isoformat(), "machine": machine(),
        "seconds": round(seconds, 1)}
    runner.keep_json(path, summary)
    key = metric(model)[0]
    print(f"  {name} seed {seed}: {key} {curve(summary, key)[-1][1]:.4f} in "
          f"{seconds:.0f} s", flush=True)


def from_example(ex):
    """The example's summary in the fields the report reads (the trainer's names):
    its evaluations, steps per epoch, and the frames all ranks sent (the hook's frame
    bytes per step of rank 0 x the ranks; 4 bytes x the parameters x the ranks for
    no hook, what a float32 all-gather of the gradients would carry)."""
    per = ex["epochs"][0]["steps"]
    sent = 0.0
    for i, ep in enumerate(ex["epochs"]):
        steps = ep["steps"] - (ex["epochs"][i - 1]["steps"] if i else 0)
        frame = ep.get("frame_bytes_per_step")
        sent += steps * (frame if frame is not None else 4 * ex["parameters"])
    return {"example": ex, "steps_per_epoch": per, "epochs": len(ex["epochs"]),
            "steps": ex["steps"], "test_accuracy": ex["test_acc"],
            "bytes_sent": sent * ex["world"],
            "epoch_metrics": [{"step": e["step"], "test_accuracy": e["test_acc"]}
                              for e in ex["evals"]]}


def curve(summary, key="test_accuracy"):
    """(step, metric) of every evaluation, in step order, one per step."""
    seen = {}
    for e in summary["epoch_metrics"]:
        seen[e["step"]] = e[key]
    return sorted(seen.items())


def steps_to(summary, target, key="test_accuracy", higher=True):
    return curves.steps_to(curve(summary, key), target, higher)


def epoch_ends(summary, key="test_accuracy"):
    per = summary["steps_per_epoch"]
    values = dict(curve(summary, key))
    return [values.get(per * (e + 1)) for e in range(int(summary["epochs"]))]


# Two windows of the first epoch, in epochs: the start, which the ramps act on, and
# the rest of the way to the one-epoch target. The mean of the metric over a
# window's evaluations is far steadier from seed to seed than the step at which a
# curve first crosses the target.
WINDOWS = ((0.0, 0.4), (0.4, 1.16))


def window_mean(summary, lo, hi, key="test_accuracy"):
    per = summary["steps_per_epoch"]
    values = [v for step, v in curve(summary, key) if lo * per < step <= hi * per]
    return statistics.mean(values) if values else None


def load(model, seeds):
    runs = {}
    for name, _, _ in configs(model):
        got = [run_path(model, name, s) for s in seeds]
        got = [p for p in got if os.path.exists(p)]
        if got:
            runs[name] = []
            for p in got:
                with open(p) as f:
                    runs[name].append(json.load(f))
    return runs


def fmt_steps(values):
    return ", ".join("-" if v is None else str(v) for v in values)


def cell_stats(model, seeds, full_epochs):
    """The figures of one cell: the target (dense's metric after one epoch, mean over
    seeds), and per config present: steps to it per seed, their mean and ratio to
    dense's, the gap to dense at each epoch end with its tolerance, bytes per step and
    the whole-run rate against the default's. None without dense and default runs."""
    runs = load(model, seeds)
    if "dense" not in runs or "adacomp" not in runs:
        return None
    key, higher, _, _, tol_min = metric(model)
    dense = runs["dense"]
    per = dense[0]["steps_per_epoch"]
    target = statistics.mean(epoch_ends(s, key)[0] for s in dense)
    dense_steps = [steps_to(s, target, key, higher) for s in dense]
    dense_mean = statistics.mean(v if v is not None else per * 99 for v in dense_steps)
    default_bytes = statistics.mean(s["bytes_sent"] / s["steps"] for s in runs["adacomp"])
    n_epochs = int(min(s["epochs"] for r in runs.values() for s in r))
    dense_ends = [epoch_ends(s, key) for s in dense]
    rows = []
    for name, _, label in configs(model):
        if name not in runs:
            continue
        rs = runs[name]
        st = [steps_to(s, target, key, higher) for s in rs]
        mean = statistics.mean(st) if None not in st else None
        gaps = []
        for e in range(n_epochs):
            mine = [epoch_ends(s, key)[e] for s in rs]
            theirs = [d[e] for d in dense_ends]
            diff = statistics.mean(mine) - statistics.mean(theirs)
            tol = max(tol_min, max(mine) - min(mine), max(theirs) - min(theirs))
            behind = -diff if higher else diff
            gaps.append((diff, tol, name != "dense" and behind > tol))
        windows = []
        for lo, hi in WINDOWS:
            mine = [window_mean(s, lo, hi, key) for s in rs]
            theirs = [window_mean(s, lo, hi, key) for s in dense]
            windows.append(None if None in mine + theirs
                           else statistics.mean(mine) - statistics.mean(theirs))
        full_steps = per * full_epochs
        full_bytes = (statistics.mean(s["bytes_sent"] for s in rs)
                      + default_bytes * (full_steps - statistics.mean(s["steps"] for s in rs)))
        bps = statistics.mean(s["bytes_sent"] / s["steps"] for s in rs)
        rows.append({"name": name, "label": label, "seeds": len(rs), "steps": st,
                     "mean": mean, "ratio": mean / dense_mean if mean is not None else None,
                     "gaps": gaps, "windows": windows,
                     "bytes_per_step": bps,
                     "rate_vs": (default_bytes / bps if name in KEPT_ON
                                 else default_bytes * full_steps / full_bytes)})
    return {"runs": runs, "target": target, "per": per, "n_epochs": n_epochs,
            "dense_mean": dense_mean, "rows": rows}


def measured_on(runs):
    """Every machine the runs were made on, with their dates, and which runs were where
    when there were several."""
    where = {}
    for name, rs in runs.items():
        for s in rs:
            names = where.setdefault((s["early_lag"]["machine"], s["early_lag"]["date"]), [])
            if name not in names:
                names.append(name)
    return "; ".join(f"{m} ({d})" + (f": {', '.join(names)}" if len(where) > 1 else "")
                     for (m, d), names in sorted(where.items(), key=lambda kv: kv[0][1]))


def fmt_target(model, target):
    return f"{100 * target:.2f}%" if metric(model)[1] else f"{target:.3f} nats/char"


def windows_reading(st, fmt_gap):
    """What the two windows say: the default's gap in each, the narrowest each window
    gets among the runs that keep at least 0.8x the default's rate, and among the rest."""
    rows = [r for r in st["rows"] if r["name"] != "dense" and None not in r["windows"]]
    default = next((r for r in rows if r["name"] == "adacomp"), None)
    if default is None or len(rows) < 2:
        return []
    out = ["", "Where the lag is (the two windows, mean over seeds against dense):", ""]
    for w, (lo, hi) in enumerate(WINDOWS):
        cheap = [r for r in rows if r["rate_vs"] >= 0.8]
        dear = [r for r in rows if r["rate_vs"] < 0.8]
        best = max(cheap, key=lambda r: r["windows"][w]) if cheap else None
        line = (f"- epoch {lo:g}-{hi:g}: the default {fmt_gap(default['windows'][w])}; "
                f"at 0.8x the default's rate or more, at best {fmt_gap(best['windows'][w])} "
                f"({best['label']})")
        if dear:
            top = max(dear, key=lambda r: r["windows"][w])
            line += (f"; below that rate, at best {fmt_gap(top['windows'][w])} "
                     f"({top['label']}, {top['rate_vs']:.2f}x the default's rate)")
        out.append(line + ".")
    return out


def report(model, seeds, full_epochs):
    st = cell_stats(model, seeds, full_epochs)
    if st is None:
        sys.exit("no dense and default runs to report yet")
    runs, target, per, n_epochs = st["runs"], st["target"], st["per"], st["n_epochs"]
    key, higher, unit, fmt_gap, tol_min = metric(model)
    trainer_model, optimizer = cell_parts(model)
    lines = [
        f"# The early lag: {model}",
        "",
        "Generated by `experiments/early-lag/early_lag.py"
        + (f" --model {model}" if model != "mnist-cnn" else "") + "` from "
        f"`experiments/early-lag/data/{model}/*.json`; rerun it to regenerate.",
        "",
        (f"`examples/ddp_fashion_mnist.py` through DDP: 2 processes on Gloo, 32 "
         f"images each per step, SGD lr 0.02 momentum 0.9, {n_epochs} epochs ({per} "
         "steps each), every run scored on all 10,000 test images every 32 steps "
         "and at each epoch end"
         if model == "ddp-example" else
         f"In-process `adacomp train --model {trainer_model}"
         + (" --optimizer adam" if optimizer else "") + "`: 4 learners, global "
         f"batch 128, {n_epochs} epochs ({per} steps each) at the default "
         "learning rate, every run scored on the whole test set every 16 "
         "steps and at each epoch end")
        + f"; seeds {', '.join(map(str, seeds))}. Measured on {measured_on(runs)}.",
        "",
        f"Target: dense's test {'accuracy' if higher else 'loss'} after one epoch, "
        f"mean over seeds: **{fmt_target(model, target)}**. Steps to it: the first "
        f"evaluation at or {'above' if higher else 'below'} it. The target is "
        "at most 1.15x dense's steps.",
        "",
        "| run | seeds | steps to the target | mean | vs dense | "
        + " | ".join(f"gap ep {e + 1}" for e in range(n_epochs))
        + " | " + " | ".join(f"mean gap, epoch {lo:g}-{hi:g}" for lo, hi in WINDOWS)
        + f" | bytes/step | rate over {full_epochs} epochs vs default |",
        "|---|---|---|---|---|" + "---|" * (n_epochs + len(WINDOWS)) + "---|---|",
    ]
    never = tradeoff_points(st)[1]
    verdicts = []
    for r in st["rows"]:
        gaps = [("**" if bold else "") + fmt_gap(diff) + ("**" if bold else "")
                for diff, _, bold in r["gaps"]]
        lines.append(
            f"| {r['label']} | {r['seeds']} | {fmt_steps(r['steps'])} | "
            + (f"{r['mean']:.0f}" if r["mean"] is not None else "not reached") + " | "
            + (f"{r['ratio']:.2f}x" if r["ratio"] is not None else "-") + " | "
            + " | ".join(gaps) + " | "
            + " | ".join("-" if w is None else fmt_gap(w) for w in r["windows"])
            + f" | {r['bytes_per_step'] / 1e3:.1f} kB | "
            + ("1 (dense)" if r["name"] == "dense" else f"{r['rate_vs']:.2f}x") + " |")
        if r["name"] != "dense" and r["ratio"] is not None:
            verdicts.append(
                f"- {r['label']}: {r['ratio']:.2f}x dense's steps "
                f"({'met' if r['ratio'] <= 1.15 else 'missed'}); whole-run rate "
                f"{r['rate_vs']:.2f}x the default's "
                f"({'met' if r['rate_vs'] >= 0.8 else 'missed'}, target 0.8x).")
    tol_words = "1 point" if higher else f"{tol_min} nats"
    lines += [
        "",
        f"*gap ep N*: mean {'accuracy' if higher else 'loss'} over seeds "
        f"{'minus' if higher else 'against'} dense's at that epoch end"
        + ("" if higher else " (negative: AdaComp's loss is higher)")
        + f"; **bold** when behind by more than the larger of {tol_words} and "
        "the two seed spreads (max - min). *mean gap, epoch a-b*: the metric "
        "averaged over the evaluations in that part of the run (the first 0.4 epoch; "
        "then to 1.16 epochs, past where the target is reached), mean over seeds, "
        "against dense's: a steadier view of the lag than the crossing step. "
        "*bytes/step*: frames sent by all "
        "learners per step over the measured epochs. *rate over "
        f"{full_epochs} epochs*: the compression rate a {full_epochs}-epoch "
        "run would have (these steps' bytes, then the default's bytes per "
        "step for the rest) over the default's; for the settings kept on "
        f"({', '.join(sorted(KEPT_ON))}), these epochs' bytes per step against the "
        "default's. The target is at least 0.8x.",
        "",
        "Against the targets:",
        "",
    ] + verdicts + windows_reading(st, fmt_gap) + [
        "",
        f"![test {'accuracy' if higher else 'loss'} against steps](img/early_lag_{model}.png)",
        "",
        "What each run trades: its steps to the target against its whole-run rate, "
        "with the targets' box (at most 1.15x dense's steps, at least 0.8x "
        "the default's rate)"
        + ("" if not never else
           "; runs that never reached the target are not in it ("
           + ", ".join(name for name, _, _ in never) + ")") + ":",
        "",
        f"![steps to the target against the rate](img/early_lag_tradeoff_{model}.png)",
        "",
        "Elsewhere: "
        + ("the same measurement in the C++ trainer (experiments/early-lag/report.md), "
           if model == "ddp-example" else
           "the same measurement through the DDP hook (experiments/early-lag/ddp-example.md), ")
        + "every cell of the grid side by side (experiments/early-lag/grid.md), "
        "the ramp through the DDP hook on ResNet-18 and the GPT "
        "(experiments/ddp-real-models/report.md), and whole schedules with and without it on 8 "
        "hosts of the cluster, timed to the end (experiments/scaling/schedule.md).",
        "",
    ]
    with open(doc_path(model), "w") as f:
        f.write("\n".join(lines))
    print("wrote", doc_path(model))
    plot(model, runs, target)
    plot_tradeoff(model, st)


def plot(model, runs, target):
    plt = pyplot()
    if plt is None:
        return
    key, higher = metric(model)[:2]
    scale = 100 if higher else 1
    shown = [c for c in configs(model) if c[0] in runs]
    # The legend goes below the axes, a line per run (and the target's): the figure
    # grows by its height.
    legend_in = 0.16 * (len(shown) + 1) + 0.3
    fig, ax = plt.subplots(figsize=(8, 4.2 + legend_in))
    for name, _, label in shown:
        if name not in runs:
            continue
        curves = [curve(s, key) for s in runs[name]]
        steps = [st for st, _ in curves[0]]
        common = [st for st in steps if all(st in dict(c) for c in curves)]
        accs = [[dict(c)[st] * scale for c in curves] for st in common]
        mean = [statistics.mean(a) for a in accs]
        line, = ax.plot(common, mean, label=label, lw=1.4)
        if len(curves) > 1:
            ax.fill_between(common, [min(a) for a in accs],
                            [max(a) for a in accs], alpha=0.15,
                            color=line.get_color(), lw=0)
    ax.axhline(target * scale, color="gray", ls=":", lw=1,
               label="target: dense after one epoch")
    if higher:
        ax.set_ylim(max(0, target * 100 - 25), target * 100 + 6)
    else:
        ax.set_ylim(target - 0.1, target + 0.8)
    ax.set_xlabel("step")
    ax.set_ylabel("test accuracy (%), whole test set" if higher
                  else "test loss (nats/char), whole test set")
    ax.set_title(f"{model}: mean over seeds, band = min to max")
    ax.grid(alpha=0.3)
    fig.tight_layout(rect=(0, legend_in / (4.2 + legend_in), 1, 1))
    fig.legend(*ax.get_legend_handles_labels(), fontsize=7, loc="lower center",
               bbox_to_anchor=(0.5, 0.0), frameon=False)
    path = experiment("early-lag", "img", f"early_lag_{model}.png")
    fig.savefig(path, dpi=110)
    print("wrote", path)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", default="mnist-cnn")
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--seeds", default="1,2,3")
    ap.add_argument("--only", default="", help="regex on config names")
    ap.add_argument("--report-only", action="store_true")
    ap.add_argument("--adacomp",
                    default=adacomp_binary())
    args = ap.parse_args()
    seeds = [int(s) for s in args.seeds.split(",")]
    if not args.report_only:
        for seed in seeds:  # every config once before the next seed
            for name, flags, _ in configs(args.model):
                if args.only and not re.search(args.only, name):
                    continue
                run_one(args.adacomp, args.model, args.epochs, name, flags,
                        seed)
    report(args.model, seeds, FULL_EPOCHS.get(args.model, 12))


if __name__ == "__main__":
    main()
