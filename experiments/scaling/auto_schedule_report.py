#!/usr/bin/python3
"""experiments/scaling/auto-schedule.md from experiments/scaling/data/schedule/*.json
(experiments/scaling/scaling.py --part schedule): `--codec auto` trained through the
whole schedule on 8 hosts at every link, against fixed AdaComp and the rings, for
mnist-cnn and fc-dnn (issue 43's measurements), with what auto chose over each run.

Targets as experiments/scaling/schedule.md takes them (schedule_report.targets: the
float32 ring's accuracy after one epoch, after half the schedule, and its final minus
0.3 points). For each link and target, auto must reach it no later than 1.05x the
sooner of the fastest ring and fixed AdaComp on that link, and at 100 Mbit/s at least
3x sooner than the fastest ring; its final accuracy within 0.3 points of the fastest
ring's (the ring with the least training seconds on that link).

Usage: /usr/bin/python3 experiments/scaling/auto_schedule_report.py
"""

import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import schedule_report as sr  # noqa: E402
from resultslib.paths import experiment  # noqa: E402
from resultslib.util import machine_name, pyplot  # noqa: E402

AGAIN = experiment("scaling", "data", "schedule-again")
LOCAL = experiment("scaling", "data", "schedule-local")
DOC = experiment("scaling", "auto-schedule.md")
IMG = experiment("scaling", "img", "cluster_auto_schedule_{}.png")
IMG_LOCAL = experiment("scaling", "img", "cluster_auto_local_schedule_{}.png")
NAMES = dict(sr.NAMES, auto="auto", **{"auto-local": "auto, unmasked local SGD",
                                       "adacomp-local": "AdaComp, unmasked local SGD"})
COLORS = {"dense": "black", "fp16": "tab:gray", "adacomp": "tab:blue", "auto": "tab:red",
          "adacomp-local": "tab:green", "auto-local": "tab:purple"}
LATE = 1.05  # auto at most this much later than the sooner of ring and AdaComp
SOONER_100 = 3.0  # and at 100 Mbit/s at least this much sooner than the fastest ring
PROBE = 3  # the chooser's probe_steps (scaling.py runs the default)


def modes(r):
    """[mode of step 1, 2, ...] ('dense' / 'codec') from the run's recorded choices: the
    first probe (1 + PROBE steps dense, then as many by the codec) carries no note;
    every later change of way is a note "step s: auto: ..." (a settled choice or a
    re-probe)."""
    s = r["summary"]
    n = s["steps"]
    out = ["dense"] * min(n, PROBE + 1) + ["codec"] * max(0, min(n, 2 * (PROBE + 1)) - PROBE - 1)
    changes = []
    for note in (s.get("auto") or {}).get("choices", []):
        m = re.match(r"step (\d+): auto: (?:probing )?(dense|codec)", note)
        if m:
            changes.append((int(m.group(1)), m.group(2)))
    mode = out[-1] if out else "dense"
    for step in range(len(out) + 1, n + 1):
        for at, way in changes:
            if at == step:
                mode = way
        out.append(mode)
    return out


def load_again():
    """{(model, link): fixed AdaComp's run made again beside auto's (part schedule-again)}."""
    return {(model, link): r for model, runs in sr.load(("adacomp",), AGAIN).items()
            for (_, link), r in runs.items()}


def with_again(runs, again):
    """runs with fixed AdaComp's run of each link replaced by the one made beside auto's
    where there is one; {link: the earlier run} of those replaced."""
    runs = dict(runs)
    earlier = {}
    for (c, link), r in list(runs.items()):
        if c == "adacomp" and (r["model"], link) in again:
            earlier[link] = r
            runs[(c, link)] = again[(r["model"], link)]
    return runs, earlier


def fastest_ring(here):
    rings = [(sr.evals(here[c])[-1][2], c) for c in sr.RINGS if c in here]
    return min(rings)[1] if rings else None


