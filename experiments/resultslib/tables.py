"""The trainer's tables of experiments/accuracy/report.md, as lists of markdown lines: the
full-scale main table and its per-epoch gaps and tolerances, the remedies,
the longer runs, the recommended settings, the mnist-cnn sweeps, and the
quick-scale table."""

import statistics

from .configs import MODELS, OPTIMIZERS
from .fmt import (coding_share, fmt_diff, fmt_gap, fmt_metric, fmt_quick_rate, fmt_rate,
                  fmt_share, fmt_spread, fmt_tol, fmt_value, length_str, md_row, md_rule,
                  md_section, setting_text)
from .runs import (LAYER_TYPES, cell_runs, codec_of, codec_options, final_metric,
                   remedy_options, sets_training, spec, tagged_runs)
from .verdicts import (beyond, early_tolerances, early_verdict, early_verdict_of,
                       end_tolerance, mean_rates, met, per_epoch_gaps, rate_below_half,
                       signed_gap, spread, verdict, worst_gap_from_epoch2)


def main_tables(runs):
    """Dense against AdaComp per model and optimizer over the seeds, then the
    gap and the tolerance at the end of each epoch."""
    lines = []
    w = lines.append
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
        header = "| model | opt | " + " | ".join("ep %d" % (i + 1) for i in range(width)) + " |"
        w("Gap at the end of each epoch (mean over seeds; **bold**: beyond that epoch's "
          "tolerance, from the second epoch on):")
        w("")
        w(header)
        w("|---|---|" + "---|" * width)
        for model, opt, gaps, tols in epoch_rows:
            cells = [("**%s**" if i > 0 and beyond(g, t) else "%s") % fmt_gap(model, g)
                     for i, (g, t) in enumerate(zip(gaps, tols))]
            cells += [""] * (width - len(cells))
            w("| %s | %s | %s |" % (model, opt, " | ".join(cells)))
        w("")
        w("Tolerance at the end of each epoch: the larger of 1 point (0.05 nats/char) and "
          "the seed spreads (max - min) of dense and of AdaComp at that epoch. The "
          "high-learning-rate epochs spread widely from seed to seed:")
        w("")
        w(header)
        w("|---|---|" + "---|" * width)
        for model, opt, gaps, tols in epoch_rows:
            cells = [fmt_tol(model, t) for t in tols] + [""] * (width - len(tols))
            w("| %s | %s | %s |" % (model, opt, " | ".join(cells)))
        w("")
    return lines


