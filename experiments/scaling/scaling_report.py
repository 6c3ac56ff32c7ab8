#!/usr/bin/python3
"""Writes the generated part of experiments/scaling/report.md and its plots from the runs of
experiments/scaling/scaling.py (experiments/scaling/data/*/*.json): step times and their split,
link bytes against what the exchange must move, time to a fixed accuracy,
and a cost model fitted to the step times, with its predictions for larger
clusters and models.

Usage: /usr/bin/python3 experiments/scaling/scaling_report.py
The part between the markers "<!-- scaling:begin -->" and
"<!-- scaling:end -->" of experiments/scaling/report.md is replaced; the rest is kept.
Plots (python3-matplotlib): experiments/scaling/img/scaling_step_time.png,
experiments/scaling/img/scaling_time_to_accuracy.png.
"""

import glob
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # resultslib
from resultslib.paths import experiment  # noqa: E402
from resultslib.util import pyplot  # noqa: E402

RES = experiment("scaling", "data")
DOC = experiment("scaling", "report.md")
IMG = experiment("scaling", "img")
BEGIN, END = "<!-- scaling:begin -->", "<!-- scaling:end -->"

LINKS = ["100mbit", "1gbit", "10gbit", "unshaped"]
RATE = {"100mbit": 100e6, "1gbit": 1e9, "10gbit": 10e9, "unshaped": None}
LINK_NAME = {"100mbit": "100 Mbit/s", "1gbit": "1 Gbit/s", "10gbit": "10 Gbit/s",
             "unshaped": "unshaped"}
CODECS = ["dense", "fp16", "adacomp", "topk", "onebit"]
CODEC_NAME = {"dense": "dense fp32 ring", "fp16": "dense fp16 ring", "adacomp": "AdaComp",
              "topk": "top-k", "onebit": "1-bit"}
RING = ("dense", "fp16")


def load(part):
    out = {}
    for p in sorted(glob.glob(os.path.join(RES, part, "*.json"))):
        with open(p) as f:
            r = json.load(f)
        if "id" in r:
            out[(r["model"], r["codec"], r["P"], r["link"])] = r
    return out


def f3(x):
    return "-" if x is None else "%.3f" % x


# ---- the cost model -------------------------------------------------------
#
# step = compute + coding + communicate, with
#   coding      = compress + decompress + update (measured per codec; scales
#                 with the elements N, and decompress also with the P frames)
#   communicate = rounds * alpha + received_bytes / (eta * rate)
# where received_bytes is what one host receives per step (the summary's
# wire bytes: the ring's 2 (P - 1) / P of the gradient, or the other P - 1
# learners' frames), rounds the sequential message rounds of the exchange
# (ring: 2 (P - 1) + 2 collective headers; all-gather: P - 1 + 2), alpha a
# per-round latency and eta the share of the line rate TCP and MPI deliver.
# alpha and eta are fitted per link by least squares on mnist-cnn's runs
# (unshaped: a fitted rate instead of eta * rate).


def rounds(codec, p):
    return (2 * (p - 1) if codec in RING else (p - 1)) + 2


def recv_bytes(r):
    w = r["summary"]["wire_bytes_per_step_per_learner"]
    return w["received"]


def solve(a, b):
    """Solves the small linear system a x = b (Gaussian elimination)."""
    n = len(b)
    m = [row[:] + [b[i]] for i, row in enumerate(a)]
    for c in range(n):
        piv = max(range(c, n), key=lambda r: abs(m[r][c]))
        if abs(m[piv][c]) < 1e-300:
            return None
        m[c], m[piv] = m[piv], m[c]
        for r in range(n):
            if r != c:
                f = m[r][c] / m[c][c]
                for k in range(c, n + 1):
                    m[r][k] -= f * m[c][k]
    return [m[i][n] / m[i][i] for i in range(n)]


def nonneg_lstsq(xs, ys):
    """Least squares y = x . coef with every coef >= 0 (drops a feature whose
    coefficient comes out negative and refits)."""
    active = list(range(len(xs[0])))
    while active:
        a = [[sum(x[i] * x[j] for x in xs) for j in active] for i in active]
        b = [sum(x[i] * y for x, y in zip(xs, ys)) for i in active]
        sol = solve(a, b)
        if sol is None:
            active.pop()
            continue
        neg = [k for k, v in zip(active, sol) if v < 0]
        if not neg:
            coef = [0.0] * len(xs[0])
            for k, v in zip(active, sol):
                coef[k] = v
            return coef
        active.remove(neg[0])
    return [0.0] * len(xs[0])


