#!/usr/bin/python3
"""Scores experiments/scaling/report.md's cost model out of sample: fitted on the runs with
P <= 4 only, it predicts the P = 8 runs and the P = 16 runs it never saw, and
lists the P = 16 runs (experiments/scaling/scaling.py --part p16: the rings and AdaComp's
three exchanges) with auto against the faster of the two exchanges. Every set of
P = 16 runs is scored: experiments/scaling/data/p16/ (the newest) and any kept beside it
as experiments/scaling/data/p16-<name>/ (earlier sets, from other VMs).

The model and its fit are experiments/scaling/scaling_report.py's (per link: rounds x
alpha + received bytes x beta + fp16 conversions x kappa + gamma, least
squares with non-negative coefficients), over the same step-time runs
(experiments/scaling/data/steps/*.json, from experiments/scaling/scaling.py). Two scores per
run at P = 8:
  exchange  the predicted exchange time (the step less compute and coding)
            against the measured one; target: within 30 %;
  step      the measured compute and coding plus the predicted exchange,
            against the measured step; target: within 20 %.
Compute and coding are taken as measured: on this machine the P hosts share
two cores, so they grow with P in a way real hosts would not, and they are
not what the model claims to predict.

Writes experiments/scaling/cost-model-oos.md. Usage: /usr/bin/python3 experiments/scaling/cost_model_oos.py
Standard library only.
"""

import glob
import json
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # resultslib
import scaling_report as sr  # noqa: E402
from resultslib.paths import experiment  # noqa: E402
from resultslib.util import machine_name  # noqa: E402

DOC = experiment("scaling", "cost-model-oos.md")
FIT_MAX_P = 4
# AdaComp's three exchanges: the all-gather, the reduce-scatter and auto.
EXCHANGES = ("adacomp", "adacomp-rs", "adacomp-auto")
TEST_P = 8


def rounds(codec, p):
    """sr.rounds, and the reduce-scatter's: an all-to-all and an all-gather (P - 1
    messages each, posted at once) besides the agreement and headers."""
    if codec.endswith("-rs"):
        return 2 * (p - 1) + 3
    return sr.rounds(codec, p)


def predict_comm(model, link, codec, p, nbytes, n):
    a_ring, a_gather, beta, kappa, gamma = model[link]
    a = a_ring if codec in sr.RING else a_gather
    return (a * rounds(codec, p) + beta * nbytes + kappa * sr.half_elements(codec, p, n)
            + gamma)


def p16_sets():
    """[(folder name, runs)] of every P = 16 set, the newest (p16) first."""
    names = sorted(os.path.basename(d) for d in glob.glob(os.path.join(sr.RES, "p16*"))
                   if os.path.isdir(d))
    names.sort(key=lambda n: n != "p16")
    return [(n, runs) for n in names for runs in [sr.load(n)] if runs]


def auto_section(p16, name):
    """The P = 16 runs of AdaComp: auto against the faster of its two exchanges."""
    out = ["", f"### P = 16 ({name}): auto against the faster exchange", "",
           "| link | all-gather (s) | reduce-scatter (s) | auto (s) | auto / faster | "
           "received per step (all-gather / reduce-scatter / auto) |",
           "|---|---|---|---|---|---|"]
    for link in sr.LINKS:
        got = {c: p16.get(("mnist-cnn", c, 16, link))
               for c in EXCHANGES}
        if any(v is None for v in got.values()):
            continue
        st = {c: r["split"]["step"] for c, r in got.items()}
        rx = {c: sr.recv_bytes(r) for c, r in got.items()}
        faster = min(st["adacomp"], st["adacomp-rs"])
        out.append(f"| {sr.LINK_NAME[link]} | {st['adacomp']:.3f} | {st['adacomp-rs']:.3f} | "
                   f"{st['adacomp-auto']:.3f} | {st['adacomp-auto'] / faster:.2f}x | "
                   f"{rx['adacomp'] / 1e3:.1f} / {rx['adacomp-rs'] / 1e3:.1f} / "
                   f"{rx['adacomp-auto'] / 1e3:.1f} kB |")
    m16 = machine_name(next(iter(p16.values())), "the project VM")
    out += ["", f"Measured on {m16} (`experiments/scaling/scaling.py --part p16`, 25 steps each, "
            "medians of steps 6-25). 16 ranks share this machine's 2 cores, so compute per step (0.05-0.06 s "
            "here) and its run-to-run noise are far above what 16 real hosts would "
            "show; a step's median moves by 10-20 % between reruns of the same "
            "setting. The target: auto within 5 % of the faster exchange."]
    return out


