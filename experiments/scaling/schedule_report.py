#!/usr/bin/python3
"""experiments/scaling/schedule.md from experiments/scaling/data/schedule/*.json (experiments/scaling/scaling.py
--part schedule): mnist-cnn's and fc-dnn's whole schedules on 8 hosts of the
namespace cluster, trained to the end, AdaComp (with and without the bin-size ramp) against the
dense rings, and the time each needs to three targets.

Targets, from the float32 ring's run (its accuracy does not depend on the link;
the fp16 ring's when there is none): its test accuracy after one epoch, after half
of the schedule, and its final accuracy minus 0.3 points. Time to a target = the
training seconds (the trainer's train_seconds: steps only, no evaluations) at the
first evaluation at or above it. "Fastest ring" = whichever ring run on that link
reaches the target first.

Usage: /usr/bin/python3 experiments/scaling/schedule_report.py   (writes the doc and its plot)
"""

import glob
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # resultslib
from resultslib import curves  # noqa: E402
from resultslib.paths import experiment  # noqa: E402
from resultslib.util import machine_name, pyplot  # noqa: E402

RES = experiment("scaling", "data", "schedule")
DOC = experiment("scaling", "schedule.md")
IMG = experiment("scaling", "img", "cluster_schedule_{}.png")
MODELS = ("mnist-cnn", "fc-dnn")
NAMES = {"dense": "float32 ring", "fp16": "fp16 ring", "adacomp": "AdaComp",
         "adacomp-ramp": "AdaComp, ramp"}
RINGS = ("dense", "fp16")
LINKS = (("100mbit", "100 Mbit/s"), ("1gbit", "1 Gbit/s"), ("10gbit", "10 Gbit/s"),
         ("unshaped", "unshaped links"))
TOLERANCE = 0.003
# The targets: at least 3x sooner than the fastest ring at 100 Mbit/s, no
# later at 1 Gbit/s, at most 1.05x later at 10 Gbit/s and unshaped (ratio = ring's
# time / AdaComp's time).
NEEDED = {"100mbit": 3.0, "1gbit": 1.0, "10gbit": 1 / 1.05, "unshaped": 1 / 1.05}


def load(codecs=None, folder=RES):
    """{model: {(codec, link): run}} of the runs in folder, of the given codecs (None:
    every one)."""
    runs = {}
    for path in sorted(glob.glob(os.path.join(folder, "*.json"))):
        with open(path) as f:
            r = json.load(f)
        if codecs is None or r["codec"] in codecs:
            runs.setdefault(r["model"], {})[(r["codec"], r["link"])] = r
    return runs


def evals(r):
    """[(step, test accuracy, training seconds)] of a run's evaluations."""
    return [(e["step"], e["test_accuracy"], e["train_seconds"])
            for e in r["summary"]["epoch_metrics"]]


def accuracy_at(r, step):
    return next((a for s, a, _ in evals(r) if s >= step), None)


def time_to(r, target):
    """(training seconds, step) at the first evaluation reaching target, or None."""
    ev = evals(r)
    step = curves.steps_to(((s, a) for s, a, _ in ev), target - 1e-12)
    return None if step is None else next((t, s) for s, a, t in ev
                                          if s == step and a >= target - 1e-12)