def exchange_time(r):
    """What the model explains: the step minus compute and coding."""
    s = r["split"]
    return s["step"] - s["compute"] - s["compress"] - s["decompress"] - s["update"]


def half_elements(codec, p, n):
    """Values a host converts to and from binary16 per step in a fp16 ring."""
    return 2 * 2 * (p - 1) / p * n if codec == "fp16" else 0.0


def features(codec, p, nbytes, n):
    ring = codec in RING
    return (rounds(codec, p) if ring else 0.0, 0.0 if ring else rounds(codec, p), nbytes,
            half_elements(codec, p, n), 1.0)


def fit_model(steps):
    """Per link: (alpha, beta, kappa, gamma) of rounds x alpha + bytes x beta
    + fp16 conversions x kappa + gamma, over every model's runs."""
    model = {}
    for link in LINKS:
        runs = [(c, p, r) for (m, c, p, l), r in steps.items() if l == link]
        if len(runs) >= 5:
            xs = [features(c, p, recv_bytes(r), r["summary"]["parameters"]) for c, p, r in runs]
            model[link] = nonneg_lstsq(xs, [exchange_time(r) for _, _, r in runs])
    return model


def predict_comm(model, link, codec, p, nbytes, n, alpha=None):
    a_ring, a_gather, beta, kappa, gamma = model[link]
    a = a_ring if codec in RING else a_gather
    if alpha is not None:
        a = alpha
    return a * rounds(codec, p) + beta * nbytes + kappa * half_elements(codec, p, n) + gamma


# ---- the document -----------------------------------------------------------


def step_table(steps, model_name, ps):
    lines = ["| P | link | " + " | ".join(CODEC_NAME[c] for c in CODECS) +
             " | AdaComp vs the faster ring |", "|---|---|" + "---|" * (len(CODECS) + 1)]
    for p in ps:
        for link in LINKS:
            row = {c: steps.get((model_name, c, p, link)) for c in CODECS}
            if not any(row.values()):
                continue
            t = {c: (r["split"]["step"] if r else None) for c, r in row.items()}
            ring = [t[c] for c in RING if t[c] is not None]
            ratio = "-"
            if ring and t["adacomp"]:
                ratio = "%.2fx faster" % (min(ring) / t["adacomp"]) if min(ring) >= t["adacomp"] else \
                    "%.2fx slower" % (t["adacomp"] / min(ring))
            lines.append("| %d | %s | %s | %s |" % (p, LINK_NAME[link],
                                                   " | ".join(f3(t[c]) for c in CODECS), ratio))
    return lines


def split_table(steps, ps, links):
    lines = ["| P | link | codec | step | compute | compress | communicate | decompress | update |"
             " received B/step/host |", "|---|---|---|---|---|---|---|---|---|---|"]
    for p in ps:
        for link in links:
            for c in CODECS:
                r = steps.get(("mnist-cnn", c, p, link))
                if not r:
                    continue
                s = r["split"]
                lines.append("| %d | %s | %s | %s | %s | %s | %s | %s | %s | %s |" % (
                    p, LINK_NAME[link], CODEC_NAME[c], f3(s["step"]), f3(s["compute"]),
                    "%.4f" % s["compress"], f3(s["communicate"]), "%.4f" % s["decompress"],
                    "%.4f" % s["update"], "{:,.0f}".format(recv_bytes(r))))
    return lines


def bytes_table(steps, twice):
    """Host 0's link bytes per step (its interface's counters on rank 0's
    metrics lines, steps 6-50) against rank 0's exchange bytes."""
    lines = ["| P | codec | link rx B/step (host 0) | exchange rx B/step (rank 0) | rx ratio |"
             " link tx B/step | exchange tx B/step | tx ratio |", "|---|---|---|---|---|---|---|---|"]
    worst = 0.0
    for p in (2, 4, 8):
        for c in CODECS:
            b = twice.get(("mnist-cnn", c, p, "100mbit"))
            if not b or "link_rx_per_step" not in (b.get("split") or {}):
                continue
            sp = b["split"]
            rx = sp["link_rx_per_step"] / sp["exchange_rx_per_step"]
            tx = sp["link_tx_per_step"] / sp["exchange_tx_per_step"]
            worst = max(worst, rx, tx)
            lines.append("| %d | %s | {:,.0f} | {:,.0f} | %.3f | {:,.0f} | {:,.0f} | %.3f |".format(
                sp["link_rx_per_step"], sp["exchange_rx_per_step"], sp["link_tx_per_step"],
                sp["exchange_tx_per_step"]) % (p, CODEC_NAME[c], rx, tx))
    return lines, worst