def section(runs, tg, earlier=None, who="auto", fixed=("adacomp",)):
    """The tables and verdicts of one auto variant (who) at each link: against the
    sooner of the rings and the fixed-codec runs (fixed), with the plain auto's row
    beside a variant's."""
    lines = []
    earlier = earlier or {}
    verdicts = []
    rows = tuple(dict.fromkeys((who, "auto") + fixed + ("fp16", "dense")))
    for link, link_name in sr.LINKS:
        here = {c: r for (c, l), r in runs.items() if l == link}
        if who not in here:
            continue
        lines += [f"### {link_name}", "",
                  "| run | final accuracy | steps | training s | dense steps | " + " | ".join(
                      f"time to {k} ({100 * v:.2f} %)" for k, v in tg.items()) + " |",
                  "|---|---|---|---|---|" + "---|" * len(tg)]
        for c in rows:
            r = here.get(c)
            if r is None:
                continue
            s = r["summary"]
            dense = (s.get("auto") or {}).get("dense_steps", "-") if c.startswith("auto") else (
                s["steps"] if c in sr.RINGS else 0)
            lines.append(f"| {NAMES[c]} | {100 * s['test_accuracy']:.2f} % | {s['steps']} | "
                         f"{sr.evals(r)[-1][2]:.1f} | {dense} | " +
                         " | ".join(sr.fmt_time(sr.time_to(r, v)) for v in tg.values()) + " |")
        lines.append("")
        if link in earlier and "adacomp" in here:
            then, now = earlier[link], here["adacomp"]
            lines += [f"AdaComp's run above was made beside auto's ({now['date'][:10]}); "
                      f"its earlier run ({then['date'][:10]}) trained {sr.evals(then)[-1][2]:.1f} s "
                      f"to {100 * then['summary']['test_accuracy']:.2f} %.", ""]
        auto = here[who]
        fixed_text = " and ".join(NAMES[c] for c in fixed)
        for k, v in tg.items():
            mine = sr.time_to(auto, v)
            others = [(sr.time_to(here[c], v), c) for c in fixed + sr.RINGS if c in here]
            others = [(x[0], c) for x, c in others if x is not None]
            if not others:
                lines.append(f"- {k}: neither {fixed_text} nor a ring reaches it here.")
                continue
            best, bc = min(others)
            if mine is None:
                lines.append(f"- {k}: {NAMES[who]} does not reach it; the {NAMES[bc]} needs "
                             f"{best:.1f} s: **missed**.")
                verdicts.append(False)
                continue
            ratio = mine[0] / best
            ok = ratio <= LATE
            line = (f"- {k}: {NAMES[who]} {mine[0]:.1f} s against the sooner of ring and "
                    f"{fixed_text} "
                    f"({NAMES[bc]}, {best:.1f} s): {ratio:.2f}x (target at most {LATE}x: "
                    f"**{'met' if ok else 'missed'}**)")
            verdicts.append(ok)
            rings = [(sr.time_to(here[c], v), c) for c in sr.RINGS if c in here]
            rings = [(x[0], c) for x, c in rings if x is not None]
            if link == "100mbit" and rings:
                ring, rc = min(rings)
                sooner = ring / mine[0]
                ok2 = sooner >= SOONER_100
                verdicts.append(ok2)
                line += (f"; {sooner:.2f}x sooner than the {NAMES[rc]} (target at least "
                         f"{SOONER_100:g}x: **{'met' if ok2 else 'missed'}**)")
            lines.append(line + ".")
        rc = fastest_ring(here)
        if rc is not None:
            diff = auto["summary"]["test_accuracy"] - here[rc]["summary"]["test_accuracy"]
            ok = diff >= -sr.TOLERANCE
            verdicts.append(ok)
            lines.append(f"- final accuracy: {NAMES[who]} {100 * diff:+.2f} points against the "
                         "fastest "
                         f"ring here ({NAMES[rc]}; tolerance -0.3: "
                         f"**{'met' if ok else 'missed'}**).")
        notes = (auto["summary"].get("auto") or {}).get("choices", [])
        lines += ["", f"What {NAMES[who]} chose: " + ("; ".join(notes) if notes else "(no note)") + ".",
                  ""]
    return lines, verdicts


def plot(model, runs, tg, who="auto", path=None):
    plt = pyplot()
    if plt is None:
        return None
    links = [(l, name) for l, name in sr.LINKS if (who, l) in runs]
    if not links:
        return None
    fig, grid = plt.subplots(2, len(links), figsize=(4.6 * len(links), 6.4), squeeze=False,
                             gridspec_kw={"height_ratios": [4, 1]})
    for i, (link, name) in enumerate(links):
        ax = grid[0][i]
        for c in COLORS:
            r = runs.get((c, link))
            if r is None:
                continue
            ev = sr.evals(r)
            ax.plot([t for _, _, t in ev], [100 * a for _, a, _ in ev], label=NAMES[c],
                    color=COLORS[c], lw=2 if c == who else 1)
        for v in tg.values():
            ax.axhline(100 * v, color="red", lw=0.6, ls="--")
        ax.set_title(f"{model}, 8 hosts, {name}", fontsize=10)
        ax.set_xlabel("seconds of training")
        ax.set_ylabel("test accuracy (%, 10,000 images)")
        ax.set_ylim(bottom=100 * min(tg.values()) - 8)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
        strip = grid[1][i]
        m = modes(runs[(who, link)])
        strip.bar(range(1, len(m) + 1), [1] * len(m), width=1.0,
                  color=["black" if x == "dense" else COLORS[who] for x in m])
        strip.set_yticks([])
        strip.set_title(f"{m.count('dense')} of {len(m)} steps dense", fontsize=9)
        strip.set_xlim(0.5, len(m) + 0.5)
        strip.set_xlabel(f"step: what {who} sent (black dense, "
                         f"{COLORS[who].replace('tab:', '')} AdaComp)")
    fig.tight_layout()
    path = path or IMG.format(model)
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return os.path.relpath(path, os.path.dirname(DOC))


