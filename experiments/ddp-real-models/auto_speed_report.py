#!/usr/bin/python3
"""experiments/ddp-real-models/auto-speed.md and img/ddp_auto_speed.png from three
sets of runs (ddp_real_models.py speed, the commands below): the one call with
auto=True through DDP on 4 hosts of the namespace cluster, at 100 Mbit/s, 1 Gbit/s
and unshaped, against no hook and the one call without auto, each set run in one
session (issue 43's DDP measurements). The sets differ in how auto's dense steps
went: data/auto-speed-ar as torch's all-reduce (today's; the first table and the
plot), data/auto-speed as the hook's all-gather, data/auto-speed-rs by slices.

auto's first steps probe: after the untimed first step, 3 timed steps dense, an
untimed one and 3 by the codec; then it settles on the faster (the codec only when 5 %
faster) and probes again every 500 steps. "settled" is the median step from the step
it settled on; "all" the mean over every timed step, probes included (what a run as
short as this one pays; over a schedule of hundreds of steps the probes weigh less).

Targets (issue 43): unshaped, auto's step at most 1.03x no hook's; at 100 Mbit/s at
most 1.05x the AdaComp hook's (here the one call without auto).

Usage: /usr/bin/python3 experiments/ddp-real-models/auto_speed_report.py
"""

import json
import os
import re
import statistics
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
from resultslib.util import pyplot  # noqa: E402

DATA = os.path.join(HERE, "data", "auto-speed", "speed")
# The same after auto's dense steps went by slices (reduce-scatter, then the averaged
# slices gathered) instead of the all-gather of float32 frames: no hook and auto only.
DATA_RS = os.path.join(HERE, "data", "auto-speed-rs", "speed")
COMMAND_RS = ("sudo /usr/bin/python3 experiments/ddp-real-models/ddp_real_models.py speed "
              "--models gpt,resnet18 --hooks none,adacomp-one-auto --links unshaped,1gbit "
              "--steps 24 --out experiments/ddp-real-models/data/auto-speed-rs")
# The same after auto's dense steps became the process group's all-reduce
# (python/adacomp/torch/dense_sum.py): every hook, every link. The report's first table.
DATA_AR = os.path.join(HERE, "data", "auto-speed-ar", "speed")
COMMAND_AR = ("sudo /usr/bin/python3 experiments/ddp-real-models/ddp_real_models.py speed "
              "--models resnet18,gpt --hooks none,adacomp-one,adacomp-one-auto --steps 24 "
              "--out experiments/ddp-real-models/data/auto-speed-ar")
# ResNet-18 unshaped again, no hook and auto back to back, three times (the first
# set's ratio there was within this machine's noise of the target).
REPEATS = os.path.join(HERE, "data", "auto-speed-ar-repeats")
COMMAND_REPEATS = ("for r in 1 2 3; do sudo /usr/bin/python3 "
                   "experiments/ddp-real-models/ddp_real_models.py speed --models resnet18 "
                   "--hooks none,adacomp-one-auto --links unshaped --steps 24 --out "
                   "experiments/ddp-real-models/data/auto-speed-ar-repeats/rep$r; done")
# The same three times more after the ranks stopped waiting for each other to agree on
# step times (commit 9260652: the all-gather posted at a step's first bucket is read a
# step later).
NOWAIT = os.path.join(HERE, "data", "auto-speed-nowait")
COMMAND_NOWAIT = ("for r in 1 2 3; do sudo /usr/bin/python3 "
                  "experiments/ddp-real-models/ddp_real_models.py speed --models resnet18 "
                  "--hooks none,adacomp-one-auto --links unshaped --steps 24 --out "
                  "experiments/ddp-real-models/data/auto-speed-nowait/rep$r; done")