def target_rows(targets):
    rows = {}
    for (m, c, p, link), r in targets.items():
        ra = r["summary"].get("reached_accuracy")
        rows[(c, p, link)] = (ra["train_seconds"], ra["step"]) if ra else None
    return rows


def target_table(targets, target):
    rows = target_rows(targets)
    lines = ["| P | link | " + " | ".join(CODEC_NAME[c] for c in CODECS) +
             " | AdaComp vs the faster ring |", "|---|---|" + "---|" * (len(CODECS) + 1)]
    verdicts = {}
    for p in (4, 8):
        for link in LINKS:
            if not any((c, p, link) in rows for c in CODECS):
                continue
            cells = []
            for c in CODECS:
                if (c, p, link) not in rows:
                    cells.append("-")
                elif rows[(c, p, link)] is None:
                    cells.append("not reached")
                else:
                    cells.append("%.1f s (%d steps)" % rows[(c, p, link)])
            ring = [rows[(c, p, link)][0] for c in RING if rows.get((c, p, link))]
            ratio = "-"
            a = rows.get(("adacomp", p, link))
            if ring and a:
                ratio = "%.2fx sooner" % (min(ring) / a[0]) if min(ring) >= a[0] else \
                    "%.2fx later" % (a[0] / min(ring))
                verdicts[(p, link)] = min(ring) / a[0]
            lines.append("| %d | %s | %s | %s |" % (p, LINK_NAME[link], " | ".join(cells), ratio))
    return lines, verdicts


PROBE_NAME = {
    "dense": "dense fp32 (lr 0.02)", "dense_lr2x": "dense fp32, lr 0.04",
    "default": "AdaComp, the paper's default (lr 0.02)", "lr2x": "AdaComp, lr 0.04",
    "bins_half": "AdaComp, bins conv 25 / fc 250", "fp32": "AdaComp, fp32 values",
    "warm32": "AdaComp after 32 dense steps",
}


def probe_table(probes):
    lines = ["| run | steps to the target | training seconds (in-process) | end-to-end rate |"
             " accuracy at each evaluation (every 16 steps) |", "|---|---|---|---|---|"]
    for name in ("dense", "dense_lr2x", "default", "lr2x", "bins_half", "fp32", "warm32"):
        r = probes.get(name)
        if not r:
            continue
        s = r["summary"]
        ra = s.get("reached_accuracy")
        lines.append("| %s | %s | %s | %.0fx | %s |" % (
            PROBE_NAME[name], ra["step"] if ra else "not reached",
            "%.1f" % ra["train_seconds"] if ra else "-", s["compression_rate"]["end_to_end"],
            ", ".join("%.3f" % e["test_accuracy"] for e in s["epoch_metrics"])))
    return lines


def model_tables(steps, model):
    lines = ["| link | alpha ring (ms per round) | alpha all-gather (ms per round) | effective "
             "rate (1 / beta) | kappa (ns per fp16 conversion) | gamma (ms per step) | runs |",
             "|---|---|---|---|---|---|---|"]
    for link in LINKS:
        if link not in model:
            continue
        alpha, alpha_g, beta, kappa, gamma = model[link]
        n = sum(1 for k in steps if k[3] == link)
        if beta > 0:
            eff = 8 / beta
            rate = "%.0f Mbit/s" % (eff / 1e6)
            if RATE[link]:
                rate += " (%.0f %% of the line)" % (100 * eff / RATE[link])
        else:
            rate = "not resolved (bytes cost nothing measurable)"
        lines.append("| %s | %.3f | %.3f | %s | %.2f | %.1f | %d |" % (
            LINK_NAME[link], 1e3 * alpha, 1e3 * alpha_g, rate, 1e9 * kappa, 1e3 * gamma, n))
    errors = []
    for (m, c, p, link), r in sorted(steps.items()):
        if link not in model:
            continue
        s = r["split"]
        pred = s["compute"] + s["compress"] + s["decompress"] + s["update"] + predict_comm(
            model, link, c, p, recv_bytes(r), r["summary"]["parameters"])
        errors.append((abs(pred / s["step"] - 1), m, c, p, link, pred, s["step"]))
    errors.sort(reverse=True)
    within = sum(1 for e in errors if e[0] <= 0.2)
    return lines, errors, within


