#!/usr/bin/python3
"""The early lag on every cell of the grid of experiments/accuracy/report.md, with and without the
bin-size ramp, and with the local optimizer on the Adam cells.

For each model x optimizer cell (mnist-cnn, fc-dnn, cifar-cnn, char-lstm; SGD with
momentum and Adam) it runs the first epochs of `adacomp train` in-process (4
learners, global batch 128, the default learning rate, the whole test set every
16 steps and at each epoch end): dense (the float32 all-reduce), the paper's fixed
L_T, the ramp (L_T 8 to each tensor's L_T over the first 128 steps in 4 geometric
stages: the schedule that met 1.15x through the DDP hook) and, on the Adam cells,
--local-optimizer (each learner's Adam step of its own gradient compressed).
The runs are experiments/early-lag/early_lag.py's (experiments/early-lag/data/<cell>/<config>-s<seed>.json;
a run present is not run again, so an interrupted set resumes); mnist-cnn's are
shared with experiments/early-lag/report.md and the DDP example's with
experiments/early-lag/ddp-example.md.

It writes experiments/early-lag/grid.md (per cell and run: the target, steps to it, the
gaps at each epoch end and over two windows, the bytes against the default's),
experiments/early-lag/img/early_lag_grid.png (each cell's curves against steps and against the bytes
sent) and experiments/early-lag/img/early_lag_grid_tradeoff.png (every image cell's runs, steps against
the whole-run rate).

Usage:
  /usr/bin/python3 experiments/early-lag/early_lag_grid.py [--cells mnist-cnn,fc-dnn-adam,...]
      [--seeds 1,2,3] [--epochs 2] [--report-only]

Seeds go in the outer loop (every cell once before the next seed), so a cut-short
sweep has every cell. Standard library, plus matplotlib for the plot.
"""

import argparse
import json
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # resultslib
import early_lag  # noqa: E402
import early_lag_tradeoff  # noqa: E402
from resultslib.paths import FULL_DIR, adacomp_binary, experiment  # noqa: E402
from resultslib.util import pyplot  # noqa: E402

DOC = experiment("early-lag", "grid.md")
IMG = experiment("early-lag", "img", "early_lag_grid.png")
TRADEOFF_IMG = experiment("early-lag", "img", "early_lag_grid_tradeoff.png")
CELLS = ("mnist-cnn", "mnist-cnn-adam", "fc-dnn", "fc-dnn-adam", "cifar-cnn",
         "cifar-cnn-adam", "char-lstm", "char-lstm-adam")
# The runs of each cell (experiments/early-lag/early_lag.py's names; runs_of adds LOCAL on the Adam
# cells), and their short names here.
RUNS = ("dense", "adacomp", "ramp-128")
RAMP = "ramp-128"
LOCAL = "local"
SHORT = {"adacomp": "default", RAMP: "ramp", LOCAL: "local optimizer"}
# Each model's length in experiments/accuracy/report.md (the rate over the whole run is reckoned
# over it).
FULL_EPOCHS = {"mnist-cnn": 12, "fc-dnn": 12, "cifar-cnn": 8, "char-lstm": 6}


def full_epochs(cell):
    if cell == "ddp-example":
        return early_lag.FULL_EPOCHS[cell]
    return FULL_EPOCHS[early_lag.cell_parts(cell)[0]]


def run(args, cells, seeds):
    flags = {name: f for name, f, _ in early_lag.CONFIGS}
    for seed in seeds:
        for cell in cells:
            for name in runs_of(cell):
                early_lag.run_one(args.adacomp, cell, args.epochs, name, flags[name], seed)


def cumulative_bytes(summary):
    """(step, bytes sent by all learners so far) at each evaluation. An evaluation's
    end-to-end rate covers its epoch so far (the trainer resets it at each epoch end),
    so the bytes so far are the earlier epochs' plus dense bytes / rate of this one."""
    per = summary["steps_per_epoch"]
    dense_per_step = summary["dense_bytes"] / summary["steps"]
    out, done = [], 0.0
    for e in sorted(summary["epoch_metrics"], key=lambda m: m["step"]):
        into = e["step"] - (e["step"] - 1) // per * per
        so_far = dense_per_step * into / e["compression_rate"]["end_to_end"]
        out.append((e["step"], done + so_far))
        if e["step"] % per == 0:
            done += so_far
    return out


