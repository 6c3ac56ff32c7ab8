#!/usr/bin/python3
"""Where the AdaComp DDP hook's CPU goes on ResNet-18 (11.2M parameters).

Two parts, printed as Markdown tables and kept in experiments/ddp-real-models/data/hook_cpu.json:

  parts  the hook's C++ work measured alone, one process, on ResNet-18-sized
         gradients (one compressor per parameter at its layer type's default
         bin size, Gaussian gradients after 3 steps of residue): compressing
         every parameter, the same with the rollback point every step takes
         first (Compressor.snapshot(): for adacomp no copy, the compression
         writes its residue beside the kept one), and decoding and
         averaging P ranks' messages (P = 2, 4; the same frames repeated).
         time.thread_time, best of 5.
  runs   examples/ddp_resnet18.py on 4 processes over loopback (16 images per
         rank, 20 steps, the first 8 untimed: the first steps' frames are the
         largest and their decode scratch is still growing, which the steady
         state does not pay): the summary's cpu_per_step_s,
         the hook's CPU on every thread against backward's, for the all-gather
         and the reduce-scatter exchange, with and without the local optimizer.
  batches  the all-gather runs again (with and without the local optimizer)
         at 16, 32 and 64 images per rank: the hook's work per step does
         not depend on the batch, backward's grows with it, so this says
         from which batch the hook costs less than a given share.
  one-call the one call (adacomp.torch.DistributedOptimizer) against the setting it
         replaced as our recommendation (split_optimizer's local optimizer; on the
         GPT with each rank's clip in the hook), on ResNet-18 at 32 images per rank
         and on the GPT at its batch of 8, 4 processes, 20 steps of which the first 8
         are not counted; the settings alternate over --rounds rounds so that the
         machine's load falls alike on each, and the table gives each one's median.

Usage: /usr/bin/python3 experiments/ddp-real-models/hook_cpu.py
           [--part parts|runs|batches|one-call|both] [--rounds 3] [--pythonpath build/python]
"""

import argparse
import json
import os
import platform
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # resultslib
from resultslib.paths import ROOT, experiment, module_dir  # noqa: E402
from resultslib.runner import run_command  # noqa: E402
from resultslib.util import cores, cpu_name  # noqa: E402

OUT = experiment("ddp-real-models", "data", "hook_cpu.json")


def best_ms(fn, reps=5):
    best = float("inf")
    for _ in range(reps):
        t = time.thread_time()
        fn()
        best = min(best, time.thread_time() - t)
    return 1e3 * best


def parts():
    import numpy as np
    import torch
    import torchvision
    from adacomp import Compressor, _adacomp
    from adacomp.torch.layers import DEFAULT_BIN_SIZES, layer_types_of

    torch.manual_seed(0)
    model = torchvision.models.resnet18(num_classes=10)
    types = layer_types_of(model)
    named = list(model.named_parameters())
    total = sum(p.numel() for _, p in named)
    grad = (torch.randn(total) * 1e-2).numpy()
    comps, layout, off = [], [], 0
    for k, (name, p) in enumerate(named):
        comps.append(Compressor(p.numel(), codec="adacomp",
                                bin_size=DEFAULT_BIN_SIZES[types[name]], tensor_id=k))
        layout.append((off, p.numel()))
        off += p.numel()

    def compress_all():
        return [c.compress(grad[o:o + n]) for c, (o, n) in zip(comps, layout)]

    for _ in range(3):
        frames = compress_all()
    message = b"".join(frames)

    def compress_marked():
        for c in comps:
            c.snapshot()
        out = compress_all()
        for c in comps:
            c.discard_snapshot()
        return out

    out = np.empty(total, np.float32)
    ids = list(range(len(layout)))
    res = {"elements": total, "message_bytes": len(message),
           "compress_ms": best_ms(compress_all),
           "compress_marked_ms": best_ms(compress_marked)}
    for p in (2, 4):
        views = [memoryview(message)] * p
        res[f"decode_P{p}_ms"] = best_ms(lambda: _adacomp.decompress_average_messages(
            views, [out[o:o + n] for o, n in layout], ids))
    return res


