"""The plots of experiments/accuracy/report.md: experiments/accuracy/img/full_*.png from the full-scale and
DDP runs (matplotlib through util.pyplot(); none without it)."""

import os
import statistics

from .util import pyplot

from .configs import MODELS, OPTIMIZERS
from .fmt import fmt_rate
from .paths import IMG_DIR
from .runs import (LAYER_TYPES, cell_runs, codec_of, ddp_variant_options, epoch_metric,
                   is_lstm, load_ddp_runs, load_runs, read_metrics, spec, tagged_runs)

# One style per codec in the baselines plot.
CODEC_STYLES = {
    "dense": dict(color="black", lw=2), "adacomp": dict(color="tab:red", lw=2),
    "topk": dict(color="tab:blue"), "threshold": dict(color="tab:orange"),
    "onebit": dict(color="tab:green"), "terngrad": dict(color="tab:purple"),
}
# One colour per layer type in every plot.
TYPE_COLORS = {"conv": "tab:blue", "fc": "tab:orange", "lstm": "tab:green", "other": "tab:gray"}

# The local optimizer's figure: per panel (model, optimizer, lines of
# (codec, tag, label), title); each line is the mean over the seeds present.
LOCAL_PANELS = (
    ("char-lstm", "sgd", (("dense", "_lr8x_clip", "dense"),
                          ("adacomp", "_lr8x_clip", "AdaComp"),
                          ("adacomp", "_lr8x_clip_mc", "AdaComp + momentum correction")),
     "lr 8, clip 0.25"),
    ("char-lstm", "adam", (("dense", "_lr4x", "dense, 8e-3"),
                           ("dense", "_lr8x", "dense, 1.6e-2"),
                           ("adacomp", "_lr4x", "AdaComp, 8e-3"),
                           ("adacomp", "_lr4x_local", "AdaComp + local Adam, 8e-3"),
                           ("adacomp", "_lr8x_local", "AdaComp + local Adam, 1.6e-2")), "Adam"),
    ("fc-dnn", "sgd", (("dense", "", "dense"), ("adacomp", "", "AdaComp"),
                       ("adacomp", "_mc", "AdaComp + momentum correction")), "lr 0.05"),
    ("fc-dnn", "adam", (("dense", "", "dense"), ("adacomp", "", "AdaComp"),
                        ("adacomp", "_local", "AdaComp + local Adam")), "lr 1e-3"),
    ("mnist-cnn", "sgd", (("dense", "", "dense"), ("adacomp", "", "AdaComp"),
                          ("adacomp", "_mc", "AdaComp + momentum correction")), "lr 0.02"),
    ("cifar-cnn", "adam", (("dense", "", "dense"), ("adacomp", "", "AdaComp"),
                           ("adacomp", "_local", "AdaComp + local Adam"),
                           ("adacomp", "_localfc", "AdaComp + local Adam, fc only")), "lr 1e-3"),
)


def mean_band(ax, x, ys, seeds, label, color, alpha=0.2, **style):
    """One line of a seed set: the mean of ys[k] (the seeds' values at x[k])
    with markers, labelled with the number of seeds, and the min-max band
    where there is more than one seed."""
    ax.plot(x, [statistics.fmean(v) for v in ys], marker="o", ms=3, color=color,
            label="%s (%d seed%s)" % (label, seeds, "s" if seeds > 1 else ""), **style)
    if seeds > 1:
        ax.fill_between(x, [min(v) for v in ys], [max(v) for v in ys], color=color, alpha=alpha)


def not_run_yet(ax):
    ax.text(0.5, 0.5, "not run yet", ha="center", va="center", transform=ax.transAxes)


def save(plt, fig, name):
    """Writes experiments/accuracy/img/NAME, closes the figure and returns the path."""
    path = os.path.join(IMG_DIR, name)
    fig.savefig(path, dpi=80)
    plt.close(fig)
    return path


