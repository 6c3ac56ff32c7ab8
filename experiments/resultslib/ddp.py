"""The PyTorch DDP section of experiments/accuracy/report.md (experiments/ddp-compare/ddp_accuracy.py's runs
under experiments/ddp-compare/data/full/): DDP without a hook against the AdaComp hook, the
paper's default and its variants, over the seeds."""

import os
import statistics

from .fmt import fmt_rate, fmt_spread, md_section
from .paths import IMG_DIR
from .runs import ddp_variant_options, load_ddp_runs
from .verdicts import early_tolerance, early_verdict_of, end_tolerance, met, spread


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
        tols.append(early_tolerance("cnn", sd, sa))
    tol = end_tolerance("cnn", ds, as_)
    rate = statistics.fmean(r["compression_rate"] for r in ada)
    share = "1" if default_rate is None else "%.2f" % (rate / default_rate)
    row = "| %s | %s | %.2f%% | %.2f%% | %+.2f pt | %s / %s | %s | %s | %s | %+.2f pt | %s |" % (
        label, ", ".join(str(x) for x in seeds), 100 * dm, 100 * am, 100 * (am - dm),
        fmt_spread("cnn", ds, len(dense)), fmt_spread("cnn", as_, len(ada)), fmt_rate(rate),
        share, met(am - dm, tol), 100 * min(gaps[1:] or [0.0]),
        early_verdict_of("cnn", gaps, tols))
    return row, gaps, tols, rate


def ddp_section():
    """The PyTorch path trained to the end: DDP without a hook against the
    AdaComp hook, default and variants (experiments/ddp-compare/ddp_accuracy.py)."""
    runs = load_ddp_runs()
    dense, ada = runs.get("none", []), runs.get("adacomp", [])
    if not dense or not ada:
        return []
    lines, w = md_section("The PyTorch DDP hook trained to the end")
    r0 = dense[0]
    decay = ", ".join(str(e) for e in r0.get("lr_decay_epochs", [])) or "none"
    w("`/usr/bin/python3 experiments/ddp-compare/ddp_accuracy.py --skip-existing`: examples/ddp_fashion_mnist.py, "
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
    for key in sorted(k for k in runs if k.startswith("adacomp_") and "@" not in k):
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
    lines += setups_table(runs)
    return lines


def setups_table(runs):
    """The one call on set-ups it was not tuned on (ddp_accuracy.py SETUPS): each
    set-up's no-hook runs against its one-call runs, at the same seeds."""
    setups = sorted({k.split("@", 1)[1] for k in runs if "@" in k})
    rows = []
    for name in setups:
        dense = runs.get("none@" + name, [])
        if not dense:
            continue
        args = dense[0].get("run", {}).get("args", [])
        lr = args[args.index("--lr") + 1] if "--lr" in args else "?"
        decay = ("x0.1 after epochs " + args[args.index("--lr-decay-epochs") + 1]
                 if "--lr-decay-epochs" in args else "no decay")
        if "--nesterov" in args:
            decay += ", Nesterov's momentum"
        for key in sorted(k for k in runs if k.startswith("adacomp_") and k.endswith("@" + name)):
            seeds = sorted({r["seed"] for r in dense} & {r["seed"] for r in runs[key]})
            if not seeds:
                continue
            d = {r["seed"]: r for r in dense}
            a = {r["seed"]: r for r in runs[key]}
            gaps = [a[x]["test_acc"] - d[x]["test_acc"] for x in seeds]
            dm = statistics.fmean(d[x]["test_acc"] for x in seeds)
            am = statistics.fmean(a[x]["test_acc"] for x in seeds)
            rate = statistics.fmean(a[x]["compression_rate"] for x in seeds)
            rows.append("| lr %s, %s | `%s` | %s | %.2f%% | %.2f%% | %+.2f pt | "
                        "%+.2f pt | %s |" % (
                            lr, decay, ddp_variant_options(runs[key]),
                            ", ".join(str(x) for x in seeds), 100 * dm, 100 * am,
                            100 * (am - dm), 100 * min(gaps), fmt_rate(rate)))
    if not rows:
        return []
    lines = ["#### The one call on set-ups it was not tuned on", ""]
    w = lines.append
    w("The same example and schedule length at another learning rate or without the lr "
      "decays (experiments/ddp-compare/ddp_accuracy.py SETUPS), no hook against the one "
      "call at the same seeds. Test accuracy on the 10,000 test images; the worst seed's "
      "gap is the target's \"no seed more than 1 point behind\".")
    w("")
    w("| set-up | one call | seeds | no hook | one call | gap | worst seed's gap | rate |")
    w("|---|---|---|---|---|---|---|---|")
    for r in rows:
        w(r)
    w("")
    return lines