def short_run(args, pythonpath, what):
    """Runs an example (args: its path from the repository root, then its options) with
    the AdaComp hook on 4 processes for 20 steps, the first 8 not timed; its summary.
    The options added go into args in place, after the script, so the record shows them."""
    env = dict(os.environ, PYTHONPATH=pythonpath, OMP_NUM_THREADS="1")
    args[1:1] = ["--procs", "4", "--steps", "20", "--warmup-steps", "8", "--log-every",
                 "100", "--hook", "adacomp"]
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "s.json")
        rc, text, _ = run_command([sys.executable] + args + ["--summary-json", path],
                                  timeout=1800, env=env, cwd=ROOT)
        if rc != 0:
            sys.exit(f"{what} failed ({rc}): {text[-2000:]}")
        with open(path) as f:
            return json.load(f)


RUNS = [("all-gather", ["--exchange", "allgather"]),
        ("all-gather, local optimizer", ["--exchange", "allgather", "--local-optimizer"]),
        ("reduce-scatter", ["--exchange", "reduce-scatter"]),
        ("reduce-scatter, local optimizer", ["--exchange", "reduce-scatter",
                                             "--local-optimizer"])]


BATCHES = (16, 32, 64)


def runs(pythonpath, plan=None):
    """plan: (label, extra args, images per rank) triples; RUNS at 16 images by default."""
    out = []
    for label, extra, batch in plan or [(label, extra, 16) for label, extra in RUNS]:
        args = ["examples/ddp_resnet18.py", "--batch-size", str(batch),
                "--eval-images", "256"] + extra
        s = short_run(args, pythonpath, label)
        c = s["cpu_per_step_s"]
        out.append({"run": label, "batch": batch, "command": args,
                    "backward_ms": 1e3 * c["backward"], "hook_ms": 1e3 * c["hook"],
                    "bytes_per_step": s["bytes_per_step"]})
        print(f"  {label}: hook {out[-1]['hook_ms']:.1f} ms, backward "
              f"{out[-1]['backward_ms']:.1f} ms", flush=True)
    return out


# (model, label, the example and its options, whether it is the recommendation the one
# call replaced); the GPT's model sizes are experiments/ddp-real-models' "gpt".
GPT_SIZE = ["--layers", "4", "--dim", "320", "--heads", "5", "--context", "128",
            "--batch-size", "8", "--eval-windows", "8"]
ONE_CALL = [
    ("resnet18", "local optimizer (split_optimizer)", "ddp_resnet18.py",
     ["--batch-size", "32", "--eval-images", "256", "--local-optimizer"], True),
    ("resnet18", "the one call", "ddp_resnet18.py",
     ["--batch-size", "32", "--eval-images", "256", "--one-call"], False),
    # The one call as it was before it stopped masking the velocity: what of the
    # difference is the one call's, what the larger frames of an unmasked velocity.
    ("resnet18", "the one call, velocity masked", "ddp_resnet18.py",
     ["--batch-size", "32", "--eval-images", "256", "--one-call", "--mask"], False),
    ("gpt", "local optimizer, each rank's clip in the hook", "ddp_gpt.py",
     GPT_SIZE + ["--local-optimizer", "--local-clip", "1.0"], True),
    ("gpt", "the one call", "ddp_gpt.py", GPT_SIZE + ["--one-call"], False),
]


def one_call(pythonpath, rounds):
    """Each ONE_CALL setting once per round, in turn: [{model, run, round, hook_ms,
    backward_ms, ...}]."""
    out = []
    for k in range(rounds):
        for model, label, script, extra, recommended in ONE_CALL:
            args = ["examples/" + script] + extra
            s = short_run(args, pythonpath, f"{model}, {label}")
            c = s["cpu_per_step_s"]
            out.append({"model": model, "run": label, "recommended": recommended,
                        "round": k, "command": args, "hook_ms": 1e3 * c["hook"],
                        "backward_ms": 1e3 * c["backward"],
                        "bytes_per_step": s["bytes_per_step"]})
            print(f"  round {k + 1}, {model}, {label}: hook {out[-1]['hook_ms']:.1f} ms, "
                  f"backward {out[-1]['backward_ms']:.1f} ms", flush=True)
    return out


