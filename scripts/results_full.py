"""The full-scale part of docs/results.md (scripts/results.py --scale full).

Reads results/full/*.json (one `adacomp train --summary-out` summary per run,
with the "run" object results.py adds) and *.metrics.jsonl (step metrics),
and writes the tables (seed means and spreads, gaps against dense, per-epoch
gaps, targets met or missed) and the PNG plots under docs/img/. Standard
library, plus matplotlib for the plots (Debian python3-matplotlib); without
matplotlib the tables are still written and the plots are skipped.
"""

import json
import os
import statistics

from script_util import pyplot

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FULL_DIR = os.path.join(ROOT, "results", "full")
DDP_DIR = os.path.join(ROOT, "results", "ddp_full")  # scripts/ddp_accuracy.py
IMG_DIR = os.path.join(ROOT, "docs", "img")
MODELS = ("mnist-cnn", "fc-dnn", "cifar-cnn", "char-lstm")
OPTIMIZERS = ("sgd", "adam")
LAYER_TYPES = ("conv", "fc", "lstm", "other")
# Issue 13's targets: at the end, AdaComp within 0.3 points of dense (or the
# seed spread if larger); char-lstm within 0.02 nats per character.
ACC_TOLERANCE = 0.003
LOSS_TOLERANCE = 0.02
# The target beyond the paper: within 1 point of dense at every evaluation
# from the end of the second epoch on (0.05 nats/char, our reading for
# char-lstm), or within that epoch's seed spread if larger.
EARLY_ACC_TOLERANCE = 0.01
EARLY_LOSS_TOLERANCE = 0.05
# Options that are training settings rather than codec options (dense runs
# with them too; see remedies_table and longer_table).
TRAINING_OPTIONS = ("--lr", "--clip-grad-norm", "--lr-warmup-steps")
RATE_TARGETS = {"conv": 40.0, "fc": 200.0, "lstm": 200.0}
# One style per codec in the baselines plot.
CODEC_STYLES = {
    "dense": dict(color="black", lw=2), "adacomp": dict(color="tab:red", lw=2),
    "topk": dict(color="tab:blue"), "threshold": dict(color="tab:orange"),
    "onebit": dict(color="tab:green"), "terngrad": dict(color="tab:purple"),
}
# One colour per layer type in every plot.
TYPE_COLORS = {"conv": "tab:blue", "fc": "tab:orange", "lstm": "tab:green", "other": "tab:gray"}


def load_runs(configs):
    """{config id: (config, summary)} for the runs present."""
    out = {}
    for c in configs:
        path = os.path.join(FULL_DIR, c["id"] + ".json")
        if os.path.exists(path):
            with open(path) as f:
                out[c["id"]] = (c, json.load(f))
    return out


def is_lstm(model):
    return model == "char-lstm"


def final_metric(r):
    """Test accuracy (images) or test loss per character (char-lstm)."""
    if is_lstm(r["model"]):
        return r.get("test_loss_per_char", r.get("test_loss"))
    return r["test_accuracy"]


def epoch_metric(model, e):
    return e["test_loss"] if is_lstm(model) else e["test_accuracy"]


def signed_gap(model, dense, ada):
    """AdaComp against dense, > 0 when AdaComp is better: accuracy minus
    accuracy, or (char-lstm) dense's loss minus AdaComp's."""
    return (dense - ada) if is_lstm(model) else (ada - dense)


def codec_of(r):
    """The codec of a summary ("compressor" in summaries before 0.3)."""
    return r.get("codec", r.get("compressor"))


def cell_runs(runs, model, optimizer, codec, table="models", tag=""):
    """The summaries of one cell, one per seed, seed order."""
    out = []
    for c, r in runs.values():
        a = c["args"]
        if (c["table"] == table and a[1] == model and a[5] == optimizer and
            a[3] == codec and c.get("tag", "") == tag):
            out.append((c["seed"], r))
    return [r for _, r in sorted(out, key=lambda x: x[0])]


def spread(values):
    """(mean, max - min) over seeds; spread 0 for one seed."""
    if not values:
        return None, None
    return statistics.fmean(values), (max(values) - min(values))


def fmt_value(model, v):
    if v is None:
        return "-"
    return ("%.3f" % v) if is_lstm(model) else ("%.2f%%" % (100 * v))


def fmt_gap(model, g):
    if g is None:
        return "-"
    return ("%+.3f" % g) if is_lstm(model) else ("%+.2f pt" % (100 * g))


def fmt_spread(model, s, n):
    if n == 0:
        return "-"
    if s is None or n < 2:
        return "(1 seed)"
    return ("%.3f" % s) if is_lstm(model) else ("%.2f pt" % (100 * s))


def fmt_rate(v):
    if v is None:
        return "-"
    return "%.0fx" % v if v >= 100 else "%.1fx" % v


def mean_rates(rs):
    out = {}
    for t in LAYER_TYPES + ("end_to_end",):
        vals = [r["compression_rate"][t] for r in rs if r["compression_rate"].get(t) is not None]
        out[t] = statistics.fmean(vals) if vals else None
    return out


def verdict(model, dense, ada, rates):
    """'met' / 'missed' for the end-of-training target, with the reason."""
    dm, ds = spread([final_metric(r) for r in dense])
    am, as_ = spread([final_metric(r) for r in ada])
    if dm is None or am is None:
        return "not run"
    tol = LOSS_TOLERANCE if is_lstm(model) else ACC_TOLERANCE
    tol = max(tol, ds or 0, as_ or 0)
    gap = signed_gap(model, dm, am)
    ok = gap >= -tol
    rate_ok = all(rates.get(t) is None or rates[t] >= need for t, need in RATE_TARGETS.items())
    words = "met" if ok else "missed"
    if not rate_ok:
        words += ", rate below target"
    return words