def targets(runs):
    # Every link trains the same weights; the 1 Gbit/s run first, where there is one.
    order = sorted(runs.items(), key=lambda kv: (kv[0][1] != "1gbit", kv[0]))
    ref = next((r for (c, _), r in order if c == "dense"), None) or next(
        (r for (c, _), r in order if c == "fp16"), None)
    if ref is None:
        return None, None
    # The epochs of the schedule: the last evaluation's epoch (counted from 0) + 1.
    epochs = ref["summary"]["epoch_metrics"][-1]["epoch"] + 1
    per_epoch = ref["summary"]["steps"] // epochs
    ev = evals(ref)
    return ref, {"after one epoch": accuracy_at(ref, per_epoch),
                 "after half the schedule": accuracy_at(ref, (epochs // 2) * per_epoch),
                 "final minus 0.3 points": ev[-1][1] - TOLERANCE}


def fmt_time(x):
    return "not reached" if x is None else f"{x[0]:.1f} s (step {x[1]})"


def section(runs, tg):
    lines = []
    for link, link_name in LINKS:
        here = {c: r for (c, l), r in runs.items() if l == link}
        if not here:
            continue
        lines += [f"### {link_name}", "",
                  "| run | final accuracy | steps | training s | s/step | bytes sent per "
                  "step and learner | compression | " + " | ".join(
                      f"time to {k} ({100 * v:.2f} %)" for k, v in tg.items()) + " |",
                  "|---|---|---|---|---|---|---|" + "---|" * len(tg)]
        for c in NAMES:
            r = here.get(c)
            if r is None:
                continue
            s = r["summary"]
            t = evals(r)[-1][2]
            rate = s.get("compression_rate") or {}
            e2e = rate.get("end_to_end") if isinstance(rate, dict) else rate
            lines.append(
                f"| {NAMES[c]} | {100 * s['test_accuracy']:.2f} % | {s['steps']} | {t:.1f} | "
                f"{t / s['steps']:.3f} | "
                f"{s['wire_bytes_per_step_per_learner']['sent']:,.0f} | "
                + (f"{e2e:.0f}x" if e2e else "-") + " | "
                + " | ".join(fmt_time(time_to(r, v)) for v in tg.values()) + " |")
        lines.append("")
        for c in ("adacomp", "adacomp-ramp"):
            if c not in here:
                continue
            for k, v in tg.items():
                mine = time_to(here[c], v)
                rings = [(time_to(here[rc], v), rc) for rc in RINGS if rc in here]
                rings = [(x, rc) for x, rc in rings if x is not None]
                if not rings:
                    lines.append(f"- {NAMES[c]}, {k}: no ring run reaches it here.")
                    continue
                best, rc = min(rings)
                if mine is None:
                    lines.append(f"- {NAMES[c]}, {k}: not reached; the {NAMES[rc]} needs "
                                 f"{best[0]:.1f} s: **missed**.")
                    continue
                ratio = best[0] / mine[0]
                verdict = "met" if ratio >= NEEDED[link] else "missed"
                how = f"{ratio:.2f}x sooner" if ratio >= 1 else f"{1 / ratio:.2f}x later"
                need = (f"{NEEDED[link]:g}x sooner" if NEEDED[link] >= 1
                        else f"at most {1 / NEEDED[link]:.2f}x later")
                lines.append(f"- {NAMES[c]}, {k}: {mine[0]:.1f} s against the {NAMES[rc]}'s "
                             f"{best[0]:.1f} s: {how} (target {need}: **{verdict}**).")
        lines.append("")
    return lines


def plot(model, runs, tg):
    plt = pyplot()
    if plt is None:
        return None
    links = [(l, name) for l, name in LINKS if any(k[1] == l for k in runs)]
    cols = min(3, 1 + len(links))
    rows = (len(links) + cols) // cols
    fig, grid = plt.subplots(rows, cols, figsize=(5 * cols, 4.2 * rows), squeeze=False)
    axes = list(grid.flat)
    colors = {"dense": "black", "fp16": "tab:gray", "adacomp": "tab:blue",
              "adacomp-ramp": "tab:green"}
    drawn = set()
    for (c, link), r in sorted(runs.items()):
        ev = evals(r)
        if c not in drawn:  # against steps: one curve per run kind (link-independent)
            axes[0].plot([s for s, _, _ in ev], [100 * a for _, a, _ in ev], label=NAMES[c],
                         color=colors[c])
            drawn.add(c)
        i = 1 + [l for l, _ in links].index(link)
        axes[i].plot([t for _, _, t in ev], [100 * a for _, a, _ in ev], label=NAMES[c],
                     color=colors[c])
    titles = ["against steps"] + [f"against training seconds, {name}" for _, name in links]
    for ax, title in zip(axes, titles):
        for v in tg.values():
            ax.axhline(100 * v, color="red", lw=0.6, ls="--")
        ax.set_title(f"{model}, 8 hosts: {title}", fontsize=10)
        ax.set_ylabel("test accuracy (%, 10,000 images)")
        ax.set_ylim(bottom=100 * min(tg.values()) - 8)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
        ax.set_xlabel("step" if ax is axes[0] else "seconds of training")
    for ax in axes[len(titles):]:
        ax.set_visible(False)
    fig.tight_layout()
    path = IMG.format(model)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return os.path.relpath(path, os.path.dirname(DOC))


def main():
    by_model = load(NAMES)  # auto's runs: auto_schedule_report.py
    if not by_model:
        sys.exit("no experiments/scaling/data/schedule/*.json (run experiments/scaling/scaling.py --part schedule)")
    first = next(iter(next(iter(by_model.values())).values()))
    lines = [
        "# The whole schedule on the cluster",
        "",
        "Generated by `experiments/scaling/schedule_report.py` from `experiments/scaling/data/schedule/*.json`; "
        "the runs: `sudo /usr/bin/python3 experiments/scaling/scaling.py --part schedule` "
        f"(measured on {machine_name(first)}: the 8 hosts of the "
        "namespace cluster share them, so compute per step is that of 8 learners on 2 cores; "
        "the ratios between runs are what carries over).",
        "",
        "Each model trained to the end, not extrapolated: 12 epochs of the first 16,384 "
        "Fashion-MNIST training images (128 steps of 128 images an epoch, 16 per host; "
        "seed 1; lr x0.1 after epochs 6 and 9), evaluated on all 10,000 test images every "
        "32 steps. 8 hosts, every link shaped with `tc tbf` (and on unshaped veth links; "
        "fc-dnn's 10 Gbit/s and unshaped runs were made later, beside auto-schedule.md's). The ramp: L_T 8 to the "
        "defaults over the first epoch (128 steps), 4 stages. The float32 ring is not run at "
        "100 Mbit/s: there its step on 8 hosts is 1.4-1.5x the fp16 ring's "
        "(experiments/scaling/report.md), so the fp16 ring is the fastest ring there.",
        "",
        "AdaComp should reach each target at least 3x sooner than the fastest "
        "ring at 100 Mbit/s, no later at 1 Gbit/s, and at most 1.05x later at 10 Gbit/s "
        "and unshaped. One seed per run: where a target "
        "lies on a flat stretch of a curve, an evaluation's noise (about +-0.4 points on "
        "10,000 images) moves the first crossing by many steps.",
        "",
    ]
    for model in [x for x in MODELS if x in by_model] + sorted(set(by_model) - set(MODELS)):
        runs = by_model[model]
        ref, tg = targets(runs)
        lines += [f"## {model}", ""]
        if tg is None:
            lines += ["No ring run yet to take the targets from.", ""]
            continue
        lines += ["Targets, from the " + NAMES[ref["codec"]] + "'s run: " + "; ".join(
            f"{k} {100 * v:.2f} %" for k, v in tg.items()) + ".", ""]
        lines += section(runs, tg)
        img = plot(model, runs, tg)
        if img:
            lines += [f"![{model}: accuracy against steps and training seconds]({img})", ""]
    lines += ["The runs' trainer commands (each run under `scripts/cluster.sh run --mpi`, one "
              "learner per host; its JSON holds the whole record):", ""]
    for model, runs in sorted(by_model.items()):
        for (c, link), r in sorted(runs.items()):
            cmd = r["command"].split(" --summary-out ")[0]  # less the run's temporary file
            lines.append(f"- {model}, {NAMES[c]}, {link}: `{cmd}`")
    lines.append("")
    with open(DOC, "w") as f:
        f.write("\n".join(lines))
    print("wrote", DOC)


if __name__ == "__main__":
    main()