def one_call_table(rows):
    """Markdown: per model and setting the median hook and backward CPU over the rounds,
    and the one call's hook CPU as a ratio to the recommendation's."""
    import statistics
    lines = ["| model | setting | rounds | hook CPU ms/step (median) | backward CPU ms/step | "
             "hook / backward | hook CPU vs the recommendation |", "|---|---|---|---|---|---|---|"]
    for model in dict.fromkeys(r["model"] for r in rows):
        mine = [r for r in rows if r["model"] == model]
        for label in dict.fromkeys(r["run"] for r in mine):
            rs = [r for r in mine if r["run"] == label]
            h = statistics.median(r["hook_ms"] for r in rs)
            b = statistics.median(r["backward_ms"] for r in rs)
            # The ratio per round (the settings of a round ran back to back), then the median.
            ratios = [r["hook_ms"] / next(x["hook_ms"] for x in mine if x["recommended"]
                                          and x["round"] == r["round"]) for r in rs]
            lines.append(f"| {model} | {label} | {len(rs)} | {h:.1f} | {b:.1f} | "
                         f"{100 * h / b:.1f} % | "
                         + ("1 (the reference)" if rs[0]["recommended"] else
                            f"{statistics.median(ratios):.2f}x (rounds: "
                            + ", ".join(f"{x:.2f}" for x in ratios) + ")") + " |")
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--part", choices=("parts", "runs", "batches", "one-call", "both"),
                    default="both", help="both: parts and runs; batches and one-call only "
                    "when asked")
    ap.add_argument("--rounds", type=int, default=3, help="one-call: rounds of the settings")
    ap.add_argument("--pythonpath", default=module_dir())
    args = ap.parse_args()
    sys.path.insert(0, args.pythonpath)
    record = {}
    if os.path.exists(OUT):
        with open(OUT) as f:
            record = json.load(f)
    record["machine"] = f"{cpu_name(platform.machine())}, {cores()} cores"
    if args.part in ("parts", "both"):
        record["parts"] = parts()
    if args.part in ("runs", "both"):
        record["runs"] = runs(args.pythonpath)
    if args.part == "one-call":
        if args.rounds < 1:
            ap.error("--rounds must be at least 1")
        record["one_call"] = one_call(args.pythonpath, args.rounds)
    if args.part == "batches":
        record["batches"] = runs(args.pythonpath, [
            (label, extra, b) for b in BATCHES for label, extra in RUNS[:2]])
    os.makedirs(os.path.dirname(OUT), exist_ok=True)
    with open(OUT, "w") as f:
        json.dump(record, f, indent=1)
    print(f"Measured on {record['machine']}.\n")
    if "parts" in record:
        p = record["parts"]
        print(f"| part ({p['elements']:,} elements, messages of {p['message_bytes']:,} bytes) "
              "| CPU ms |\n|---|---|")
        for key, label in (("compress_ms", "compress every parameter"),
                           ("compress_marked_ms", "the same after the step's rollback point "
                            "(snapshot())"),
                           ("decode_P2_ms", "decode and average 2 messages"),
                           ("decode_P4_ms", "decode and average 4 messages")):
            if key in p:  # records before the rollback mark had snapshot_ms instead
                print(f"| {label} | {p[key]:.1f} |")
        print()
    if "runs" in record:
        print("| exchange | hook CPU ms/step | backward CPU ms/step | hook / backward | "
              "bytes/step |\n|---|---|---|---|---|")
        for r in record["runs"]:
            print(f"| {r['run']} | {r['hook_ms']:.1f} | {r['backward_ms']:.1f} | "
                  f"{100 * r['hook_ms'] / r['backward_ms']:.1f} % | "
                  f"{r['bytes_per_step'] / 1e6:.2f} MB |")
    if "batches" in record:
        print("\n| exchange | images per rank | hook CPU ms/step | backward CPU ms/step | "
              "hook / backward |\n|---|---|---|---|---|")
        for r in record["batches"]:
            print(f"| {r['run']} | {r['batch']} | {r['hook_ms']:.1f} | {r['backward_ms']:.1f} | "
                  f"{100 * r['hook_ms'] / r['backward_ms']:.1f} % |")
    if "one_call" in record:
        print("\n" + one_call_table(record["one_call"]))
    print(f"\nwrote {OUT}")


if __name__ == "__main__":
    main()