def full_run(cell, codec, tag="", seed=1):
    """The cell's full-length run of experiments/accuracy/report.md at this seed (experiments/accuracy/data/full), or None."""
    model, opt = early_lag.cell_parts(cell)
    opt = "adam" if opt else "sgd"
    path = os.path.join(FULL_DIR, f"{model}_{codec}_{opt}_P4_B128_e"
                        f"{FULL_EPOCHS[model]}_s{seed}{tag}.json")
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def full_run_rate(cell, name):
    """For a run used the whole way (the local optimizer): its full-length rate over the
    default's, measured in experiments/accuracy/report.md's runs (experiments/accuracy/data/full, seed 1), or None."""
    if name != LOCAL:
        return None
    local, default = full_run(cell, "adacomp", "_local"), full_run(cell, "adacomp")
    try:
        return (local["compression_rate"]["end_to_end"]
                / default["compression_rate"]["end_to_end"])
    except (TypeError, KeyError):  # a run missing (None), or without the rate
        return None


# The seeds every cell is swept with.
STANDARD_SEEDS = (1, 2, 3)
RAMP_TAG = "_ramp128"  # the ramp's whole-schedule runs (experiments/resultslib/remedies.toml)


def whole_schedule_row(cell, st, seeds=STANDARD_SEEDS):
    """The table line of a cell's whole schedule with the ramp against the default, over
    the seeds that have all three runs (dense, default, ramp), or None where none has:
    the mean gap at the end with experiments/accuracy/report.md's verdict (0.3 points, 0.02 nats, or the
    seed spreads), the worst mean gap at an epoch end from epoch 2, and the full-run rate
    measured (the mean of the per-seed ratios) against the grid's estimate from 2
    epochs."""
    from resultslib.runs import final_metric
    from resultslib.verdicts import per_epoch_gaps, signed_gap, spread, verdict
    model = early_lag.cell_parts(cell)[0]
    sets = [(full_run(cell, "dense", seed=s), full_run(cell, "adacomp", seed=s),
             full_run(cell, "adacomp", RAMP_TAG, s)) for s in seeds]
    sets = [t for t in sets if None not in t]
    if not sets:
        return None
    dense, default, ramp = (list(runs) for runs in zip(*sets))
    _, higher_better, _, fmt_diff, _ = early_lag.metric(cell)

    def fmt_gap(gap):  # signed_gap's sign (negative: behind) to fmt_diff's AdaComp - dense
        return fmt_diff(gap if higher_better else -gap)

    def mean_final(rs):
        return spread([final_metric(r) for r in rs])[0]

    def end(ada):
        gap = signed_gap(model, mean_final(dense), mean_final(ada))
        return f"{fmt_gap(gap)} ({verdict(model, dense, ada, {})})"

    def worst(ada):
        return fmt_gap(min(per_epoch_gaps(model, dense, ada)[1:]))

    rate = statistics.fmean(r["compression_rate"]["end_to_end"]
                            / d["compression_rate"]["end_to_end"]
                            for r, d in zip(ramp, default))
    estimate = next((r["rate_vs"] for r in st["rows"] if r["name"] == RAMP), None)
    estimate = "-" if estimate is None else f"{estimate:.2f}x"
    return (f"| {cell} | {len(sets)} | {end(default)} -> {end(ramp)} | {worst(default)} -> "
            f"{worst(ramp)} | {rate:.2f}x | {estimate} |")


def whole_schedule_lines(stats):
    """The section on the ramp trained to the end, [] if no cell has its runs."""
    rows = [row for cell, st in stats.items() if cell in CELLS
            for row in [whole_schedule_row(cell, st)] if row]
    if not rows:
        return []
    return [
        "",
        "## The whole schedule with the ramp",
        "",
        "Each cell trained to the end of experiments/accuracy/report.md's schedule with the ramp "
        "(`experiments/accuracy/results.py --scale full --only ramp128`; seed 1 is in the remedies "
        "table of experiments/accuracy/report.md), against the same cell's dense and default runs at "
        "the same seeds. *end*: the mean gap to dense at the end (accuracy points; "
        "char-lstm nats/char), negative when AdaComp is behind, with experiments/accuracy/report.md's "
        "verdict (within 0.3 points, 0.02 nats, or the seed spreads); *worst from epoch "
        "2*: the most negative mean gap at an epoch end from the second on; *rate*: the "
        "ramp run's end-to-end rate over the default's at the same seed, measured (mean "
        "over seeds), beside the grid's estimate from its first 2 epochs (those epochs' "
        "bytes, then the default's per step).",
        "",
        "| cell | seeds | end (default -> ramp) | worst from epoch 2 (default -> ramp) | "
        "rate measured | rate estimated |",
        "|---|---|---|---|---|---|",
    ] + rows