def local_part(by_model, again, local):
    """The section of auto with the unmasked local SGD (part schedule-local): judged as
    auto is, against the sooner of the rings, fixed AdaComp and fixed AdaComp with the
    same local SGD."""
    lines = ["## auto with the unmasked local SGD", "",
             "The same runs with `--local-optimizer --no-local-mask` (each learner's SGD "
             "velocity compressed, nothing of it masked; docs/results.md): auto's codec "
             "steps and a fixed AdaComp run with it, at every link (`sudo /usr/bin/python3 "
             "experiments/run.py scaling schedule-local`). The same targets, with fixed "
             "AdaComp with the local SGD among the runs auto must not trail.", ""]
    body, met, total = [], 0, 0
    for model in [m for m in sr.MODELS if m in local]:
        runs, _ = with_again(by_model.get(model, {}), again)
        runs.update(local[model])
        ref, tg = sr.targets({k: r for k, r in runs.items() if not k[0].startswith("auto")})
        body += [f"### {model}", ""]
        if tg is None:
            body += ["No ring run to take the targets from.", ""]
            continue
        part, verdicts = section(runs, tg, who="auto-local", fixed=("adacomp", "adacomp-local"))
        body += [x.replace("### ", "#### ", 1) if x.startswith("### ") else x for x in part]
        met += sum(verdicts)
        total += len(verdicts)
        img = plot(model, runs, tg, who="auto-local", path=IMG_LOCAL.format(model))
        if img:
            body += [f"![{model}: accuracy against training seconds per link with the unmasked "
                     f"local SGD, and what auto sent each step]({img})", ""]
    return lines + [f"Of the {total} checks of this section, {met} are met.", ""] + body


def main():
    by_model = sr.load()
    again = load_again()
    have = {m: runs for m, runs in by_model.items() if any(c == "auto" for c, _ in runs)}
    if not have:
        sys.exit("no auto run in experiments/scaling/data/schedule (scaling.py --part schedule)")
    first = next(r for runs in have.values() for (c, _), r in runs.items() if c == "auto")
    lines = [
        "# `--codec auto` through the whole schedule on the cluster",
        "",
        "Generated by `experiments/scaling/auto_schedule_report.py` from "
        "`experiments/scaling/data/schedule/*.json`; the runs: `sudo /usr/bin/python3 "
        "experiments/run.py scaling schedule` (measured on "
        f"{machine_name(first)}; the 8 hosts of the namespace cluster share its cores, so "
        "compute per step is that of 8 learners on 2 cores). The set-up and targets are "
        "[schedule.md](schedule.md)'s: 12 epochs of 16,384 Fashion-MNIST images, 8 hosts, "
        "seed 1, all 10,000 test images every 32 steps; one run per codec and link. The "
        "rings' runs are schedule.md's, made in an earlier session on the same kind of VM "
        "(fc-dnn's at 10 Gbit/s and unshaped beside auto's); fixed AdaComp's were made "
        "again beside auto's (part schedule-again), and those are the ones compared.",
        "",
        "auto (`adacomp train --codec auto`, include/adacomp/speed_choice.h) sends each "
        "step as the dense float32 all-reduce of gradient plus residue or by AdaComp, "
        "whichever this run's measured step times say is faster: 4 steps dense, 4 by "
        "AdaComp, then the faster, probing again when the times drift. Targets: each of "
        "the three accuracy targets no later than 1.05x the sooner of the fastest ring "
        "and fixed AdaComp; at 100 Mbit/s at least 3x sooner than the fastest ring; "
        "final accuracy within 0.3 points of the fastest ring's.",
        "",
    ]
    met = total = 0
    for model in [m for m in sr.MODELS if m in have]:
        runs = have[model]
        ref, tg = sr.targets({k: r for k, r in runs.items() if k[0] != "auto"})
        lines += [f"## {model}", ""]
        if tg is None:
            lines += ["No ring run to take the targets from.", ""]
            continue
        lines += ["Targets, from the " + NAMES[ref["codec"]] + "'s run: " + "; ".join(
            f"{k} {100 * v:.2f} %" for k, v in tg.items()) + ".", ""]
        runs, earlier = with_again(runs, again)
        body, verdicts = section(runs, tg, earlier)
        lines += body
        met += sum(verdicts)
        total += len(verdicts)
        img = plot(model, runs, tg)
        if img:
            lines += [f"![{model}: accuracy against training seconds per link, and what auto "
                      f"sent each step]({img})", ""]
    lines[lines.index("## " + next(m for m in sr.MODELS if m in have)):0] = [
        f"Of the {total} checks below, {met} are met.", ""]
    local = sr.load(("auto-local", "adacomp-local"), LOCAL)
    if local:
        lines += local_part(by_model, again, local)
    lines += ["The auto runs' trainer commands (each under `scripts/cluster.sh run --mpi`, one "
              "learner per host):", ""]
    for model, runs in sorted(have.items()) + sorted(local.items()):
        for (c, link), r in sorted(runs.items()):
            if c.startswith("auto"):
                lines.append(f"- {model}, {link}: `{r['command'].split(' --summary-out ')[0]}`")
    lines.append("")
    with open(DOC, "w") as f:
        f.write("\n".join(lines))
    print("wrote", DOC)


if __name__ == "__main__":
    main()