def load_rounds():
    """{(link, codec): [step medians, one per round]} of experiments/scaling/data/auto16/."""
    out = {}
    for path in sorted(glob.glob(os.path.join(sr.RES, "auto16", "*.json"))):
        with open(path) as f:
            r = json.load(f)
        out.setdefault((r["link"], r["codec"]), []).append((r["round"], r["split"], r))
    runs = {k: [sp["step"] for _, sp, _ in sorted(v, key=lambda x: x[0])] for k, v in out.items()}
    comm = {k: statistics.median(sp["communicate"] for _, sp, _ in v) for k, v in out.items()}
    return runs, {k: v[0][2] for k, v in out.items()}, comm


def comm_line(comm):
    """The exchange part alone (the medians over rounds of each run's median
    communicate time), where auto's choice acts, per link."""
    rows = []
    for link in sr.LINKS:
        c = [comm.get((link, x)) for x in EXCHANGES]
        if None not in c:
            rows.append(f"{sr.LINK_NAME[link]} {1e3 * c[0]:.1f} / {1e3 * c[1]:.1f} / "
                        f"{1e3 * c[2]:.1f} ms")
    if not rows:
        return []
    return ["", "The exchange part of the step alone (medians over rounds of each run's "
            "median communicate time; all-gather / reduce-scatter / auto): "
            + "; ".join(rows) + "."]


def rounds_section(runs, first):
    """auto against the faster exchange on the medians over rounds (experiments/scaling/scaling.py
    --part auto16): [lines], [verdicts]."""
    out = ["", "### P = 16 in rounds (experiments/scaling/data/auto16/): auto against the faster "
           "exchange", "",
           "| link | rounds | all-gather (s) | reduce-scatter (s) | auto (s) | auto / faster "
           "(median over rounds) | auto / all-gather per round |",
           "|---|---|---|---|---|---|---|"]
    verdicts = []
    for link in sr.LINKS:
        got = {c: runs.get((link, c)) for c in EXCHANGES}
        if any(not v for v in got.values()):
            continue
        med = {c: statistics.median(v) for c, v in got.items()}
        faster = min(med["adacomp"], med["adacomp-rs"])
        ratio = med["adacomp-auto"] / faster
        per_round = [a / g for a, g in zip(got["adacomp-auto"], got["adacomp"])]

        def cell(c):
            return f"{med[c]:.4f} ({', '.join(f'{t:.4f}' for t in got[c])})"
        out.append(f"| {sr.LINK_NAME[link]} | {len(got['adacomp'])} | {cell('adacomp')} | "
                   f"{cell('adacomp-rs')} | {cell('adacomp-auto')} | {ratio:.3f}x | "
                   f"{', '.join(f'{x:.2f}' for x in per_round)} |")
        verdicts.append(f"P = 16, {sr.LINK_NAME[link]}: auto {ratio:.3f}x the faster exchange "
                        f"over {len(got['adacomp'])} rounds (target within 5 %: "
                        f"{'met' if ratio <= 1.05 else 'missed'})")
    if not verdicts:  # one per link with every exchange
        return [], []
    r0 = next(iter(first.values()))
    out += ["", f"Measured on {machine_name(r0, 'the project VM')} (`experiments/scaling/scaling.py --part "
            f"auto16`): each round runs the three exchanges once, {r0['steps']} steps each "
            "(medians of the steps after the first 5), in an order that turns from round to "
            "round; in parentheses each round's median, in round order. The medians over "
            "rounds are compared, because one run's median moves by 10-20 % between reruns "
            "of the same setting here (16 ranks on 2 cores). The target: auto within "
            "5 % of the faster exchange."]
    return out, verdicts


def coding(split):
    return (split["compute"] + split["compress"] + split["decompress"]
            + split["update"])