def runs_of(cell):
    """The runs of a cell: dense, the default and the ramp; Adam cells also the local
    optimizer (each learner's Adam step compressed)."""
    return RUNS + ((LOCAL,) if cell.endswith("-adam") else ())


def cell_rows(cell, st):
    """The grid table's lines of one cell: one per compressed run."""
    fmt_gap = early_lag.metric(cell)[3]
    out = []
    for r in st["rows"]:
        if r["name"] == "dense" or r["name"] not in runs_of(cell):
            continue
        gaps = " / ".join(("**" if bold else "") + fmt_gap(diff) + ("**" if bold else "")
                          for diff, _, bold in r["gaps"])
        windows = ("-" if None in r["windows"]
                   else " / ".join(fmt_gap(w) for w in r["windows"]))
        ratio = "not reached" if r["ratio"] is None else f"{r['ratio']:.2f}x"
        full = full_run_rate(cell, r["name"])
        rate = ("1 (the default)" if r["name"] == "adacomp" else
                f"{full:.2f}x (measured over the full run)" if full is not None else
                f"{r['rate_vs']:.2f}x")
        out.append(f"| {cell} | {SHORT[r['name']]} | {r['seeds']} | "
                   f"{early_lag.fmt_target(cell, st['target'])} | {st['dense_mean']:.0f} | "
                   f"{ratio} | {gaps} | {windows} | {rate} |")
    return out


def verdict(cell, r):
    """One run's line against the targets."""
    ratio = r["ratio"]
    steps = "not reached" if ratio is None else f"{ratio:.2f}x"
    if early_lag.metric(cell)[1]:
        steps += "" if ratio is None else f" ({'met' if ratio <= 1.15 else 'missed'})"
    else:
        steps += " (not an image cell: no steps target)"
    behind = [i + 1 for i, (_, _, bold) in enumerate(r["gaps"]) if bold]
    rate = full_run_rate(cell, r["name"])
    rate = r["rate_vs"] if rate is None else rate
    return (f"- {cell}, {SHORT[r['name']]}: steps {steps}; epoch gaps "
            + ("all within tolerance" if not behind else
               "beyond tolerance at epoch " + ", ".join(map(str, behind)))
            + (f"; whole-run rate {rate:.2f}x ({'met' if rate >= 0.8 else 'missed'})"
               if r["name"] != "adacomp" else "") + ".")