def per_epoch_gaps(model, dense, ada):
    """Mean over seeds of AdaComp - dense at each epoch end (accuracy) or
    dense - AdaComp (loss), so negative means AdaComp is behind."""
    n = min([len(r["epoch_metrics"]) for r in dense + ada] or [0])
    gaps = []
    for i in range(n):
        d = statistics.fmean(epoch_metric(model, r["epoch_metrics"][i]) for r in dense)
        a = statistics.fmean(epoch_metric(model, r["epoch_metrics"][i]) for r in ada)
        gaps.append(signed_gap(model, d, a))
    return gaps


def per_epoch_spreads(model, rs):
    """max - min over the runs (seeds) of the test metric at each epoch end,
    as far as every run goes; 0 for one run."""
    n = min([len(r["epoch_metrics"]) for r in rs] or [0])
    out = []
    for i in range(n):
        out.append(spread([epoch_metric(model, r["epoch_metrics"][i]) for r in rs])[1])
    return out


def early_tolerances(model, dense, ada):
    """At each epoch end, the tolerance of the target beyond the paper: the
    larger of 1 point (0.05 nats/char) and dense's and AdaComp's seed spreads
    at that epoch."""
    base = EARLY_LOSS_TOLERANCE if is_lstm(model) else EARLY_ACC_TOLERANCE
    ds, as_ = per_epoch_spreads(model, dense), per_epoch_spreads(model, ada)
    return [max(base, d, a) for d, a in zip(ds, as_)]


def early_verdict(model, dense, ada):
    """'met' when the mean gap at every epoch end from the second on is within
    that epoch's tolerance; else 'missed' with the first epoch beyond it."""
    return early_verdict_of(model, per_epoch_gaps(model, dense, ada),
                            early_tolerances(model, dense, ada))


def early_verdict_of(model, gaps, tols):
    """early_verdict() on per-epoch mean gaps and tolerances."""
    if len(gaps) < 2:
        return "-"
    for i in range(1, len(gaps)):
        if gaps[i] < -tols[i]:
            return "missed (ep %d: %s, tolerance %s)" % (
                i + 1, fmt_gap(model, gaps[i]), fmt_tol(model, tols[i]))
    return "met"


def fmt_tol(model, t):
    return ("%.3f" % t) if is_lstm(model) else ("%.2f pt" % (100 * t))