DOC = os.path.join(HERE, "auto-speed.md")
IMG = os.path.join(HERE, "img", "ddp_auto_speed.png")
MODELS = ("resnet18", "gpt")
LINKS = ("100mbit", "1gbit", "unshaped")
HOOKS = ("none", "adacomp-one", "adacomp-one-auto")
NAMES = {"none": "no hook", "adacomp-one": "one call", "adacomp-one-auto": "one call, auto"}
UNSHAPED_MAX = 1.03  # auto / no hook, unshaped
SLOW_MAX = 1.05      # auto / the AdaComp hook, 100 Mbit/s
COMMAND = ("sudo /usr/bin/python3 experiments/ddp-real-models/ddp_real_models.py speed "
           "--models resnet18,gpt --hooks none,adacomp-one,adacomp-one-auto --steps 24 "
           "--out experiments/ddp-real-models/data/auto-speed")


def load(folder=DATA):
    """{(model, hook, link): summary} of the runs found."""
    out = {}
    if not os.path.isdir(folder):
        return out
    for name in sorted(os.listdir(folder)):
        m = re.fullmatch(r"(\w+)_([\w-]+)_P4_(\w+)\.json", name)
        if m and m.group(3) in LINKS:
            with open(os.path.join(folder, name)) as f:
                out[(m.group(1), m.group(2), m.group(3))] = json.load(f)
    return out


def settled_from(s):
    """The 1-based step auto first settled on a way (its first note), or None."""
    for note in (s.get("auto") or {}).get("choices", []):
        m = re.match(r"step (\d+): auto: (dense|codec),", note)
        if m:
            return int(m.group(1)), m.group(2)
    return None


def dense_probe(s):
    """The median of auto's dense probe steps as its first note quotes it, or None."""
    for note in (s.get("auto") or {}).get("choices", []):
        m = re.match(r"step \d+: auto: (dense|codec), ([\d.e+-]+) s a step against "
                     r"(dense|codec)'s ([\d.e+-]+) s", note)
        if m:
            return float(m.group(2) if m.group(1) == "dense" else m.group(4))
    return None


def times(s):
    """(all: mean of every timed step, settled: median from the settled step on, way)."""
    t = s["step_times_s"]
    first = s["untimed_steps"] + 1  # the 1-based step of t[0]
    found = settled_from(s)
    if found is None:
        return statistics.mean(t), statistics.median(t), None
    at, way = found
    rest = t[max(0, at - first):]
    return statistics.mean(t), statistics.median(rest) if rest else float("nan"), way


def rows(runs):
    """One row per model and link with every hook run there."""
    out = []
    for model in MODELS:
        for link in LINKS:
            got = {h: runs.get((model, h, link)) for h in HOOKS}
            if any(v is None for v in got.values()):
                continue
            none = statistics.median(got["none"]["step_times_s"])
            one = statistics.median(got["adacomp-one"]["step_times_s"])
            all_mean, settled, way = times(got["adacomp-one-auto"])
            out.append({"model": model, "link": link, "none": none, "one": one,
                        "auto_all": all_mean, "auto_settled": settled, "way": way,
                        "dense_probe": dense_probe(got["adacomp-one-auto"]),
                        "auto_steps": (got["adacomp-one-auto"]["auto"]["dense_steps"],
                                       got["adacomp-one-auto"]["auto"]["codec_steps"]),
                        "machine": got["none"].get("machine", "?")})
    return out


def rs_rows(runs):
    """The by-slices set: one row per model and link with no hook and auto."""
    out = []
    for model in MODELS:
        for link in LINKS:
            none, auto = runs.get((model, "none", link)), runs.get((model, "adacomp-one-auto", link))
            if none is None or auto is None:
                continue
            all_mean, settled, way = times(auto)
            out.append({"model": model, "link": link,
                        "none": statistics.median(none["step_times_s"]),
                        "auto_settled": settled, "auto_all": all_mean, "way": way,
                        "dense_probe": dense_probe(auto)})
    return out


def verdicts(r):
    """Issue 43's checks of one row: [(what, value, limit, met)]."""
    out = []
    if r["link"] == "unshaped":
        v = r["auto_settled"] / r["none"]
        out.append(("auto settled / no hook", v, UNSHAPED_MAX, v <= UNSHAPED_MAX))
    if r["link"] == "100mbit":
        v = r["auto_settled"] / r["one"]
        out.append(("auto settled / one call", v, SLOW_MAX, v <= SLOW_MAX))
    return out