def report(cells, seeds):
    stats = {}
    for cell in cells + ["ddp-example"]:  # the DDP example's runs: experiments/early-lag/early_lag.py
        st = early_lag.cell_stats(cell, seeds, full_epochs(cell))
        if st is not None:
            stats[cell] = st
    if not stats:
        sys.exit("no cell has dense and default runs yet")
    machines = sorted({s["early_lag"]["machine"] for st in stats.values()
                       for rs in st["runs"].values() for s in rs})
    lines = [
        "# The early lag on every cell, with and without the ramp",
        "",
        "Generated by `experiments/early-lag/early_lag_grid.py` from `experiments/early-lag/data/<cell>/*.json`; "
        "rerun it to regenerate.",
        "",
        "Each cell of experiments/accuracy/report.md's grid (the model, and SGD with momentum or Adam at "
        "the default learning rate), in-process `adacomp train`: 4 learners, global batch "
        "128, the first 2 epochs (the learning rate is constant over them in the full "
        "schedules too), the whole test set every 16 steps and at each epoch end. Runs per "
        "seed: dense (float32 all-reduce), AdaComp's fixed L_T (the default), the ramp "
        "(L_T 8 to each tensor's L_T over the first 128 steps in 4 geometric stages) and, "
        "on the Adam cells, the local optimizer (`--local-optimizer`: each learner's Adam "
        "step of its own gradient is compressed, and the average applied as plain SGD). "
        f"Measured on {'; '.join(machines)}.",
        "",
        "| cell | run | seeds | target: dense after 1 epoch | dense's steps to it | steps "
        "vs dense | gap ep 1 / ep 2 | mean gap, epoch 0-0.4 / 0.4-1.16 | whole-run rate vs "
        "default |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for cell in stats:
        lines.extend(cell_rows(cell, stats[cell]))
    if "ddp-example" in stats:
        lines += ["", "The DDP example's rows are examples/ddp_fashion_mnist.py through the "
                  "hook (experiments/early-lag/ddp-example.md: 2 processes x 32 images, no hook "
                  "for dense); they are in the table and the trade-off plot, not in the curves."]
    lines += [
        "",
        "*steps vs dense*: the mean over seeds of the steps to the target (the first "
        "evaluation at or past it) over dense's mean; the target is at most 1.15x "
        "on every image cell. *gap*: the mean over seeds against dense's at that epoch "
        "end, accuracy points (char-lstm: nats per character, negative when its loss is "
        "higher); **bold** when behind by more than the larger of 1 point (0.05 nats) and "
        "the seed spreads. *mean gap, epoch a-b*: the metric averaged over the evaluations in "
        "that part of the run, against dense's (steadier than the crossing step). "
        "*whole-run rate*: the compression rate the full-length run of experiments/accuracy/report.md "
        "would have with this run's first epochs (their bytes, then the default's per "
        "step), over the default's; the target is at least 0.8x. The local optimizer "
        "stays on for the whole run, so its rate is the one experiments/accuracy/report.md measured over "
        "the full length (experiments/accuracy/data/full, seed 1) where that run exists.",
        "",
        "Against the targets:",
        "",
    ]
    for cell, st in stats.items():
        for r in st["rows"]:
            if r["name"] != "dense" and r["name"] in runs_of(cell):
                lines.append(verdict(cell, r))
    lines += ["", "![the early lag on every cell](img/early_lag_grid.png)", "",
              "What each run trades on the image cells"
              + (" and the DDP example" if "ddp-example" in stats else "")
              + ": its steps to "
              "dense's one-epoch accuracy against its whole-run rate (the rate column "
              "above), with the targets' box; runs that never reached the "
              "target, and the char-lstm cells (no steps target), are not in it:", "",
              "![steps to the target against the rate, every image cell]"
              "(img/early_lag_grid_tradeoff.png)"]
    lines += whole_schedule_lines(stats) + [""]
    with open(DOC, "w") as f:
        f.write("\n".join(lines))
    print("wrote", DOC)
    plot(stats)


def tradeoff_points(stats):
    """(cell, short run name, whole-run rate against the default's, steps against
    dense's) of every compressed run of the image cells (and the DDP example) that
    reached the target; the rate is the one the table gives."""
    out = []
    for cell, st in stats.items():
        if not early_lag.metric(cell)[1]:
            continue
        for r in st["rows"]:
            if r["name"] == "dense" or r["name"] not in runs_of(cell) or r["ratio"] is None:
                continue
            full = full_run_rate(cell, r["name"])
            rate = 1.0 if r["name"] == "adacomp" else full if full is not None else r["rate_vs"]
            out.append((cell, SHORT[r["name"]], rate, r["ratio"]))
    return out


def plot_tradeoff(stats):
    """experiments/early-lag/img/early_lag_grid_tradeoff.png: tradeoff_points, a colour per cell and a
    marker per run, the targets' box shaded."""
    plt = pyplot()
    points = tradeoff_points(stats)
    if plt is None or not points:
        return
    cells = list(dict.fromkeys(c for c, _, _, _ in points))
    marker = {"default": "o", "ramp": "^", "local optimizer": "s"}
    fig, ax = early_lag_tradeoff.tradeoff_axes(
        plt, [x for _, _, x, _ in points], [y for _, _, _, y in points], (7.5, 5.6), 1.15,
        "every image cell: what each run trades (mean over 3 seeds)")
    for cell, run, x, y in points:
        ax.scatter([x], [y], marker=marker[run], s=50, zorder=3,
                   color=plt.cm.tab10(cells.index(cell) % 10))
    # The legend: the cells' colours, the runs' markers, the box.
    handles = [plt.Line2D([], [], ls="", marker="o", color=plt.cm.tab10(k % 10), label=c)
               for k, c in enumerate(cells)]
    handles += [plt.Line2D([], [], ls="", marker=m, color="gray", label=run)
                for run, m in marker.items()]
    handles.append(plt.Rectangle((0, 0), 1, 1, color="tab:green", alpha=0.12,
                                 label=early_lag_tradeoff.TARGET_BOX))
    early_lag_tradeoff.save_with_legend_below(plt, fig, handles, 0.17, TRADEOFF_IMG)


def plot(stats):
    plt = pyplot()
    if plt is None:
        return
    cells = [c for c in stats if c != "ddp-example"]
    cols = min(4, len(cells))
    groups = (len(cells) + cols - 1) // cols  # each group: a row of steps, one of bytes
    fig, grid_axes = plt.subplots(2 * groups, cols, figsize=(3.3 * cols, 3.1 * 2 * groups),
                                  squeeze=False)
    for k in range(len(cells), groups * cols):  # unused places in the last group
        grid_axes[2 * (groups - 1)][k % cols].axis("off")
        grid_axes[2 * (groups - 1) + 1][k % cols].axis("off")
    colors = {"dense": "tab:gray", "adacomp": "tab:blue", RAMP: "tab:orange",
              LOCAL: "tab:green"}
    labels = {"dense": "dense", "adacomp": "AdaComp, fixed L_T", RAMP: "AdaComp, ramp",
              LOCAL: "AdaComp, local optimizer (Adam cells)"}
    for i, cell in enumerate(cells):
        col = i % cols
        axes = grid_axes[2 * (i // cols):2 * (i // cols) + 2]
        st = stats[cell]
        key, higher = early_lag.metric(cell)[:2]
        scale = 100 if higher else 1
        for name in runs_of(cell):
            rs = st["runs"].get(name)
            if not rs:
                continue
            curves = [dict(early_lag.curve(s, key)) for s in rs]
            steps = sorted(set.intersection(*(set(c) for c in curves)))
            mean = [statistics.mean(c[t] for c in curves) * scale for t in steps]
            axes[0][col].plot(steps, mean, color=colors[name], lw=1.2, label=labels[name])
            sent = [dict(cumulative_bytes(s)) for s in rs]
            xs = [statistics.mean(b[t] for b in sent) / 1e6 for t in steps]
            axes[1][col].plot(xs, mean, color=colors[name], lw=1.2, label=labels[name])
        for row in (0, 1):
            ax = axes[row][col]
            ax.axhline(st["target"] * scale, color="k", ls=":", lw=0.8)
            if higher:
                ax.set_ylim(st["target"] * 100 - 20, st["target"] * 100 + 5)
            else:
                ax.set_ylim(st["target"] - 0.1, st["target"] + 0.6)
            ax.grid(alpha=0.3)
            ax.tick_params(labelsize=7)
        axes[1][col].set_xscale("log")
        axes[0][col].set_title(cell, fontsize=9)
        axes[0][col].set_xlabel("step", fontsize=8)
        axes[1][col].set_xlabel("MB sent by all learners", fontsize=8)
        if col == 0:
            axes[0][col].set_ylabel("test accuracy (%) or loss", fontsize=8)
            axes[1][col].set_ylabel("the same against bytes", fontsize=8)
    seen = {}  # every run's line once (the local optimizer is on the Adam cells only)
    for ax in grid_axes.flat:
        for h, label in zip(*ax.get_legend_handles_labels()):
            seen.setdefault(label, h)
    grid_axes[0][0].legend(list(seen.values()), list(seen), fontsize=7, loc="lower right")
    fig.suptitle("The early lag: mean over seeds; dotted: dense after one epoch "
                 "(char-lstm: loss, lower is better)", fontsize=10)
    fig.tight_layout()
    fig.savefig(IMG, dpi=100)
    print("wrote", IMG)
    plot_tradeoff(stats)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--cells", default=",".join(CELLS))
    ap.add_argument("--seeds", default="1,2,3")
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--report-only", action="store_true")
    ap.add_argument("--adacomp", default=adacomp_binary())
    args = ap.parse_args()
    cells = args.cells.split(",")
    for c in cells:
        if c not in CELLS:
            ap.error(f"unknown cell {c!r}; one of {', '.join(CELLS)}")
    seeds = [int(s) for s in args.seeds.split(",")]
    if not args.report_only:
        run(args, cells, seeds)
    report(*report_scope(seeds))


def report_scope(seeds):
    """(cells, seeds) the doc covers after a sweep of these seeds: every cell, and the
    standard seeds with them, whatever the sweep ran, so that a sweep of a few cells
    or seeds does not drop the others' runs from the doc."""
    return list(CELLS), sorted(set(seeds) | set(STANDARD_SEEDS))


if __name__ == "__main__":
    main()