def main():
    steps = sr.load("steps")
    if not steps:
        sys.exit("no experiments/scaling/data/steps/*.json")
    fit = {k: r for k, r in steps.items() if k[2] <= FIT_MAX_P}
    test = {k: r for k, r in steps.items() if k[2] == TEST_P}
    model = sr.fit_model(fit)
    in_model = sr.fit_model(steps)
    sets16 = p16_sets()

    def score(runs):
        out = []
        for (m, c, p, link), r in sorted(runs.items()):
            if link not in model:
                continue
            s = r["split"]
            n = r["summary"]["parameters"]
            ex = sr.exchange_time(r)
            pred_ex = predict_comm(model, link, c, p, sr.recv_bytes(r), n)
            out.append((m, c, link, s["step"], coding(s) + pred_ex, ex, pred_ex))
        return out
    rows = score(test)
    mach = machine_name(next(iter(steps.values())), "the project VM")
    lines = [
        "# The cost model, out of sample",
        "",
        "Generated by `experiments/scaling/cost_model_oos.py` from "
        "`experiments/scaling/data/steps/*.json` (the runs of experiments/scaling/report.md, "
        f"measured on {mach}, P hosts "
        "sharing its cores; each set of P = 16 runs names its own VM below); rerun it "
        "to regenerate.",
        "",
        f"The model of experiments/scaling/report.md fitted on the {len(fit)} runs with "
        f"P <= {FIT_MAX_P} only (every model, codec and link), then scored on "
        f"the {len(rows)} runs with P = {TEST_P} it never saw. *step*: the "
        "measured compute and coding plus the predicted exchange, against "
        "the measured step (target: within 20 %); *exchange*: "
        "the predicted exchange time (step less compute and coding) against "
        "the measured one (target: within 30 %). Compute and coding are taken "
        "as measured (the hosts share two cores here, so they grow with P as "
        "they would not on real hosts). Then on the P = 16 runs, which it never saw "
        "either.",
        "",
        "Coefficients fitted on P <= 4 (and, for comparison, on every P):",
        "",
        "| link | alpha ring (ms) | alpha all-gather (ms) | 1 / beta "
        "(Mbit/s) | gamma (ms) | same, fitted on every P |",
        "|---|---|---|---|---|---|",
    ]

    def coef(c):
        a, ag, beta, _, gamma = c
        rate = f"{8 / beta / 1e6:.0f}" if beta > 0 else "-"
        return f"{1e3 * a:.3f} | {1e3 * ag:.3f} | {rate} | {1e3 * gamma:.1f}"

    for link in sr.LINKS:
        if link in model:
            full = in_model.get(link)
            lines.append(f"| {sr.LINK_NAME[link]} | {coef(model[link])} | "
                         + (coef(full).replace(" | ", " / ") if full else "-")
                         + " |")
    def table(rows, title):
        out = ["", title, "", "| model | codec | link | step (s) | predicted | error | "
               "exchange (s) | predicted | error |",
               "|---|---|---|---|---|---|---|---|---|"]
        step_ok = ex_ok = 0
        step_err, ex_err = [], []
        for m, c, link, st, ps, ex, pe in rows:
            e1 = ps / st - 1
            e2 = pe / ex - 1 if ex > 0 else float("inf")
            step_ok += abs(e1) <= 0.2
            ex_ok += abs(e2) <= 0.3
            step_err.append(abs(e1))
            ex_err.append(abs(e2))
            out.append(f"| {m} | {sr.CODEC_NAME.get(c, c)} | "
                       f"{sr.LINK_NAME[link]} | {st:.3f} | {ps:.3f} | "
                       f"{100 * e1:+.0f} % | {ex:.3f} | {pe:.3f} | "
                       f"{100 * e2:+.0f} % |")
        n = len(rows)
        verdict = (f"Step within 20 %: {step_ok} of {n} runs (median error "
                   f"{100 * statistics.median(step_err):.0f} %); exchange within 30 %: "
                   f"{ex_ok} of {n} (median error "
                   f"{100 * statistics.median(ex_err):.0f} %).")
        return out + ["", verdict], verdict

    t8, v8 = table(rows, f"### P = {TEST_P} ({len(rows)} runs)")
    lines += t8
    verdicts = [f"P = {TEST_P}: {v8}"]
    for name, p16 in sets16:
        rows16 = score(p16)
        if not rows16:
            continue
        m16 = machine_name(next(iter(p16.values())), "the project VM")
        same = m16 == mach
        where = (f"on {m16}, the CPU model of the runs the model was fitted on" if same else
                 f"on {m16}, another VM than the runs the model was fitted on, so its "
                 "compute and latency differ too")
        t16, v16 = table(rows16, f"### P = 16, experiments/scaling/data/{name}/ ({len(rows16)} runs, "
                                 f"mnist-cnn; {where})")
        lines += t16
        verdicts.append(f"P = 16 ({name}, {m16}): {v16}")
        lines += auto_section(p16, name)
    runs, first, comm = load_rounds()
    more, v_rounds = rounds_section(runs, first)
    lines += more + (comm_line(comm) if more else [])
    verdicts += v_rounds
    lines += ["", "## In short", ""] + [f"- {v}" for v in verdicts] + [""]
    with open(DOC, "w") as f:
        f.write("\n".join(lines))
    print("wrote", DOC)
    for v in verdicts:
        print(v)


if __name__ == "__main__":
    main()