def plots(configs):
    """Writes experiments/accuracy/img/full_*.png; returns the files written."""
    plt = pyplot()
    if plt is None:
        return []
    runs = load_runs(configs)
    if not runs:
        return []
    os.makedirs(IMG_DIR, exist_ok=True)
    written = []
    colors = {"dense": "black", "adacomp": "tab:red"}

    # Test accuracy (loss) against epoch, and against bytes sent.
    for name, xkind in (("full_curves.png", "epoch"), ("full_bytes.png", "bytes")):
        fig, axes = plt.subplots(2, 4, figsize=(16, 7), squeeze=False)
        for i, opt in enumerate(OPTIMIZERS):
            for j, model in enumerate(MODELS):
                ax = axes[i][j]
                for codec in ("dense", "adacomp"):
                    rs = cell_runs(runs, model, opt, codec)
                    if not rs:
                        continue
                    n = min(len(r["epoch_metrics"]) for r in rs)
                    ys = [[epoch_metric(model, r["epoch_metrics"][k]) for r in rs] for k in range(n)]
                    if xkind == "epoch":
                        x = list(range(1, n + 1))
                    else:
                        x = cumulative_bytes(rs[0])[:n]
                    mean_band(ax, x, ys, len(rs), codec, colors[codec])
                if xkind == "bytes":
                    ax.set_xscale("log")
                    ax.set_xlabel("bytes sent by all learners")
                else:
                    ax.set_xlabel("epoch")
                ax.set_ylabel("test loss / char" if is_lstm(model) else "test accuracy")
                ax.set_title("%s, %s" % (model, opt))
                ax.grid(alpha=0.3)
                if ax.lines:
                    ax.legend(fontsize=8)
                else:
                    not_run_yet(ax)
        fig.suptitle("Dense vs AdaComp, 4 learners, trained to the end (mean over seeds; band: "
                     "min-max)" + (" against bytes sent" if xkind == "bytes" else ""))
        fig.tight_layout()
        written.append(save(plt, fig, name))

    written.append(rates_plot(plt, runs))
    for path in (baselines_plot(plt, runs), ddp_plot(plt), local_plot(plt, runs)):
        if path:
            written.append(path)
    return written


def rates_plot(plt, runs):
    """experiments/accuracy/img/full_rates.png: selected per bin and compression rate over
    training, per layer type (SGD, seed 1, from the step metrics)."""
    fig, axes = plt.subplots(2, 4, figsize=(16, 7), squeeze=False)
    specs = [(c, spec(c)) for c, _ in runs.values()]
    for j, model in enumerate(MODELS):
        rs = [c for c, s in specs if s.table == "models" and s.model == model and
              s.codec == "adacomp" and s.optimizer == "sgd" and s.seed == 1]
        if not rs:
            for ax in (axes[0][j], axes[1][j]):
                ax.set_title(model)
                not_run_yet(ax)
            continue
        steps = read_metrics(rs[0]["id"])
        for t in LAYER_TYPES:
            xs = [s["step"] for s in steps if s["selected_per_bin"].get(t) is not None]
            if not xs:
                continue
            axes[0][j].plot(xs, [s["selected_per_bin"][t] for s in steps
                                 if s["selected_per_bin"].get(t) is not None], label=t,
                            color=TYPE_COLORS[t])
            axes[1][j].plot(xs, [s["compression_rate"][t] for s in steps
                                 if s["selected_per_bin"].get(t) is not None], label=t,
                            color=TYPE_COLORS[t])
        axes[0][j].set_title("%s: selected per bin" % model)
        axes[1][j].set_title("%s: compression rate" % model)
        axes[1][j].set_yscale("log")
        for ax in (axes[0][j], axes[1][j]):
            ax.set_xlabel("step")
            ax.grid(alpha=0.3)
            if ax.lines:
                ax.legend(fontsize=8)
    fig.suptitle("AdaComp over training per layer type (SGD, seed 1, every 50th step)")
    fig.tight_layout()
    return save(plt, fig, "full_rates.png")


def local_plot(plt, runs):
    """experiments/accuracy/img/full_local.png: the optimizer on each learner (--local-optimizer)
    against the paper's optimizer after aggregation and dense, per epoch."""
    fig, axes = plt.subplots(2, 3, figsize=(16, 8), squeeze=False)
    drawn = False
    for ax, (model, opt, lines, setting) in zip([a for row in axes for a in row], LOCAL_PANELS):
        shades = {"dense": iter(["black", "gray"]), "AdaComp": iter(["tab:red", "salmon"]),
                  "local": iter(["tab:blue", "tab:cyan"])}
        for codec, tag, label in lines:
            if tag == "":  # the main table's runs
                rs = cell_runs(runs, model, opt, codec)
            else:
                rs = tagged_runs(runs, model, opt, codec, tag)
            kind = "dense" if codec == "dense" else ("local" if "+" in label else "AdaComp")
            color = next(shades[kind])
            if not rs:
                continue
            n = min(len(r["epoch_metrics"]) for r in rs)
            ys = [[epoch_metric(model, r["epoch_metrics"][k]) for r in rs] for k in range(n)]
            mean_band(ax, list(range(1, n + 1)), ys, len(rs), label, color, alpha=0.15,
                      lw=2 if kind != "AdaComp" else 1.2)
            drawn = True
        ax.set_title("%s, %s, %s" % (model, opt, setting))
        ax.set_xlabel("epoch")
        ax.set_ylabel("test loss / char" if is_lstm(model) else "test accuracy")
        ax.grid(alpha=0.3)
        if ax.lines:
            ax.legend(fontsize=7)
        else:
            not_run_yet(ax)
    if not drawn:
        plt.close(fig)
        return None
    fig.suptitle("The optimizer on each learner before compression (--local-optimizer) "
                 "against the paper's optimizer after aggregation (4 learners; band: min-max "
                 "over seeds)")
    fig.tight_layout()
    return save(plt, fig, "full_local.png")