def predictions(steps, model):
    """Exchange time per step (communicate + coding) for larger models and P."""
    # Coding costs per element, from mnist-cnn at P = 4 on 100 Mbit/s.
    ref = {c: steps.get(("mnist-cnn", c, 4, "100mbit")) for c in ("dense", "fp16", "adacomp")}
    if not all(ref.values()) or "1gbit" not in model or "10gbit" not in model:
        return None
    n_ref = ref["adacomp"]["summary"]["parameters"]
    frame = ref["adacomp"]["summary"]["wire_bytes_per_step_per_learner"]["frames"]
    per_elem = {c: (ref[c]["split"]["compress"] + ref[c]["split"]["update"]) / n_ref
                for c in ref}
    # decompress grows with the P frames decoded: a line d0 + d1 P fitted to
    # AdaComp's mnist-cnn runs (every link), scaled by the elements.
    pts = [(p, r["split"]["decompress"]) for (m, c, p, l), r in steps.items()
           if m == "mnist-cnn" and c == "adacomp"]
    mp = sum(x for x, _ in pts) / len(pts)
    md = sum(y for _, y in pts) / len(pts)
    vp = sum((x - mp) ** 2 for x, _ in pts)
    d1 = sum((x - mp) * (y - md) for x, y in pts) / vp if vp > 0 else 0.0
    d1 = max(d1, 0.0)
    d0 = max(md - d1 * mp, 0.0)
    lines = ["| parameters | link | P | dense fp32 ring | dense fp16 ring | AdaComp | "
             "AdaComp with alpha 50 us: fp32 ring / fp16 ring / AdaComp | "
             "AdaComp bytes / fp32 ring bytes |", "|---|---|---|---|---|---|---|---|"]
    for n in (431080, 25_000_000, 110_000_000):
        for link in ("100mbit", "1gbit", "10gbit"):
            for p in (8, 32, 256):
                ring32 = 2 * (p - 1) / p * 4 * n
                ring16 = ring32 / 2
                ada = (p - 1) * frame * n / n_ref

                def times(alpha):
                    return (
                        predict_comm(model, link, "dense", p, ring32, n, alpha) + per_elem["dense"] * n,
                        predict_comm(model, link, "fp16", p, ring16, n, alpha) + per_elem["fp16"] * n,
                        predict_comm(model, link, "adacomp", p, ada, n, alpha) +
                        per_elem["adacomp"] * n + (d0 + d1 * p) * n / n_ref)

                here = times(None)
                dc = times(50e-6)
                lines.append("| %s | %s | %d | %.3f s | %.3f s | %.3f s | %.3f / %.3f / %.3f s | %.2f |" %
                             ("{:,}".format(n), LINK_NAME[link], p, here[0], here[1], here[2], dc[0],
                              dc[1], dc[2], ada / ring32))
    crossover = 2 * 4 * n_ref / frame + 1
    return lines, crossover, frame, n_ref