def section(configs, lengths, seeds):
    """The markdown of the full-scale part (a list of lines)."""
    runs = load_runs(configs)
    lines = []
    w = lines.append
    w("## Trained to the end (`--scale full`)")
    w("")
    if not runs:
        w("No full-scale run has finished yet (results/full/ is empty).")
        w("")
        return lines
    total = sum(r["run"]["elapsed_seconds"] for _, r in runs.values())
    w("Each model trained with a step learning-rate schedule (x0.1 at two epochs), "
      "4 learners, global batch 128, seeds %s; dense is the float32 ring all-reduce, "
      "AdaComp the paper's default (ternary, L_T 50 conv / 500 otherwise). %d of %d "
      "runs present (%.0f minutes of training). Lengths: %s." % (
          ", ".join(str(s) for s in seeds), len(runs), len(configs), total / 60,
          "; ".join("%s %d epochs, decay at %s" % (m, e, ", ".join(str(x) for x in d))
                    for m, (e, d) in lengths.items())))
    w("")
    w("A gap counts only beyond the tolerance: 0.3 points (0.02 nats per character "
      "for char-lstm) or the seed spread (max - min over seeds), whichever is larger.")
    w("")
    w("| model | opt | seeds | dense | AdaComp | gap | spread (dense / AdaComp) | "
      "conv | fc | lstm | other | e2e | target | worst from ep 2 | target from ep 2 |")
    w("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    epoch_rows = []
    for model in MODELS:
        for opt in OPTIMIZERS:
            dense = cell_runs(runs, model, opt, "dense")
            ada = cell_runs(runs, model, opt, "adacomp")
            if not dense and not ada:
                continue
            dm, ds = spread([final_metric(r) for r in dense])
            am, as_ = spread([final_metric(r) for r in ada])
            rates = mean_rates(ada) if ada else {}
            gap = None
            if dm is not None and am is not None:
                gap = signed_gap(model, dm, am)
            n = min(len(dense), len(ada)) if dense and ada else max(len(dense), len(ada))
            worst = worst_gap_from_epoch2(model, dense, ada) if dense and ada else None
            early = "-"
            if dense and ada:
                gaps, tols = per_epoch_gaps(model, dense, ada), early_tolerances(model, dense, ada)
                early = early_verdict_of(model, gaps, tols)
                epoch_rows.append((model, opt, gaps, tols))
            w("| %s | %s | %d | %s | %s | %s | %s / %s | %s | %s | %s | %s | %s | %s | %s | %s |" % (
                model, opt, n, fmt_value(model, dm), fmt_value(model, am), fmt_gap(model, gap),
                fmt_spread(model, ds, len(dense)), fmt_spread(model, as_, len(ada)),
                fmt_rate(rates.get("conv")), fmt_rate(rates.get("fc")),
                fmt_rate(rates.get("lstm")), fmt_rate(rates.get("other")),
                fmt_rate(rates.get("end_to_end")), verdict(model, dense, ada, rates),
                fmt_gap(model, worst), early))
    w("")
    w("*gap*: AdaComp minus dense (accuracy points; for char-lstm dense minus AdaComp "
      "test loss per character), mean over seeds; negative means AdaComp is behind. "
      "*worst from ep 2*: the most negative gap at any epoch end from the second on. "
      "*target from ep 2*: the target beyond the paper, every one of those gaps within "
      "1 point (0.05 nats/char, our reading for char-lstm) or within that epoch's seed "
      "spread if larger (the second table below lists each tolerance); with one "
      "seed, 1 point.")
    w("")
    if epoch_rows:
        width = max(len(g) for _, _, g, _ in epoch_rows)
        w("Gap at the end of each epoch (mean over seeds; **bold**: beyond that epoch's "
          "tolerance, from the second epoch on):")
        w("")
        w("| model | opt | " + " | ".join("ep %d" % (i + 1) for i in range(width)) + " |")
        w("|---|---|" + "---|" * width)
        for model, opt, gaps, tols in epoch_rows:
            cells = [("**%s**" if i > 0 and g < -t else "%s") % fmt_gap(model, g)
                     for i, (g, t) in enumerate(zip(gaps, tols))]
            cells += [""] * (width - len(cells))
            w("| %s | %s | %s |" % (model, opt, " | ".join(cells)))
        w("")
        w("Tolerance at the end of each epoch: the larger of 1 point (0.05 nats/char) and "
          "the seed spreads (max - min) of dense and of AdaComp at that epoch. The "
          "high-learning-rate epochs spread widely from seed to seed:")
        w("")
        w("| model | opt | " + " | ".join("ep %d" % (i + 1) for i in range(width)) + " |")
        w("|---|---|" + "---|" * width)
        for model, opt, gaps, tols in epoch_rows:
            cells = [fmt_tol(model, t) for t in tols] + [""] * (width - len(tols))
            w("| %s | %s | %s |" % (model, opt, " | ".join(cells)))
        w("")
    for name in ("full_curves.png", "full_bytes.png", "full_rates.png", "full_baselines.png"):
        if os.path.exists(os.path.join(IMG_DIR, name)):
            w("![%s](img/%s)" % (name[:-4].replace("_", " "), name))
            w("")
    diagnosis = os.path.join(ROOT, "docs", "results", "diagnosis.md")
    if os.path.exists(diagnosis):
        with open(diagnosis) as f:
            lines.extend(f.read().rstrip().split("\n"))
        w("")
    lines.extend(remedies_table(runs))
    lines.extend(longer_table(runs))
    lines.extend(recommended_table(runs))
    if os.path.exists(os.path.join(IMG_DIR, "full_local.png")):
        w("![full local](img/full_local.png)")
        w("")
    recommendations = os.path.join(ROOT, "docs", "results", "recommendations.md")
    if os.path.exists(recommendations):
        with open(recommendations) as f:
            lines.extend(f.read().rstrip().split("\n"))
        w("")
    sweeps = [(c, r) for c, r in runs.values()
              if c["table"] not in ("models", "remedies", "longer", "recommended")]
    if sweeps:
        # The same-settings dense and AdaComp rows of the main table, for
        # reference, at each seed the sweeps have.
        sweep_seeds = {c["seed"] for c, _ in sweeps}
        sweeps += [(c, r) for c, r in runs.values()
                   if c["table"] == "models" and c["args"][1] == "mnist-cnn" and
                   c["args"][5] == "sgd" and c["seed"] in sweep_seeds]
        w("mnist-cnn sweeps and baselines (SGD; the *reference* rows are the main table's "
          "at the same seed):")
        w("")
        # Each row against dense at the same learner count, batch size, learning
        # rate (and warm-up) and seed.
        def key(r):
            return (r["learners"], r["batch_size"], r["lr"], r.get("lr_warmup_steps") or 0, r["seed"])
        dense_at = {key(r): r["test_accuracy"] for _, r in sweeps if codec_of(r) == "dense"}
        w("| table | codec | P | B | lr | seed | test accuracy | against dense (same P, B, lr, "
          "seed) | e2e rate |")
        w("|---|---|---|---|---|---|---|---|---|")
        for c, r in sorted(sweeps, key=lambda x: (x[0]["table"] != "models", x[0]["seed"],
                                                   x[0]["order"])):
            d = dense_at.get(key(r))
            against = "ref" if codec_of(r) == "dense" else (
                "(no dense run)" if d is None else fmt_gap(r["model"], r["test_accuracy"] - d))
            opts = codec_options(c)
            codec = codec_of(r) + ((", `%s`" % " ".join(opts)) if opts else "")
            w("| %s | %s | %d | %d | %s | %d | %.2f%% | %s | %s |" % (
                "reference" if c["table"] == "models" else c["table"], codec, r["learners"],
                r["batch_size"], setting_text(r), r["seed"], 100 * r["test_accuracy"], against,
                fmt_rate(r["compression_rate"]["end_to_end"])))
        w("")
    lines.extend(sweep_table(runs))
    lines.extend(ddp_section())
    return lines


def sweep_table(runs):
    """The learner and batch sweeps over their seeds: per learner count,
    global batch, learning rate (and warm-up) and codec options, AdaComp's
    mean against dense's at the same settings and seeds, with both spreads
    and the end-of-training verdict (0.3 points or the seed spread)."""
    groups = {}
    for c, r in runs.values():
        if c["table"] not in ("learners", "batch"):
            continue
        key = (r["learners"], r["batch_size"], r["lr"], setting_text(r))  # lr: numeric order
        groups.setdefault((key, codec_of(r), " ".join(codec_options(c))), {})[c["seed"]] = r
    rows = []
    for (key, codec, opts), by_seed in sorted(groups.items()):
        if codec == "dense":
            continue
        dense = groups.get((key, "dense", ""), {})
        seeds = sorted(set(by_seed) & set(dense))
        if not seeds:
            continue
        dm, ds = spread([dense[s]["test_accuracy"] for s in seeds])
        am, as_ = spread([by_seed[s]["test_accuracy"] for s in seeds])
        tol = max(ACC_TOLERANCE, ds, as_)
        rate = statistics.fmean(by_seed[s]["compression_rate"]["end_to_end"] for s in seeds)
        p, b, _, setting = key
        rows.append("| %d | %d | %s | %s | %s | %.2f%% | %.2f%% | %+.2f pt | %s / %s | %s | %s |" % (
            p, b, setting,
            ("`%s`" % opts) if opts else "the paper's default", ", ".join(str(x) for x in seeds),
            100 * dm, 100 * am, 100 * (am - dm), fmt_spread("cnn", ds, len(seeds)),
            fmt_spread("cnn", as_, len(seeds)), fmt_rate(rate),
            "met" if am - dm >= -tol else "missed"))
    if not rows:
        return []
    return ["mnist-cnn, SGD: the learner and batch sweeps over the seeds run, AdaComp against "
            "dense at the same learner count, batch, learning rate, warm-up and seeds (*target*: "
            "within 0.3 points or the seed spread, whichever is larger):", "",
            "| P | B | lr | AdaComp | seeds | dense | AdaComp | gap | spread (dense / AdaComp) | "
            "e2e rate | target |",
            "|---|---|---|---|---|---|---|---|---|---|---|"] + rows + [""]


def load_ddp_runs():
    """{setting: [summary, ...] in seed order} from results/ddp_full/: the
    setting is the hook ("none", "adacomp") followed by the run's variant tag
    (scripts/ddp_accuracy.py VARIANTS), e.g. "adacomp_fc250"."""
    out = {}
    if not os.path.isdir(DDP_DIR):
        return out
    for name in sorted(os.listdir(DDP_DIR)):
        if name.endswith(".json"):
            with open(os.path.join(DDP_DIR, name)) as f:
                r = json.load(f)
            out.setdefault(r["hook"] + r.get("run", {}).get("tag", ""), []).append(r)
    for rs in out.values():
        rs.sort(key=lambda r: r.get("seed", 0))
    return out


def ddp_variant_options(rs):
    """The example's options a variant adds to the default hook's (from its
    first run's recorded arguments), as the table shows them."""
    args = rs[0].get("run", {}).get("args", [])
    extra = []
    if "--hook" in args:
        extra = args[args.index("--hook") + 2:]
    return " ".join(extra)


def ddp_row(dense, ada, label, default_rate=None):
    """One table row: the AdaComp hook runs `ada` against `dense` at the same
    seeds (a variant may not have every seed yet); with default_rate (the
    default hook's mean rate) its rate as a share of it, else 1."""
    seeds = sorted({r["seed"] for r in dense} & {r["seed"] for r in ada})
    dense = [r for r in dense if r["seed"] in seeds]
    ada = [r for r in ada if r["seed"] in seeds]
    if not seeds:
        return None
    dm, ds = spread([r["test_acc"] for r in dense])
    am, as_ = spread([r["test_acc"] for r in ada])
    n = min(len(r["epochs"]) for r in dense + ada)
    gaps, tols = [], []
    for k in range(n):
        gaps.append(statistics.fmean(r["epochs"][k]["test_acc"] for r in ada) -
                    statistics.fmean(r["epochs"][k]["test_acc"] for r in dense))
        # The target beyond the paper, as for the trainer's cells: the larger of
        # 1 point and the seed spreads at each epoch.
        _, sd = spread([r["epochs"][k]["test_acc"] for r in dense])
        _, sa = spread([r["epochs"][k]["test_acc"] for r in ada])
        tols.append(max(EARLY_ACC_TOLERANCE, sd, sa))
    tol = max(ACC_TOLERANCE, ds, as_)
    rate = statistics.fmean(r["compression_rate"] for r in ada)
    share = "1" if default_rate is None else "%.2f" % (rate / default_rate)
    row = "| %s | %s | %.2f%% | %.2f%% | %+.2f pt | %s / %s | %s | %s | %s | %+.2f pt | %s |" % (
        label, ", ".join(str(x) for x in seeds), 100 * dm, 100 * am, 100 * (am - dm),
        fmt_spread("cnn", ds, len(dense)), fmt_spread("cnn", as_, len(ada)), fmt_rate(rate),
        share, "met" if am - dm >= -tol else "missed", 100 * min(gaps[1:] or [0.0]),
        early_verdict_of("cnn", gaps, tols))
    return row, gaps, tols, rate


def ddp_section():
    """The PyTorch path trained to the end: DDP without a hook against the
    AdaComp hook, default and variants (scripts/ddp_accuracy.py)."""
    runs = load_ddp_runs()
    dense, ada = runs.get("none", []), runs.get("adacomp", [])
    if not dense or not ada:
        return []
    lines = []
    w = lines.append
    r0 = dense[0]
    decay = ", ".join(str(e) for e in r0.get("lr_decay_epochs", [])) or "none"
    w("### The PyTorch DDP hook trained to the end")
    w("")
    w("`/usr/bin/python3 scripts/ddp_accuracy.py --skip-existing`: examples/ddp_fashion_mnist.py, "
      "%d DDP ranks on Gloo x %d images per step each, SGD lr %g momentum 0.9, x0.1 after "
      "epochs %s, %d epochs (%d steps), its small CNN on Fashion-MNIST; without a hook "
      "(DDP's all-reduce) and with `adacomp.torch.register` (the paper's default, and the "
      "options shown beside it). Test accuracy on the %d test images." % (
          r0["world"], r0["batch_size"], r0["lr"], decay, len(r0["epochs"]), r0["steps"],
          r0["test_images"]))
    w("")
    w("| AdaComp hook | seeds | no hook | AdaComp hook | gap | spread (no hook / AdaComp) | "
      "AdaComp rate (rank 0) | rate vs default | target | worst from ep 2 | target from ep 2 |")
    w("|---|---|---|---|---|---|---|---|---|---|---|")
    row, gaps, tols, default_rate = ddp_row(dense, ada, "the paper's default")
    w(row)
    per_epoch = [("the paper's default", gaps, tols)]
    for key in sorted(k for k in runs if k.startswith("adacomp_")):
        opts = ddp_variant_options(runs[key])
        got = ddp_row(dense, runs[key], "`%s`" % opts, default_rate)
        if got:
            w(got[0])
            per_epoch.append(("`%s`" % opts, got[1], got[2]))
    w("")
    for label, gaps, tols in per_epoch:
        w("Gap at the end of each epoch, %s (mean over seeds): " % label +
          ", ".join("ep %d %+.2f pt" % (k + 1, 100 * g) for k, g in enumerate(gaps)) +
          "; tolerance (the larger of 1 point and the epoch's seed spreads): " +
          ", ".join("ep %d %.2f pt" % (k + 1, 100 * t) for k, t in enumerate(tols)) + ".")
        w("")
    if os.path.exists(os.path.join(IMG_DIR, "full_ddp.png")):
        w("![full ddp](img/full_ddp.png)")
        w("")
    return lines


def ddp_plot(plt):
    """docs/img/full_ddp.png: DDP test accuracy, no hook against the AdaComp
    hook (mean over seeds, band min-max), against epoch and against the bytes
    one rank handed to its collectives."""
    runs = load_ddp_runs()
    if not runs.get("none") or not runs.get("adacomp"):
        return None
    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    settings = [("none", "DDP, no hook", "black"), ("adacomp", "DDP, AdaComp hook", "tab:red")]
    colors = ["tab:blue", "tab:green", "tab:purple", "tab:orange"]
    for i, key in enumerate(sorted(k for k in runs if k.startswith("adacomp_"))):
        settings.append((key, "DDP, AdaComp hook, %s" % ddp_variant_options(runs[key]),
                         colors[i % len(colors)]))
    for hook, label, color in settings:
        rs = runs[hook]
        n = min(len(r["epochs"]) for r in rs)
        ys = [[r["epochs"][k]["test_acc"] for r in rs] for k in range(n)]
        mean = [statistics.fmean(v) for v in ys]
        lo, hi = [min(v) for v in ys], [max(v) for v in ys]
        # Bytes per rank at each epoch end: the epoch's mean bytes per step x its steps.
        sent, total, prev = [], 0.0, 0
        for e in rs[0]["epochs"][:n]:
            total += e["bytes_per_step"] * (e["steps"] - prev)
            prev = e["steps"]
            sent.append(total)
        label = "%s (%d seed%s)" % (label, len(rs), "s" if len(rs) > 1 else "")
        for ax, x in ((axes[0], list(range(1, n + 1))), (axes[1], sent)):
            ax.plot(x, mean, marker="o", ms=3, color=color, label=label)
            if len(rs) > 1:
                ax.fill_between(x, lo, hi, color=color, alpha=0.2)
    return save_epoch_bytes_figure(
        plt, fig, axes, "bytes one rank handed to its collectives",
        "PyTorch DDP on Gloo, 2 ranks x 32 images, Fashion-MNIST, trained to the end "
        "(band: min-max over seeds)", "full_ddp.png")


def save_epoch_bytes_figure(plt, fig, axes, bytes_label, title, name):
    """Labels a pair of test-accuracy panels (against epoch, against bytes on a
    log axis), writes docs/img/NAME and returns its path."""
    axes[0].set_xlabel("epoch")
    axes[1].set_xlabel(bytes_label)
    axes[1].set_xscale("log")
    for ax in axes:
        ax.set_ylabel("test accuracy")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    fig.suptitle(title)
    fig.tight_layout()
    path = os.path.join(IMG_DIR, name)
    fig.savefig(path, dpi=80)
    plt.close(fig)
    return path


def worst_gap_from_epoch2(model, dense, ada):
    """The most negative per-epoch gap from epoch 2 on (None if too short)."""
    gaps = per_epoch_gaps(model, dense, ada)[1:]
    return min(gaps) if gaps else None


def sets_training(c):
    """Whether a run sets a training option (TRAINING_OPTIONS) beyond the
    cell's defaults."""
    return any(o in c["args"] for o in TRAINING_OPTIONS)


def codec_options(c):
    """remedy_options() less the training options, as a list."""
    extra = remedy_options(c).split()
    for o in TRAINING_OPTIONS:
        if o in extra:
            i = extra.index(o)
            del extra[i:i + 2]
    return extra


def setting_text(r):
    """A summary's learning rate, and its clipping and warm-up where set."""
    clip = r.get("clip_grad_norm")
    warm = r.get("lr_warmup_steps")
    return ("%g" % r["lr"]) + ((", clip %g" % clip) if clip else "") + (
        (", warm-up %d steps" % warm) if warm else "")


def remedy_options(c):
    """The options a remedy adds to the default AdaComp run, as text."""
    args = c["args"]
    i = args.index("--seed")
    return " ".join(args[i + 2:])


def remedies_table(runs):
    """Each remedy against the same cell's dense and default AdaComp runs at
    the same seed: the end gap, the worst gap from epoch 2 on, and the rate
    against the default's (the target asks for at least half of it)."""
    rem = sorted(((c, r) for c, r in runs.values()
                  if c["table"] == "remedies" and c["args"][3] == "adacomp"),
                 key=lambda x: x[0]["order"])
    # Dense at the remedies' learning rates, per (model, optimizer, seed).
    dense_other = {}
    for c, r in runs.values():
        if c["table"] == "remedies" and c["args"][3] == "dense":
            dense_other.setdefault((c["args"][1], c["args"][5], c["seed"]), []).append(r)
    if not rem:
        return []
    lines = []
    w = lines.append
    w("### Remedies measured at full scale (options beside the default)")
    w("")
    w("Each remedy is the default AdaComp run (same model, optimizer, schedule, "
      "seed) with the options shown; *dense* and *default* are the same cell's "
      "runs at that seed. *worst from ep 2*: the most negative AdaComp - dense gap "
      "at any epoch end from the second on (the target beyond the paper: within "
      "1 point, 0.05 nats/char). *rate vs default*: e2e rate as a share of the "
      "default's (the target asks for at least half). Where the options are not codec "
      "options (a learning rate), dense was also run with them, and for a remedy that "
      "sets the learning rate *dense* is the strongest dense run of the cell at that seed "
      "and schedule, whatever its learning rate (*dense lr*): the gain must not be one "
      "that dense gets too. Codec-only remedies are judged at the default learning rate.")
    w("")
    w("| model | opt | options | dense | dense lr | default | remedy | gap (default -> remedy) | "
      "worst from ep 2 (default -> remedy) | e2e rate (default -> remedy) | "
      "rate vs default | end target |")
    w("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for c, r in rem:
        model, opt, seed = c["args"][1], c["args"][5], c["seed"]
        dense = [x for x in cell_runs(runs, model, opt, "dense") if x["seed"] == seed]
        default = [x for x in cell_runs(runs, model, opt, "adacomp") if x["seed"] == seed]
        dv = final_metric(dense[0]) if dense else None
        av = final_metric(default[0]) if default else None
        dense_lr = "default"
        for other in dense_other.get((model, opt, seed), []) if dv is not None and \
            sets_training(c) else []:
            # A learning-rate (or clipping) remedy: judged against the strongest
            # dense run measured.
            sv = final_metric(other)
            if signed_gap(model, dv, sv) > 0:
                dv, dense, dense_lr = sv, [other], setting_text(other)
        rv = final_metric(r)

        def gap(v):
            if dv is None or v is None:
                return None
            return signed_gap(model, dv, v)

        wd = worst_gap_from_epoch2(model, dense, default) if dense and default else None
        wr = worst_gap_from_epoch2(model, dense, [r]) if dense else None
        rate_d = default[0]["compression_rate"]["end_to_end"] if default else None
        rate_r = r["compression_rate"]["end_to_end"]
        share = (rate_r / rate_d) if rate_d else None
        tol = LOSS_TOLERANCE if is_lstm(model) else ACC_TOLERANCE
        g = gap(rv)
        if g is None:
            verdict_text = "-"
        else:
            verdict_text = "met" if g >= -tol else "missed"
            if share is not None and share < 0.5:
                verdict_text += ", rate below half"
        w("| %s | %s | `%s` | %s | %s | %s | %s | %s -> %s | %s -> %s | %s -> %s | %s | %s |" % (
            model, opt, remedy_options(c), fmt_value(model, dv), dense_lr, fmt_value(model, av),
            fmt_value(model, rv), fmt_gap(model, gap(av)), fmt_gap(model, g),
            fmt_gap(model, wd), fmt_gap(model, wr), fmt_rate(rate_d), fmt_rate(rate_r),
            ("%.2f" % share) if share is not None else "-", verdict_text))
    w("")
    return lines


def tagged_runs(runs, model, opt, codec, tag):
    """Every run of (model, optimizer, codec, tag) at the cell's own length
    (any table but "longer"), seed order: the recommended settings' seed-1
    runs are the remedies table's."""
    out = {}
    for c, r in runs.values():
        a = c["args"]
        if a[1] == model and a[5] == opt and a[3] == codec and c.get("tag", "") == tag and \
            c["table"] != "longer":
            out[c["seed"]] = r
    return [out[k] for k in sorted(out)]


def recommended_table(runs):
    """The recommended settings (table "recommended") over every seed run,
    against the strongest dense run at the same seeds: the end target (the
    tolerance or the seed spread, whichever is larger), the rate against the
    default's, and the target beyond the paper from epoch 2 on."""
    cells = []
    for c, _ in sorted(runs.values(), key=lambda x: x[0]["order"]):
        if c["table"] != "recommended":
            continue
        key = (c["args"][1], c["args"][5])
        tags = {c["args"][3]: c.get("tag", "")}
        found = next((x for x in cells if x[0] == key), None)
        if found:
            found[1].update(tags)
        else:
            cells.append((key, dict(tags)))
    if not cells:
        return []
    lines = []
    w = lines.append
    w("### The recommended settings over three seeds")
    w("")
    w("AdaComp with the settings recommended below against the strongest dense run "
      "we measured for the cell, with the same training settings, both at every seed "
      "(seed 1 is the remedies table's run). *rate vs default*: the e2e rate as a "
      "share of the paper's default at the same seeds. *end target*: within "
      "0.3 points (0.02 nats/char) or the seed spread, whichever is larger; *target "
      "from ep 2*: within 1 point (0.05 nats/char) or that epoch's seed spread at "
      "every epoch end from the second on.")
    w("")
    w("| model | opt | dense setting | AdaComp setting | seeds | dense | AdaComp | gap | "
      "spread (dense / AdaComp) | e2e | rate vs default | end target | worst from ep 2 | "
      "target from ep 2 |")
    w("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for (model, opt), tags in cells:
        dense = tagged_runs(runs, model, opt, "dense", tags.get("dense", ""))
        ada = tagged_runs(runs, model, opt, "adacomp", tags.get("adacomp", ""))
        if not dense or not ada:
            continue
        seeds = sorted(set(r["seed"] for r in dense) & set(r["seed"] for r in ada))
        dense = [r for r in dense if r["seed"] in seeds]
        ada = [r for r in ada if r["seed"] in seeds]
        default = [r for r in cell_runs(runs, model, opt, "adacomp") if r["seed"] in seeds]
        dm, ds = spread([final_metric(r) for r in dense])
        am, as_ = spread([final_metric(r) for r in ada])
        rates = mean_rates(ada)
        rate_d = mean_rates(default).get("end_to_end") if default else None
        share = rates["end_to_end"] / rate_d if rate_d else None
        words = verdict(model, dense, ada, rates)
        if share is not None and share < 0.5:
            words += ", rate below half"
        a_opts = " ".join(codec_options(ada[0]["run"]))  # a summary's run has the config's args
        w("| %s | %s | %s | %s | %d | %s | %s | %s | %s / %s | %s | %s | %s | %s | %s |" % (
            model, opt, setting_text(dense[0]),
            setting_text(ada[0]) + ((", `%s`" % a_opts) if a_opts else ""), len(seeds),
            fmt_value(model, dm), fmt_value(model, am), fmt_gap(model, signed_gap(model, dm, am)),
            fmt_spread(model, ds, len(dense)), fmt_spread(model, as_, len(ada)),
            fmt_rate(rates["end_to_end"]), ("%.2f" % share) if share is not None else "-", words,
            fmt_gap(model, worst_gap_from_epoch2(model, dense, ada)),
            early_verdict(model, dense, ada)))
    w("")
    return lines


def longer_table(runs):
    """The cells also trained for longer (seed 1). At each length, every AdaComp
    run that differs from the default only in its learning rate, against the
    strongest dense run at that length (any learning rate), so that "trained
    to the end" and "a learning rate tuned for each" can both be checked."""
    cells = sorted({(c["args"][1], c["args"][5]) for c, _ in runs.values()
                    if c["table"] == "longer"})
    if not cells:
        return []
    lines = []
    w = lines.append
    w("### Trained for longer, and the learning rate tuned for each (seed 1)")
    w("")
    w("Each AdaComp run against the strongest dense run of the same length, whatever "
      "the learning rate of either (*lr*: AdaComp's / dense's, and the gradient "
      "clipping where set; *codec options*: what the AdaComp run sets beyond the "
      "paper's default). *rate vs default*: its e2e "
      "rate as a share of the default codec's at the same cell and seed (the cell's own "
      "schedule, default lr); the issue asks for at least half. *end target*: within 0.3 points "
      "(0.02 nats/char).")
    w("")
    w("| model | opt | epochs (lr x0.1 at) | lr (AdaComp / dense) | codec options | dense | "
      "AdaComp | gap | "
      "AdaComp train loss - dense | e2e | rate vs default | end target |")
    w("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for model, opt in cells:
        default = [x for x in cell_runs(runs, model, opt, "adacomp") if x["seed"] == 1]
        rate_d = default[0]["compression_rate"]["end_to_end"] if default else None
        tol = LOSS_TOLERANCE if is_lstm(model) else ACC_TOLERANCE
        by_length = {}
        for c, r in runs.values():
            a = c["args"]
            extra = codec_options(c)
            # Runs that change only training settings (the learning rate,
            # clipping), and the AdaComp runs of this table with codec options too
            # (the remedies table has the others).
            if c["table"] in ("models", "remedies", "longer") and a[1] == model and \
                a[5] == opt and c["seed"] == 1 and (not extra or (
                    a[3] == "adacomp" and c["table"] == "longer")):
                key = (int(a[a.index("--epochs") + 1]), a[a.index("--lr-decay-epochs") + 1])
                by_length.setdefault(key, {}).setdefault(a[3], []).append((c, r, " ".join(extra)))
        for (epochs, decay), codecs in sorted(by_length.items()):
            if "dense" not in codecs or "adacomp" not in codecs:
                continue
            # The strongest dense run at this length.
            _, d, _ = max(codecs["dense"], key=lambda x: signed_gap(model, 0.0, final_metric(x[1])))
            for _, a, opts in sorted(codecs["adacomp"], key=lambda x: (
                x[2], x[1].get("clip_grad_norm") or 0, x[1]["lr"])):
                dv, av = final_metric(d), final_metric(a)
                g = signed_gap(model, dv, av)
                train_gap = a["epoch_metrics"][-1]["train_loss"] - d["epoch_metrics"][-1]["train_loss"]
                rate = a["compression_rate"]["end_to_end"]
                share = rate / rate_d if rate_d else None
                verdict_text = "met" if g >= -tol else "missed"
                if share is not None and share < 0.5:
                    verdict_text += ", rate below half"
                w("| %s | %s | %d (%s) | %s / %s | %s | %s | %s | %s | %+.3f | %s | %s | %s |" % (
                    model, opt, epochs, decay, setting_text(a), setting_text(d),
                    ("`%s`" % opts) if opts else "-",
                    fmt_value(model, dv), fmt_value(model, av), fmt_gap(model, g), train_gap,
                    fmt_rate(rate), ("%.2f" % share) if share is not None else "-", verdict_text))
    w("")
    return lines


def read_metrics(run_id):
    path = os.path.join(FULL_DIR, run_id + ".metrics.jsonl")
    if not os.path.exists(path):
        return []
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def plots(configs):
    """Writes docs/img/full_*.png; returns the files written."""
    plt = pyplot()
    if plt is None:
        return []
    runs = load_runs(configs)
    if not runs:
        return []
    os.makedirs(IMG_DIR, exist_ok=True)
    written = []
    colors = {"dense": "black", "adacomp": "tab:red"}

    def grid():
        fig, axes = plt.subplots(2, 4, figsize=(16, 7), squeeze=False)
        return fig, axes

    # Test accuracy (loss) against epoch, and against bytes sent.
    for name, xkind in (("full_curves.png", "epoch"), ("full_bytes.png", "bytes")):
        fig, axes = grid()
        for i, opt in enumerate(OPTIMIZERS):
            for j, model in enumerate(MODELS):
                ax = axes[i][j]
                for codec in ("dense", "adacomp"):
                    rs = cell_runs(runs, model, opt, codec)
                    if not rs:
                        continue
                    n = min(len(r["epoch_metrics"]) for r in rs)
                    ys = [[epoch_metric(model, r["epoch_metrics"][k]) for r in rs] for k in range(n)]
                    mean = [statistics.fmean(v) for v in ys]
                    lo = [min(v) for v in ys]
                    hi = [max(v) for v in ys]
                    if xkind == "epoch":
                        x = list(range(1, n + 1))
                    else:
                        x = cumulative_bytes(rs[0])[:n]
                    label = "%s (%d seed%s)" % (codec, len(rs), "s" if len(rs) > 1 else "")
                    ax.plot(x, mean, marker="o", ms=3, color=colors[codec], label=label)
                    if len(rs) > 1:
                        ax.fill_between(x, lo, hi, color=colors[codec], alpha=0.2)
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
                    ax.text(0.5, 0.5, "not run yet", ha="center", va="center", transform=ax.transAxes)
        fig.suptitle("Dense vs AdaComp, 4 learners, trained to the end (mean over seeds; band: "
                     "min-max)" + (" against bytes sent" if xkind == "bytes" else ""))
        fig.tight_layout()
        path = os.path.join(IMG_DIR, name)
        fig.savefig(path, dpi=80)
        plt.close(fig)
        written.append(path)

    # Selected per bin and compression rate over training, per layer type (SGD,
    # seed 1, from the step metrics).
    fig, axes = plt.subplots(2, 4, figsize=(16, 7), squeeze=False)
    for j, model in enumerate(MODELS):
        rs = [c for c, r in runs.values() if c["table"] == "models" and c["args"][1] == model and
              c["args"][3] == "adacomp" and c["args"][5] == "sgd" and c["seed"] == 1]
        if not rs:
            for ax in (axes[0][j], axes[1][j]):
                ax.set_title(model)
                ax.text(0.5, 0.5, "not run yet", ha="center", va="center", transform=ax.transAxes)
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
    path = os.path.join(IMG_DIR, "full_rates.png")
    fig.savefig(path, dpi=80)
    plt.close(fig)
    written.append(path)
    for path in (baselines_plot(plt, runs), ddp_plot(plt), local_plot(plt, runs)):
        if path:
            written.append(path)
    return written


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


def local_plot(plt, runs):
    """docs/img/full_local.png: the optimizer on each learner (--local-optimizer)
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
            x = list(range(1, n + 1))
            ax.plot(x, [statistics.fmean(v) for v in ys], marker="o", ms=3, color=color,
                    lw=2 if kind != "AdaComp" else 1.2,
                    label="%s (%d seed%s)" % (label, len(rs), "s" if len(rs) > 1 else ""))
            if len(rs) > 1:
                ax.fill_between(x, [min(v) for v in ys], [max(v) for v in ys], color=color, alpha=0.15)
            drawn = True
        ax.set_title("%s, %s, %s" % (model, opt, setting))
        ax.set_xlabel("epoch")
        ax.set_ylabel("test loss / char" if is_lstm(model) else "test accuracy")
        ax.grid(alpha=0.3)
        if ax.lines:
            ax.legend(fontsize=7)
        else:
            ax.text(0.5, 0.5, "not run yet", ha="center", va="center", transform=ax.transAxes)
    if not drawn:
        plt.close(fig)
        return None
    fig.suptitle("The optimizer on each learner before compression (--local-optimizer) "
                 "against the paper's optimizer after aggregation (4 learners; band: min-max "
                 "over seeds)")
    fig.tight_layout()
    path = os.path.join(IMG_DIR, "full_local.png")
    fig.savefig(path, dpi=80)
    plt.close(fig)
    return path


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
    """docs/img/full_baselines.png: mnist-cnn, SGD, seed 1, every codec: test
    accuracy against epoch and against bytes sent."""
    rows = []
    for c, r in runs.values():
        a = c["args"]
        if a[1] != "mnist-cnn" or a[5] != "sgd" or c["seed"] != 1:
            continue
        if c["table"] == "baselines" or (c["table"] == "models" and c.get("tag", "") == ""):
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