def cumulative_bytes(r):
    """Bytes sent by all learners at each epoch end, from the per-epoch rates."""
    per_step = r["dense_bytes"] / max(1, r["steps"])
    out, total = [], 0.0
    for e in r["epoch_metrics"]:
        rate = e["compression_rate"]["end_to_end"] or 1.0
        total += per_step * r["steps_per_epoch"] / rate
        out.append(total)
    return out


def baselines_plot(plt, runs):
    """experiments/accuracy/img/full_baselines.png: mnist-cnn, SGD, seed 1, every codec: test
    accuracy against epoch and against bytes sent."""
    rows = []
    for c, r in runs.values():
        s = spec(c)
        if s.model != "mnist-cnn" or s.optimizer != "sgd" or s.seed != 1:
            continue
        if s.table == "baselines" or (s.table == "models" and s.tag == ""):
            rows.append((c["order"], codec_of(r), r))
    if not any(codec not in ("dense", "adacomp") for _, codec, _ in rows):
        return None
    fig, axes = plt.subplots(1, 2, figsize=(13, 4.5), squeeze=False)
    for _, codec, r in sorted(rows, key=lambda x: x[0]):
        acc = [e["test_accuracy"] for e in r["epoch_metrics"]]
        style = CODEC_STYLES.get(codec, {})
        label = "%s (%s)" % (codec, fmt_rate(r["compression_rate"]["end_to_end"]))
        axes[0][0].plot(range(1, len(acc) + 1), acc, marker="o", ms=3, label=label, **style)
        axes[0][1].plot(cumulative_bytes(r), acc, marker="o", ms=3, label=label, **style)
    # The left panel zooms on the codecs within a few points of dense; what
    # falls below is named (the right panel shows the whole range).
    best = max(e["test_accuracy"] for _, _, r in rows for e in r["epoch_metrics"])
    below = sorted({codec for _, codec, r in rows
                    if r["epoch_metrics"][-1]["test_accuracy"] < best - 0.1})
    axes[0][0].set_ylim(best - 0.1, best + 0.005)
    if below:
        axes[0][0].text(0.02, 0.98, "below the axis: " + ", ".join(below), ha="left",
                        va="top", transform=axes[0][0].transAxes, fontsize=9)
    return save_epoch_bytes_figure(
        plt, fig, axes[0], "bytes sent by all learners",
        "mnist-cnn on Fashion-MNIST, SGD, 4 learners, 12 epochs, seed 1: every codec "
        "(legend: end-to-end compression rate)", "full_baselines.png")


def ddp_plot(plt):
    """experiments/accuracy/img/full_ddp.png: DDP test accuracy, no hook against the AdaComp
    hook (mean over seeds, band min-max), against epoch and against the bytes
    one rank handed to its collectives."""
    runs = load_ddp_runs()
    if not runs.get("none") or not runs.get("adacomp"):
        return None
    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    settings = [("none", "DDP, no hook", "black"), ("adacomp", "DDP, AdaComp hook", "tab:red")]
    colors = ["tab:blue", "tab:green", "tab:purple", "tab:orange"]
    for i, key in enumerate(sorted(k for k in runs if k.startswith("adacomp_") and "@" not in k)):
        settings.append((key, "DDP, AdaComp hook, %s" % ddp_variant_options(runs[key]),
                         colors[i % len(colors)]))
    for hook, label, color in settings:
        rs = runs[hook]
        n = min(len(r["epochs"]) for r in rs)
        ys = [[r["epochs"][k]["test_acc"] for r in rs] for k in range(n)]
        # Bytes per rank at each epoch end: the epoch's mean bytes per step x its steps.
        sent, total, prev = [], 0.0, 0
        for e in rs[0]["epochs"][:n]:
            total += e["bytes_per_step"] * (e["steps"] - prev)
            prev = e["steps"]
            sent.append(total)
        for ax, x in ((axes[0], list(range(1, n + 1))), (axes[1], sent)):
            mean_band(ax, x, ys, len(rs), label, color)
    return save_epoch_bytes_figure(
        plt, fig, axes, "bytes one rank handed to its collectives",
        "PyTorch DDP on Gloo, 2 ranks x 32 images, Fashion-MNIST, trained to the end "
        "(band: min-max over seeds)", "full_ddp.png")


def save_epoch_bytes_figure(plt, fig, axes, bytes_label, title, name):
    """Labels a pair of test-accuracy panels (against epoch, against bytes on a
    log axis), writes experiments/accuracy/img/NAME and returns its path."""
    axes[0].set_xlabel("epoch")
    axes[1].set_xlabel(bytes_label)
    axes[1].set_xscale("log")
    for ax in axes:
        ax.set_ylabel("test accuracy")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    fig.suptitle(title)
    fig.tight_layout()
    return save(plt, fig, name)
