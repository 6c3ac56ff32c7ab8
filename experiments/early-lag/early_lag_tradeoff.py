"""The trade-off plots of the early-lag reports (experiments/early-lag/early_lag.py,
experiments/early-lag/early_lag_grid.py): each run's steps to dense's one-epoch figure against its
whole-run compression rate, with the box of the targets (at most 1.15x dense's
steps at 0.8x the default's rate or more) shaded."""


from resultslib.paths import experiment
from resultslib.util import pyplot


def tradeoff_points(st):
    """The runs of a cell's figures (cell_stats) as (name, rate against the default's,
    steps against dense's) for those that reached the target, and (name, rate, None)
    for those that did not; dense is in neither."""
    reached, missed = [], []
    for r in st["rows"]:
        if r["name"] == "dense":
            continue
        (reached if r["ratio"] is not None else missed).append(
            (r["name"], r["rate_vs"], r["ratio"]))
    return reached, missed


TARGET_BOX = "targets: <= 1.15x steps, >= 0.8x rate"


def tradeoff_axes(plt, xs, ys, size, x_pad, title):
    """A figure for runs' steps to the target (ys, against dense's) over their
    whole-run rate (xs, against the default's): the rate on a log axis padded by the
    factor x_pad, ticks named "0.8x", the targets' box shaded (label TARGET_BOX), the
    axes named. Returns (fig, ax); the caller adds the points."""
    fig, ax = plt.subplots(figsize=size)
    lo_x, hi_x = min(xs + [0.8]) / x_pad, max(xs + [1.0]) * x_pad
    lo_y, hi_y = min(ys + [1.0]) - 0.08, max(ys + [1.15]) + 0.1
    ax.fill_between([0.8, hi_x], lo_y, 1.15, color="tab:green", alpha=0.12, lw=0,
                    label=TARGET_BOX)
    ax.axvline(0.8, color="tab:green", lw=0.8, ls=":")
    ax.axhline(1.15, color="tab:green", lw=0.8, ls=":")
    ax.set_xscale("log")
    ax.set_xlim(lo_x, hi_x)
    ax.set_ylim(lo_y, hi_y)
    # Decades on a wide axis, tenths on a narrow one (where 0.8x would otherwise
    # print over 1x, or there would be no tick at all).
    ticks = ((0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 1.5) if hi_x / lo_x >= 20
             else (0.5, 0.6, 0.7, 0.8, 0.9, 1.0, 1.1, 1.5))
    ticks = [t for t in ticks if lo_x <= t <= hi_x]
    ax.set_xticks(ticks)
    ax.set_xticklabels([f"{t:g}x" for t in ticks])
    ax.xaxis.set_minor_formatter(plt.NullFormatter())
    ax.set_xlabel("whole-run compression rate against the default's (log)")
    ax.set_ylabel("steps to dense's one-epoch figure / dense's")
    ax.set_title(title)
    ax.grid(alpha=0.3, which="both")
    return fig, ax


def save_with_legend_below(plt, fig, handles, bottom, path):
    """Saves fig with a legend of these handles below the axes (the lowest `bottom`
    of the figure), where it covers no point."""
    fig.tight_layout(rect=(0, bottom, 1, 1))
    fig.legend(handles=handles, fontsize=8, loc="lower center", ncol=4, frameon=False)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    print("wrote", path)


def plot_tradeoff(model, st):
    """img/early_lag_tradeoff_<model>.png: steps to the target against the
    whole-run rate, one point per run, the targets' box shaded."""
    plt = pyplot()
    if plt is None:
        return
    reached, _ = tradeoff_points(st)
    if not reached:
        return
    fig, ax = tradeoff_axes(plt, [x for _, x, _ in reached], [y for _, _, y in reached],
                            (7, 5.4), 1.6, f"{model}: what each run trades (mean over seeds)")
    # One marker and colour per run, named in the legend (labels beside points that
    # lie close together would print over each other).
    markers = "osD^vP*Xh<>"
    for k, (name, x, y) in enumerate(reached):
        ax.scatter([x], [y], marker=markers[k % len(markers)], s=46, zorder=3,
                   color=plt.cm.tab10(k % 10),
                   label="default" if name == "adacomp" else name)
    save_with_legend_below(plt, fig, ax.get_legend_handles_labels()[0], 0.12,
                           experiment("early-lag", "img", f"early_lag_tradeoff_{model}.png"))
