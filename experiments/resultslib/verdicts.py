"""The targets and the verdicts on them: the tolerances (at the end of
training, and from the second epoch on), the seed means and spreads and the
signed gaps they compare, the rate targets, and the "met" / "missed" words
every table of experiments/accuracy/report.md prints."""

import statistics

from .fmt import fmt_gap, fmt_tol
from .runs import LAYER_TYPES, epoch_metric, final_metric, is_lstm

# The targets: at the end, AdaComp within 0.3 points of dense (or the
# seed spread if larger); char-lstm within 0.02 nats per character.
ACC_TOLERANCE = 0.003
LOSS_TOLERANCE = 0.02
# The target beyond the paper: within 1 point of dense at every evaluation
# from the end of the second epoch on (0.05 nats/char, our reading for
# char-lstm), or within that epoch's seed spread if larger.
EARLY_ACC_TOLERANCE = 0.01
EARLY_LOSS_TOLERANCE = 0.05
RATE_TARGETS = {"conv": 40.0, "fc": 200.0, "lstm": 200.0}


def spread(values):
    """(mean, max - min) over seeds; spread 0 for one seed."""
    if not values:
        return None, None
    return statistics.fmean(values), (max(values) - min(values))


def signed_gap(model, dense, ada):
    """AdaComp against dense, > 0 when AdaComp is better: accuracy minus
    accuracy, or (char-lstm) dense's loss minus AdaComp's."""
    return (dense - ada) if is_lstm(model) else (ada - dense)


def mean_rates(rs):
    """The compression rates per layer type and end to end, mean over runs."""
    out = {}
    for t in LAYER_TYPES + ("end_to_end",):
        vals = [r["compression_rate"][t] for r in rs if r["compression_rate"].get(t) is not None]
        out[t] = statistics.fmean(vals) if vals else None
    return out


# ------------------------------------------------------------- tolerances


def end_tolerance(model, *spreads):
    """The end-of-training tolerance: 0.3 points (0.02 nats/char) or the
    largest of the seed spreads given, whichever is larger."""
    base = LOSS_TOLERANCE if is_lstm(model) else ACC_TOLERANCE
    return max([base] + [s or 0 for s in spreads])


def early_tolerance(model, *spreads):
    """One epoch's tolerance of the target beyond the paper: 1 point (0.05
    nats/char) or the largest of that epoch's seed spreads, whichever is
    larger."""
    base = EARLY_LOSS_TOLERANCE if is_lstm(model) else EARLY_ACC_TOLERANCE
    return max([base] + list(spreads))


def within(gap, tol):
    """Whether a signed gap (negative: AdaComp behind) is within tol."""
    return gap >= -tol


def beyond(gap, tol):
    """Whether a signed gap is behind by more than tol."""
    return gap < -tol


def met(gap, tol):
    """"met" or "missed"."""
    return "met" if within(gap, tol) else "missed"


def rate_below_half(words, share):
    """words, and ", rate below half" when the rate is under half the
    default's (share: the rate as a share of the default's, or None)."""
    if share is not None and share < 0.5:
        return words + ", rate below half"
    return words


# ---------------------------------------------------------------- verdicts


def verdict(model, dense, ada, rates):
    """'met' / 'missed' for the end-of-training target, with the reason."""
    dm, ds = spread([final_metric(r) for r in dense])
    am, as_ = spread([final_metric(r) for r in ada])
    if dm is None or am is None:
        return "not run"
    tol = end_tolerance(model, ds, as_)
    gap = signed_gap(model, dm, am)
    rate_ok = all(rates.get(t) is None or rates[t] >= need for t, need in RATE_TARGETS.items())
    words = met(gap, tol)
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


def worst_gap_from_epoch2(model, dense, ada):
    """The most negative per-epoch gap from epoch 2 on (None if too short)."""
    gaps = per_epoch_gaps(model, dense, ada)[1:]
    return min(gaps) if gaps else None


def early_tolerances(model, dense, ada):
    """At each epoch end, the tolerance of the target beyond the paper: the
    larger of 1 point (0.05 nats/char) and dense's and AdaComp's seed spreads
    at that epoch."""
    ds, as_ = per_epoch_spreads(model, dense), per_epoch_spreads(model, ada)
    return [early_tolerance(model, d, a) for d, a in zip(ds, as_)]


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
        if beyond(gaps[i], tols[i]):
            return "missed (ep %d: %s, tolerance %s)" % (
                i + 1, fmt_gap(model, gaps[i]), fmt_tol(model, tols[i]))
    return "met"