def plots(steps, targets, target):
    plt = pyplot()
    if plt is None:
        return []
    os.makedirs(IMG, exist_ok=True)
    written = []
    colors = {"dense": "#444444", "fp16": "#1f77b4", "adacomp": "#d62728", "topk": "#2ca02c",
              "onebit": "#9467bd"}
    xs = {"100mbit": 0.1, "1gbit": 1, "10gbit": 10, "unshaped": 40}
    fig, axes = plt.subplots(1, 3, figsize=(13, 4.2), sharey=True)
    for ax, p in zip(axes, (2, 4, 8)):
        for c in CODECS:
            pts = [(xs[l], steps[("mnist-cnn", c, p, l)]["split"]["step"]) for l in LINKS
                   if ("mnist-cnn", c, p, l) in steps]
            if pts:
                ax.plot([a for a, _ in pts], [b for _, b in pts], "o-", color=colors[c],
                        label=CODEC_NAME[c])
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xticks([0.1, 1, 10, 40])
        ax.set_xticklabels(["100M", "1G", "10G", "unshaped"])
        ax.set_title("mnist-cnn, %d hosts" % p)
        ax.set_xlabel("link rate (bit/s)")
        ax.grid(True, which="both", alpha=0.3)
    axes[0].set_ylabel("time per step (s, median)")
    axes[0].legend(fontsize=8)
    fig.suptitle("Step time against link rate (namespace cluster on one 2-core machine)")

    def save(name):
        fig.tight_layout()
        path = os.path.join(IMG, name)
        fig.savefig(path, dpi=110)
        plt.close(fig)
        written.append(path)

    save("scaling_step_time.png")
    if targets:
        fig, axes = plt.subplots(1, 2, figsize=(11, 4.2))
        for ax, link in zip(axes, ("100mbit", "1gbit")):
            for c in CODECS:
                for p, style in ((4, "-"), (8, "--")):
                    r = targets.get(("mnist-cnn", c, p, link))
                    if not r:
                        continue
                    em = r["summary"]["epoch_metrics"]
                    ax.plot([e["train_seconds"] for e in em], [e["test_accuracy"] for e in em], style,
                            marker=".", color=colors[c], label="%s, %d hosts" % (CODEC_NAME[c], p))
            if target:
                ax.axhline(target, color="k", lw=0.8, ls=":")
                ax.text(ax.get_xlim()[1] * 0.98, target, "target %.3f" % target, ha="right",
                        va="bottom", fontsize=8)
            ax.set_title("mnist-cnn at %s" % LINK_NAME[link])
            ax.set_xlabel("training time (s, steps only)")
            ax.set_ylabel("test accuracy")
            ax.grid(True, alpha=0.3)
            ax.legend(fontsize=7)
        fig.suptitle("Test accuracy against wall-clock time (each run stops at the target)")
        save("scaling_time_to_accuracy.png")
    return written


def speedup(steps, m, p, link):
    a = steps.get((m, "adacomp", p, link))
    ring = [steps[(m, c, p, link)]["split"]["step"] for c in RING if (m, c, p, link) in steps]
    if not a or not ring:
        return None
    return min(ring) / a["split"]["step"]


def summary_lines(steps, targets, model):
    out = []
    for m, p in (("mnist-cnn", 8), ("fc-dnn", 4), ("cifar-cnn", 4), ("char-lstm", 4)):
        v = [speedup(steps, m, p, l) for l in LINKS]
        if all(x is not None for x in v):
            out.append("- Time per step, %s on %d hosts, AdaComp against the faster dense ring: "
                       "%s at 100 Mbit/s, 1 Gbit/s, 10 Gbit/s and unshaped." % (
                           m, p, ", ".join("%.2fx" % x for x in v)))
    rows = target_rows(targets)
    for p in (4, 8):
        parts = []
        for link in LINKS:
            a = rows.get(("adacomp", p, link))
            ring = [rows[(c, p, link)][0] for c in RING if rows.get((c, p, link))]
            if a and ring:
                parts.append("%.2fx at %s" % (min(ring) / a[0], LINK_NAME[link]))
        if parts:
            a = rows.get(("adacomp", p, "100mbit"))
            d = rows.get(("dense", p, "100mbit"))
            out.append("- Time to the target accuracy, mnist-cnn on %d hosts, the faster ring's "
                       "time over AdaComp's: %s. AdaComp needs %s steps where dense needs %s: "
                       "its steps are cheaper, but it needs more of them early in training." % (
                           p, ", ".join(parts), a[1] if a else "?", d[1] if d else "?"))
    out.append("- AdaComp pays where the link is the bottleneck: slow links (100 Mbit/s, "
               "1 Gbit/s) and models whose gradient is large next to their compute (fc-dnn: "
               "%s faster per step at 100 Mbit/s). It does not pay where compute dominates "
               "the step (cifar-cnn, char-lstm at 1 Gbit/s and up: within 1.1-1.3x per "
               "step) nor, counted to an accuracy, on fast links, where its early lag in "
               "steps costs more than its cheaper steps save." % (
                   "%.1fx" % speedup(steps, "fc-dnn", 4, "100mbit")
                   if speedup(steps, "fc-dnn", 4, "100mbit") else "?"))
    return out