def fmt(v):
    return "-" if v is None else f"{v:.3f}"


def ratio(a, b):
    return "-" if a is None or not b else f"{a / b:.2f}x"


def plot(table, path=IMG, how="an all-reduce (torch's)"):
    plt = pyplot()
    from matplotlib.ticker import FormatStrFormatter
    fig, axes = plt.subplots(1, len(MODELS), figsize=(11, 4.2))
    for ax, model in zip(axes, MODELS):
        rs = [r for r in table if r["model"] == model]
        xs = range(len(rs))
        w = 0.2
        for i, (key, label) in enumerate((("none", "no hook"), ("one", "one call"),
                                          ("auto_settled", "one call, auto (settled)"),
                                          ("auto_all", "one call, auto (all, probes in)"))):
            ax.bar([x + (i - 1.5) * w for x in xs], [r[key] for r in rs], w, label=label)
        for x, r in zip(xs, rs):
            ax.text(x + 0.5 * w, r["auto_settled"], f" {r['way']}", rotation=90, va="bottom",
                    ha="center", fontsize=8)
        ax.set_xticks(list(xs))
        ax.set_xticklabels([r["link"] for r in rs])
        ax.set_yscale("log")
        # plain numbers on the log axis (not 6 x 10^0)
        ax.yaxis.set_major_formatter(FormatStrFormatter("%g"))
        ax.yaxis.set_minor_formatter(FormatStrFormatter("%g"))
        ax.set_ylabel("seconds per step (log scale)")
        ax.set_title(f"{model}, 4 hosts")
        ax.legend(fontsize=7)
    fig.suptitle(f"DDP step time: auto against no hook and the one call, auto's dense steps "
                 f"{how} (the word: the way auto settled on)", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def rs_section(runs):
    table = rs_rows(runs)
    if not table:
        return []
    lines = ["## auto's dense steps by slices (between the two)", "",
             "For a while auto's dense steps went by slices: each rank sends every other "
             "rank its float32 piece of their slice, averages the pieces of its own slice "
             "and sends that to all (2 (P - 1) / P of the bucket each way, as a ring "
             "all-reduce). Measured then (commit 62e667c), no hook "
             "beside it (the dense probe 1.3-1.8x cheaper than the all-gather's above, "
             "still 1.3-2.1x no hook's step: the frames are made, sent and decoded by the "
             "hook, in Python, on the 2 cores the 4 hosts share):", "",
             "    " + COMMAND_RS, "",
             "| model | link | no hook s/step | auto: settled | all steps | settled on | "
             "auto's dense probe | auto settled / no hook |",
             "|---|---|---|---|---|---|---|---|"]
    for r in table:
        lines.append(f"| {r['model']} | {r['link']} | {r['none']:.3f} | "
                     f"{r['auto_settled']:.3f} | {r['auto_all']:.3f} | {r['way']} | "
                     f"{fmt(r['dense_probe'])} ({ratio(r['dense_probe'], r['none'])} no "
                     f"hook's) | {r['auto_settled'] / r['none']:.2f}x |")
    return lines + [""]


def table_lines(table):
    """The full table of one set (rows())."""
    lines = ["| model | link | no hook s/step | one call | one call, auto: settled | all steps "
             "| settled on | auto's dense probe | dense / codec steps | checks |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for r in table:
        checks = "; ".join(f"{w} {v:.2f}x (at most {lim:.2f}x: {'met' if ok else 'missed'})"
                           for w, v, lim, ok in verdicts(r)) or "-"
        lines.append(f"| {r['model']} | {r['link']} | {r['none']:.3f} | {r['one']:.3f} | "
                     f"{r['auto_settled']:.3f} | {r['auto_all']:.3f} | {r['way']} | "
                     f"{fmt(r['dense_probe'])} ({ratio(r['dense_probe'], r['none'])} no hook's) | "
                     f"{r['auto_steps'][0]} / {r['auto_steps'][1]} | {checks} |")
    return lines


def ar_section(table, img, doc):
    """The first section: auto's dense steps as the process group's all-reduce."""
    lines = ["## auto's dense steps as torch's all-reduce", "",
             "Since `python/adacomp/torch/dense_sum.py`, a dense step adds the residue into "
             "the bucket and hands it to the process group's `all_reduce`, as DDP without a "
             "hook sends it. Measured with", "", "    " + COMMAND_AR, "",
             *table_lines(table), "",
             f"![step times]({os.path.relpath(img, os.path.dirname(doc))})", ""]
    probe = [r["dense_probe"] / r["none"] for r in table if r["dense_probe"]]
    if probe:
        ways = {link: sorted({f"{r['model']} {r['way']}" for r in table if r["link"] == link})
                for link in LINKS}
        lines += [f"auto's dense probe took {min(probe):.2f}x to {max(probe):.2f}x no hook's "
                  "step (the all-gather's below: 1.8x to 2.9x; by slices: 1.3x to 2.1x). "
                  "What it settled on, per link: " + "; ".join(
                      f"{link}: {', '.join(w)}" for link, w in ways.items() if w) + ".", ""]
    return lines


def same_steps_ratios(sets):
    """{(model, link): [auto settled / no hook's median over the same steps]}: no hook's
    steps from the step auto settled on (a run's first steps are slower; auto's settled
    median leaves them out)."""
    out = {}
    for runs in sets:
        for (model, hook, link), auto in runs.items():
            none = runs.get((model, "none", link))
            found = settled_from(auto)
            if hook != "adacomp-one-auto" or none is None or found is None:
                continue
            t = none["step_times_s"][max(found[0] - none["untimed_steps"] - 1, 0):]
            out.setdefault((model, link), []).append(times(auto)[1] / statistics.median(t))
    return out


def repeat_ratios(ar_runs, repeats):
    """{(model, link): [auto settled / no hook, the first set's first]} for the pairs
    the repeat sets ({name: runs}) hold."""
    out = {}
    for runs in [ar_runs] + [repeats[k] for k in sorted(repeats)]:
        for (model, hook, link), auto in runs.items():
            none = runs.get((model, "none", link))
            if hook != "adacomp-one-auto" or none is None:
                continue
            if runs is ar_runs and not any((model, "none", link) in r for r in repeats.values()):
                continue
            settled = times(auto)[1]
            out.setdefault((model, link), []).append(settled / statistics.median(
                none["step_times_s"]))
    return out


def load_repeats(folder=REPEATS):
    if not os.path.isdir(folder):
        return {}
    return {name: load(os.path.join(folder, name, "speed")) for name in sorted(os.listdir(folder))}


def repeats_lines(ar_runs, repeats):
    ratios = repeat_ratios(ar_runs, repeats)
    if not ratios:
        return []
    return (["Repeated, no hook and auto back to back each time:", "",
             "    " + COMMAND_REPEATS, ""]
            + ratio_lines(ratios, " (the first from the table above)") + [""])


def ratio_lines(ratios, after=""):
    """One line per (model, link): its ratios, their median and the verdict."""
    lines = []
    for (model, link), rs in sorted(ratios.items()):
        verdict = "met" if statistics.median(rs) <= UNSHAPED_MAX else "missed"
        lines.append(f"- {model} {link}: auto settled / no hook "
                     + ", ".join(f"{r:.3f}" for r in rs)
                     + f"{after}; median {statistics.median(rs):.3f}"
                     f" (at most {UNSHAPED_MAX:.2f}: {verdict}).")
    return lines


def nowait_lines(sets, before=()):
    """The sets run after the step-time agreement stopped waiting ({name: runs}); before:
    the sets of the same pair run while it waited (the all-reduce set and its repeats)."""
    ratios = repeat_ratios({}, sets)
    if not ratios:
        return []
    same = same_steps_ratios([sets[k] for k in sorted(sets)])
    earlier = same_steps_ratios(before)
    lines = ["## After the ranks stopped waiting to agree on step times", "",
             "At each step's first bucket auto used to all-gather the last step's time and "
             "wait for it there, a point where every rank waited for the slowest to reach "
             "its first bucket (DDP's own all-reduce does not wait there). Since commit "
             "9260652 each rank posts its time to an all-gather that it reads at the next "
             "step's first bucket, so the time reaches the chooser a step late (each probe "
             "runs a step longer: settled from step 11, not 9). ResNet-18 unshaped, no "
             "hook and auto back to back, three times:", "", "    " + COMMAND_NOWAIT, ""]
    lines += ratio_lines(ratios)
    lines += ["", "A run's first steps are slower, and auto's settled median leaves them out "
              "while no hook's median keeps them. Against no hook's median over the same "
              "steps (from the step auto settled on):", ""]
    lines += [line.replace(": auto settled", ": not waiting: auto settled")
              for line in ratio_lines(same)]
    lines += [line.replace(": auto settled", ": waiting (the sets above): auto settled")
              for line in ratio_lines({k: v for k, v in earlier.items() if k in same})]
    return lines + [""]


def report(runs=None, doc=DOC, img=IMG, rs_runs=None, ar_runs=None, repeats=None,
           nowait=None):
    runs = load() if runs is None else runs
    ar_runs = load(DATA_AR) if ar_runs is None else ar_runs
    ar_table = rows(ar_runs)
    table = rows(runs)
    machine = (ar_table or table or [{"machine": "?"}])[0]["machine"]
    lines = ["# auto through DDP: the one call on 4 hosts at every link", "",
             "Generated by `/usr/bin/python3 experiments/ddp-real-models/auto_speed_report.py` "
             "from the runs of the commands below (each set in one session, the runs of each "
             "link back to back; 24 steps each, the first 2 untimed; the examples' default "
             "schedules and batch sizes, seed 0). "
             f"Machine: {machine}, 2 cores shared by the 4 hosts. Targets (issue 43): "
             f"unshaped, auto settled at most {UNSHAPED_MAX:.2f}x no hook's step; at 100 "
             f"Mbit/s at most {SLOW_MAX:.2f}x the one call's.", ""]
    repeats = load_repeats() if repeats is None else repeats
    if ar_table:
        lines += ar_section(ar_table, img, doc)
        lines += repeats_lines(ar_runs, repeats)
    before = [ar_runs] + [r for _, r in sorted(repeats.items())]
    lines += nowait_lines(load_repeats(NOWAIT) if nowait is None else nowait, before)
    if table:
        lines += ["## auto's dense steps as the hook's all-gather (before)", "",
                  "Made at commit c2222a1 (check it out to remake it) with", "",
                  "    " + COMMAND, "", *table_lines(table), ""]
        if not ar_table:
            lines += [f"![step times]({os.path.relpath(img, os.path.dirname(doc))})", ""]
    slow = [r["dense_probe"] / r["none"] for r in table if r["dense_probe"]]
    if slow:
        lines += [
            "What those runs said. auto's dense steps were the hook's "
            "all-gather: every rank sent its float32 frame to every other rank and "
            "decoded the P - 1 it received, "
            "where no hook's all-reduce (Gloo's ring) moves 2 (P - 1) / P of the gradient "
            f"per rank. At 4 hosts its dense probe took {min(slow):.1f}x to {max(slow):.1f}x "
            "no hook's step, so it settled on the codec at every link, also where no "
            "hook's all-reduce is the fastest way (the GPT unshaped). Elsewhere (100 "
            "Mbit/s, 1 Gbit/s, and ResNet-18 unshaped, where the one call and no hook "
            "are within 3 % of each other) auto's settled step is the one call's, within "
            "this shared machine's noise (the settled median leaves "
            "out the first steps, whose frames are larger). What it costs is the probe: "
            "over these 24 steps, 4 dense ones are most of the gap between the all-steps "
            "mean and the settled median.", ""]
    lines += rs_section(load(DATA_RS) if rs_runs is None else rs_runs)
    with open(doc, "w") as f:
        f.write("\n".join(lines))
    if ar_table:
        plot(ar_table, img)
    elif table:
        plot(table, img, how="the hook's all-gather")
    return ar_table or table


if __name__ == "__main__":
    for r in report():
        print(r["model"], r["link"], f"none {r['none']:.3f} one {r['one']:.3f} "
              f"auto {r['auto_settled']:.3f} ({r['way']}) all {r['auto_all']:.3f}")