def remedies_table(runs):
    """Each remedy against the same cell's dense and default AdaComp runs at
    the same seed: the end gap, the worst gap from epoch 2 on, and the rate
    against the default's (the target asks for at least half of it)."""
    rem = sorted(((c, r) for c, r in runs.values()
                  if c["table"] == "remedies" and spec(c).codec == "adacomp"),
                 key=lambda x: x[0]["order"])
    # Dense at the remedies' learning rates, per (model, optimizer, seed).
    dense_other = {}
    for c, r in runs.values():
        s = spec(c)
        if s.table == "remedies" and s.codec == "dense":
            dense_other.setdefault((s.model, s.optimizer, s.seed), []).append(r)
    if not rem:
        return []
    lines, w = md_section("Remedies measured at full scale (options beside the default)")
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
    w("| model | opt | options | seed | dense | dense lr | default | remedy | gap (default -> remedy) | "
      "worst from ep 2 (default -> remedy) | e2e rate (default -> remedy) | "
      "rate vs default | end target |")
    w("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for c, r in rem:
        s = spec(c)
        model, opt, seed = s.model, s.optimizer, s.seed
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
        g = gap(rv)
        if g is None:
            verdict_text = "-"
        else:
            verdict_text = rate_below_half(met(g, end_tolerance(model)), share)
        w("| %s | %s | `%s` | %d | %s | %s | %s | %s | %s -> %s | %s -> %s | %s -> %s | %s | %s |" % (
            model, opt, remedy_options(c), seed, fmt_value(model, dv), dense_lr, fmt_value(model, av),
            fmt_value(model, rv), fmt_gap(model, gap(av)), fmt_gap(model, g),
            fmt_gap(model, wd), fmt_gap(model, wr), fmt_rate(rate_d), fmt_rate(rate_r),
            fmt_share(share), verdict_text))
    w("")
    return lines


def recommended_table(runs):
    """The recommended settings (table "recommended") over every seed run,
    against the strongest dense run at the same seeds: the end target (the
    tolerance or the seed spread, whichever is larger), the rate against the
    default's, and the target beyond the paper from epoch 2 on."""
    cells = []
    for c, _ in sorted(runs.values(), key=lambda x: x[0]["order"]):
        s = spec(c)
        if s.table != "recommended":
            continue
        key = (s.model, s.optimizer)
        tags = {s.codec: s.tag}
        found = next((x for x in cells if x[0] == key), None)
        if found:
            found[1].update(tags)
        else:
            cells.append((key, dict(tags)))
    if not cells:
        return []
    lines, w = md_section("The recommended settings over three seeds")
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
        words = rate_below_half(verdict(model, dense, ada, rates), share)
        a_opts = " ".join(codec_options(ada[0]["run"]))  # a summary's run has the config's args
        w("| %s | %s | %s | %s | %d | %s | %s | %s | %s / %s | %s | %s | %s | %s | %s |" % (
            model, opt, setting_text(dense[0]),
            setting_text(ada[0]) + ((", `%s`" % a_opts) if a_opts else ""), len(seeds),
            fmt_value(model, dm), fmt_value(model, am), fmt_gap(model, signed_gap(model, dm, am)),
            fmt_spread(model, ds, len(dense)), fmt_spread(model, as_, len(ada)),
            fmt_rate(rates["end_to_end"]), fmt_share(share), words,
            fmt_gap(model, worst_gap_from_epoch2(model, dense, ada)),
            early_verdict(model, dense, ada)))
    w("")
    return lines


def longer_table(runs):
    """The cells also trained for longer (seed 1). At each length, every AdaComp
    run that differs from the default only in its learning rate, against the
    strongest dense run at that length (any learning rate), so that "trained
    to the end" and "a learning rate tuned for each" can both be checked."""
    cells = sorted({(spec(c).model, spec(c).optimizer) for c, _ in runs.values()
                    if c["table"] == "longer"})
    if not cells:
        return []
    lines, w = md_section("Trained for longer, and the learning rate tuned for each (seed 1)")
    w("Each AdaComp run against the strongest dense run of the same length, whatever "
      "the learning rate of either (*lr*: AdaComp's / dense's, and the gradient "
      "clipping where set; *codec options*: what the AdaComp run sets beyond the "
      "paper's default). *rate vs default*: its e2e "
      "rate as a share of the default codec's at the same cell and seed (the cell's own "
      "schedule, default lr); the target is at least half. *end target*: within 0.3 points "
      "(0.02 nats/char).")
    w("")
    w("| model | opt | epochs (lr x0.1 at) | lr (AdaComp / dense) | codec options | dense | "
      "AdaComp | gap | "
      "AdaComp train loss - dense | e2e | rate vs default | end target |")
    w("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for model, opt in cells:
        default = [x for x in cell_runs(runs, model, opt, "adacomp") if x["seed"] == 1]
        rate_d = default[0]["compression_rate"]["end_to_end"] if default else None
        tol = end_tolerance(model)
        by_length = {}
        for c, r in runs.values():
            s = spec(c)
            extra = codec_options(c)
            # Runs that change only training settings (the learning rate,
            # clipping), and the AdaComp runs of this table with codec options too
            # (the remedies table has the others).
            if s.table in ("models", "remedies", "longer") and s.model == model and \
                    s.optimizer == opt and s.seed == 1 and (not extra or (
                        s.codec == "adacomp" and s.table == "longer")):
                key = (s.epochs, s.decay)
                by_length.setdefault(key, {}).setdefault(s.codec, []).append(
                    (c, r, " ".join(extra)))
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
                verdict_text = rate_below_half(met(g, tol), share)
                w("| %s | %s | %d (%s) | %s / %s | %s | %s | %s | %s | %+.3f | %s | %s | %s |" % (
                    model, opt, epochs, decay, setting_text(a), setting_text(d),
                    ("`%s`" % opts) if opts else "-",
                    fmt_value(model, dv), fmt_value(model, av), fmt_gap(model, g), train_gap,
                    fmt_rate(rate), fmt_share(share), verdict_text))
    w("")
    return lines


def sweep_reference_table(runs):
    """Every mnist-cnn sweep and baseline run (SGD) beside the main table's
    runs at the same seeds, each against dense at the same learner count,
    batch size, learning rate (and warm-up) and seed."""
    sweeps = [(c, r) for c, r in runs.values()
              if c["table"] not in ("models", "remedies", "longer", "recommended", "ramp")]
    if not sweeps:
        return []
    lines = []
    w = lines.append
    # The same-settings dense and AdaComp rows of the main table, for
    # reference, at each seed the sweeps have.
    sweep_seeds = {c["seed"] for c, _ in sweeps}
    sweeps += [(c, r) for c, r in runs.values()
               if c["table"] == "models" and spec(c).model == "mnist-cnn" and
               spec(c).optimizer == "sgd" and c["seed"] in sweep_seeds]
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
        tol = end_tolerance("cnn", ds, as_)
        rate = statistics.fmean(by_seed[s]["compression_rate"]["end_to_end"] for s in seeds)
        p, b, _, setting = key
        rows.append("| %d | %d | %s | %s | %s | %.2f%% | %.2f%% | %+.2f pt | %s / %s | %s | %s |" % (
            p, b, setting,
            ("`%s`" % opts) if opts else "the paper's default", ", ".join(str(x) for x in seeds),
            100 * dm, 100 * am, 100 * (am - dm), fmt_spread("cnn", ds, len(seeds)),
            fmt_spread("cnn", as_, len(seeds)), fmt_rate(rate), met(am - dm, tol)))
    if not rows:
        return []
    return ["mnist-cnn, SGD: the learner and batch sweeps over the seeds run, AdaComp against "
            "dense at the same learner count, batch, learning rate, warm-up and seeds (*target*: "
            "within 0.3 points or the seed spread, whichever is larger):", "",
            "| P | B | lr | AdaComp | seeds | dense | AdaComp | gap | spread (dense / AdaComp) | "
            "e2e rate | target |",
            "|---|---|---|---|---|---|---|---|---|---|---|"] + rows + [""]


# ------------------------------------------------------------ quick scale

QUICK_COLUMNS = ("model | data | codec | opt (lr) | P | B | length | "
                 "test acc. / loss | vs dense | e2e | conv | fc | lstm | other | "
                 "s/step | coding share")


def quick_group_key(r):
    """What a quick-scale row shares with its dense row."""
    return (r["model"], r["data"], r["optimizer"], r["lr"], r["learners"],
            r["batch_size"], r["steps"])


def quick_table(rows):
    """One quick-scale table: a row per (config, summary or None)."""
    lines = [md_row([QUICK_COLUMNS]), md_rule(len(QUICK_COLUMNS.split("|")))]
    dense_of = {}
    for _, r in rows:
        if r is not None and codec_of(r) == "dense":
            dense_of[quick_group_key(r)] = r
    for cfg, r in rows:
        if r is None:
            lines.append("| %s | (not run) |%s" % (cfg["id"], " |" * 14))
            continue
        data = cfg["data_label"] or r["data"]
        comp = codec_of(r)
        if comp == "adacomp":
            comp = "**adacomp**"
        cr = r["compression_rate"]
        lines.append(md_row([
            r["model"], data, comp, "%s (%g)" % (r["optimizer"], r["lr"]),
            str(r["learners"]), str(r["batch_size"]), length_str(r),
            fmt_metric(r), fmt_diff(r, dense_of.get(quick_group_key(r))),
            fmt_quick_rate(cr["end_to_end"])] + [fmt_quick_rate(cr[t]) for t in LAYER_TYPES] +
            ["%.3f" % r["seconds_per_step"], coding_share(r)]))
    return "\n".join(lines)