def main():
    steps = load("steps")
    twice = load("bytes")
    targets = load("target")
    target = None
    tp = os.path.join(RES, "target", "target.json")
    if os.path.exists(tp):
        with open(tp) as f:
            target = json.load(f)["target"]
    if not steps:
        print("no runs under %s: run experiments/scaling/scaling.py first" % RES)
        return 1
    any_run = next(iter(steps.values()))
    model = fit_model(steps)
    out = [BEGIN, "",
           "## Wall-clock on the cluster (generated)", "",
           "Generated by `/usr/bin/python3 experiments/scaling/scaling_report.py` from the runs of "
           "`/usr/bin/python3 experiments/scaling/scaling.py` (experiments/scaling/data/; %d step-time runs, %d "
           "link-byte runs, %d time-to-accuracy runs). Machine: %s, %d cores, shared by all "
           "P hosts (compute per step grows with P here; on real hosts it would not). "
           "Every run: `adacomp train` under mpirun, one rank per host, global batch 128, "
           "16,384 training examples, seed 1; times are medians of rank 0's steps 6-25." % (
               len(steps), len(twice), len(targets), any_run["machine"]["cpu"],
               any_run["machine"]["cores"]), ""]
    out += ["### In short", ""] + summary_lines(steps, targets, model) + [""]
    out += ["### Time per step, mnist-cnn (s)", ""] + step_table(steps, "mnist-cnn", (2, 4, 8))
    out += [""]
    for p in (4, 8):
        a100 = steps.get(("mnist-cnn", "adacomp", p, "100mbit"))
        aun = steps.get(("mnist-cnn", "adacomp", p, "unshaped"))
        if a100 and aun:
            q = a100["split"]["step"] / aun["split"]["step"]
            out.append("- %d hosts: AdaComp at 100 Mbit/s takes %.2fx its unshaped step time "
                       "(target 1.25x: %s)." % (p, q, "met" if q <= 1.25 else "missed"))
    out += ["", "![step time against link rate](img/scaling_step_time.png)", ""]
    out += ["### Where the time goes, mnist-cnn (s per step, medians)", ""]
    out += split_table(steps, (4, 8), ("100mbit", "unshaped")) + [""]
    others = [m for m in ("fc-dnn", "cifar-cnn", "char-lstm")
              if any(k[0] == m for k in steps)]
    for m in others:
        out += ["### Time per step, %s (s)" % m, ""] + step_table(steps, m, (2, 4, 8)) + [""]
    if twice:
        lines, worst = bytes_table(steps, twice)
        out += ["### Bytes on the links, 100 Mbit/s", "",
                "Host 0's interface counters, read on every line of rank 0's metrics "
                "(`--link-counters eth0`) of a 50-step run, over steps 6-50, against what rank 0's "
                "communicator itself moved over the same steps (`transport_received_bytes`, "
                "`transport_sent_bytes`: a ring's 2 (P - 1) / P of the gradient each way, or the "
                "other P - 1 learners' frames in and this learner's frame to each peer out, every "
                "header included). The ratio is what TCP/IP and MPI add.", ""]
        out += lines + ["", "Worst ratio %.3f (target 1.2: %s)." % (
            worst, "met" if worst <= 1.2 else "missed"), ""]
    if targets:
        lines, verdicts = target_table(targets, target)
        out += ["### Time to %.3f test accuracy, mnist-cnn" % target, "",
                "The target is the test accuracy (2,000 test images) dense reaches after one "
                "epoch in-process; each run evaluates every 16 steps and stops at the first "
                "evaluation that reaches it (`--stop-at-accuracy`); the clock is the training "
                "steps' own time (`train_seconds`; evaluations excluded).", ""]
        out += lines + [""]
        for p in (4, 8):
            v = verdicts.get((p, "100mbit"))
            if v is not None:
                out.append("- 100 Mbit/s, %d hosts: AdaComp %.2fx sooner than the faster ring "
                           "(target 3x: %s)." % (p, v, "met" if v >= 3 else "missed"))
            v = verdicts.get((p, "1gbit"))
            if v is not None:
                out.append("- 1 Gbit/s, %d hosts: %.2fx (target: no later, >= 1: %s)." % (
                    p, v, "met" if v >= 1 else "missed"))
            for link in ("10gbit", "unshaped"):
                v = verdicts.get((p, link))
                if v is not None:
                    out.append("- %s, %d hosts: AdaComp takes %.2fx the faster ring's time (target "
                               "at most 1.05x: %s)." % (LINK_NAME[link], p, 1 / v,
                                                         "met" if 1 / v <= 1.05 else "missed"))
        out += ["", "![test accuracy against wall-clock time](img/scaling_time_to_accuracy.png)",
                ""]
        probes = {}
        for p in sorted(glob.glob(os.path.join(RES, "probe", "*.json"))):
            with open(p) as f:
                r = json.load(f)
            probes[r["id"]] = r
        if probes:
            out += ["#### Why AdaComp needs more steps to the target", "",
                    "The same target in-process (4 learner threads, no links; "
                    "`experiments/scaling/scaling.py --part probe`), the steps each setting needs. AdaComp's "
                    "elements wait in the residue before they are sent (experiments/accuracy/report.md, "
                    "diagnosis), so early in training its weights lag dense ones by some steps, "
                    "and at the start of training that lag is what decides the time to a modest "
                    "accuracy:", ""] + probe_table(probes) + [
                        "", "Values are not the cause (fp32 values need the same steps as ternary "
                        "ones). More elements per step (half the bin sizes) or a dense start "
                        "shorten the way somewhat, at a high price in rate; a larger learning rate "
                        "helps AdaComp as much as it helps dense, so the ratio of steps stays "
                        "about the same. The lag is the residue's delay itself: an early, "
                        "fast-moving gradient reaches the weights some steps late. On slow links "
                        "the cheaper steps outweigh it; on fast ones they do not, and a user who "
                        "measures time to a modest accuracy on a fast link should leave the "
                        "exchange dense.", ""]
    lines, errors, within = model_tables(steps, model)
    out += ["### The cost model", "",
            "step = compute + coding + exchange; coding = compress + decompress + update "
            "(measured); exchange = rounds x alpha + received bytes x beta + fp16 conversions "
            "x kappa + gamma, with rounds = 2 (P - 1) + 2 for a ring and P - 1 + 2 for an "
            "all-gather of frames (the 2: the step's agreement and header exchanges; the "
            "all-gather posts its P - 1 messages at once, so it gets an alpha of its own), "
            "received bytes what one host receives per step, fp16 conversions the values a "
            "fp16 ring converts per host (2 x 2 (P - 1) / P x N), and gamma a constant. The "
            "parameters are fitted per link (least squares, non-negative) over every run of "
            "that link (all models, codecs and P):", ""] + lines + [""]
    out += ["Predicted against measured step time: %d of %d runs within 20 %% (target: all). "
            "The worst:" % (within, len(errors)), "",
            "| model | codec | P | link | predicted | measured | error |", "|---|---|---|---|---|---|---|"]
    for e in errors[:8]:
        out.append("| %s | %s | %d | %s | %.3f | %.3f | %+.0f %% |" % (
            e[1], CODEC_NAME[e[2]], e[3], LINK_NAME[e[4]], e[5], e[6], 100 * (e[5] / e[6] - 1)))
    pred = predictions(steps, model)
    if pred:
        lines, crossover, frame, n_ref = pred
        out += ["", "Predicted exchange time per step (communicate + coding; compute excluded, "
                "as each host would bring its own) for larger models and clusters, AdaComp "
                "at mnist-cnn's measured frame size per parameter (%.0f bytes for %s "
                "parameters, the first 25 steps' rate; trained to the end the rate doubles and "
                "the frames halve). Two columns of figures: with alpha as fitted here (some "
                "milliseconds per round: P processes taking turns on 2 cores, so every message "
                "round waits for a peer to be scheduled), and with alpha = 50 us, a data-center "
                "TCP round trip, for hosts with their own cores; both with this machine's "
                "fitted effective rates and coding costs:" % (frame, "{:,}".format(n_ref)),
                ""] + lines + [
                "", "Bytes alone: every host receives P - 1 frames against the ring's "
                "2 (P - 1) / P gradients, so the all-gather moves more than a float32 ring "
                "only beyond P = %.0f at this compression rate (and a fp16 ring beyond half of "
                "that); its rounds grow as P - 1 against the ring's 2 (P - 1)." % crossover]
    out += ["", END]
    text = open(DOC).read() if os.path.exists(DOC) else ""
    if BEGIN in text and END in text:
        text = text[:text.index(BEGIN)] + "\n".join(out) + text[text.index(END) + len(END):]
    else:
        text = text.rstrip("\n") + "\n\n" + "\n".join(out) + "\n"
    with open(DOC, "w") as f:
        f.write(text)
    print("wrote %s" % DOC)
    for p in plots(steps, targets, target):
        print("wrote %s" % p)
    return 0


if __name__ == "__main__":
    sys.exit(main())
