"""Number and markdown formatting for experiments/accuracy/report.md: how each kind of cell
is written (accuracies, losses, gaps, spreads, tolerances, rates, a run's
settings and length), a section's heading, and the markdown table row and rule."""

from .runs import final_metric, is_lstm, spec


def md_section(title):
    """A section's lines so far (its "###" heading and a blank line) and the
    function that appends one more."""
    lines = ["### " + title, ""]
    return lines, lines.append


def md_row(cells):
    """A markdown table row of these (text) cells."""
    return "| " + " | ".join(cells) + " |"


def md_rule(n):
    """The line under a markdown table header of n columns."""
    return "|" + "---|" * n


# ------------------------------------------ the full-scale cells (per model)


def fmt_value(model, v):
    """A test accuracy (percent) or, for char-lstm, a loss per character."""
    if v is None:
        return "-"
    return ("%.3f" % v) if is_lstm(model) else ("%.2f%%" % (100 * v))


def fmt_gap(model, g):
    """A signed gap: accuracy points, or (char-lstm) nats per character."""
    if g is None:
        return "-"
    return ("%+.3f" % g) if is_lstm(model) else ("%+.2f pt" % (100 * g))


def fmt_spread(model, s, n):
    """A seed spread over n seeds."""
    if n == 0:
        return "-"
    if s is None or n < 2:
        return "(1 seed)"
    return ("%.3f" % s) if is_lstm(model) else ("%.2f pt" % (100 * s))


def fmt_tol(model, t):
    """A tolerance."""
    return ("%.3f" % t) if is_lstm(model) else ("%.2f pt" % (100 * t))


def fmt_rate(v):
    """A compression rate in the full-scale tables and plots."""
    if v is None:
        return "-"
    return "%.0fx" % v if v >= 100 else "%.1fx" % v


def fmt_share(share):
    """A rate as a share of the default's."""
    return ("%.2f" % share) if share is not None else "-"


def setting_text(r):
    """A summary's learning rate, and its clipping and warm-up where set."""
    clip = r.get("clip_grad_norm")
    warm = r.get("lr_warmup_steps")
    return ("%g" % r["lr"]) + ((", clip %g" % clip) if clip else "") + (
        (", warm-up %d steps" % warm) if warm else "")


# ------------------------------------------ the quick-scale cells (per run)


def fmt_quick_rate(v):
    """A compression rate in the quick-scale tables (two decimals under 10x)."""
    if v is None:
        return "-"
    if v >= 100:
        return "%.0fx" % v
    if v >= 10:
        return "%.1fx" % v
    return "%.2fx" % v


def fmt_metric(r):
    """A summary's test accuracy, or its loss per character with the unit."""
    return ("%.3f loss/char" % final_metric(r)) if is_lstm(r["model"]) else (
        "%.2f%%" % (100 * r["test_accuracy"]))


def fmt_diff(r, dense):
    """A summary against its dense row ("ref" for that row itself)."""
    if dense is None:
        return "(no dense run)"
    if r is dense:
        return "ref"
    d = final_metric(r) - final_metric(dense)
    if is_lstm(r["model"]):
        return "%+.3f" % d
    return "%+.2f pt" % (100 * d)


def coding_share(r):
    """(compress + decompress) / a learner's own work, as a percentage."""
    busy = (r["compute_seconds"] + r["compress_seconds"] +
            r["decompress_seconds"] + r["update_seconds"])
    if busy <= 0:
        return "-"
    return "%.1f%%" % (100 * (r["compress_seconds"] + r["decompress_seconds"]) /
                        busy)


def length_str(r):
    """A run's length: the epochs (and steps) or steps (and epochs) it was
    given, as its command line set it."""
    if spec(r["run"]).epochs is not None:
        return "%g ep (%d st)" % (r["epochs"], r["steps"])
    return "%d st (%.2f ep)" % (r["steps"], r["epochs"])
