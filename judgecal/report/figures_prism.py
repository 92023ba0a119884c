"""PRISM's figures: the held-out methods table, and the study sections whose ``data`` holds
more than their rows (subset curve, penalty grid, correction profile; screening on a log
scale). Each takes ``(section, log)`` and returns a matplotlib Figure, or None."""

from __future__ import annotations

import numpy as np
from matplotlib.ticker import MaxNLocator

from judgecal.report.plot import (FAINT, POINT, REFERENCE, as_metric, column, interval_figure, new_figure,
                                  simulated_apart, wrap)
from judgecal.report.sections import simulated_mark

PROFILE_ROWS = 40  # the largest corrections; the table lists every column


def methods_figure(log: dict):
    """The held-out methods table: Spearman and the paired difference to Vanilla, n = groups."""
    res = log["results"]
    rows = [[r["method"], as_metric(r, "spearman", r["groups"]), as_metric(r, "diff", r["groups"]) if "diff" in r
             else None] for r in res["methods"]]
    what = "Held-out Spearman over all items" if res.get("unit") == "items" else \
        "Held-out mean within-group Spearman"
    if res.get("design", {}).get("screened"):  # "held-out" read as the confirmation's word (a user's finding)
        what = "Mean within-group Spearman, fitted on the groups screening read (leans optimistic; the " \
               "confirmation section is held out),"
    return interval_figure(f"{what} with the human target, per method" + simulated_mark(log),
                           ["method", "Spearman [95% CI]", "diff vs Vanilla [95% CI]"], rows)


def screening_figure(section: dict, log: dict):
    """RMS ratio to the neutral clauses: log scale, 1 = moves the score as much as a neutral clause;
    the dashed line is the pass threshold, and the units screening kept say "(kept)"."""
    # the line stood at 1 under another threshold, and kept and dropped units looked alike (a user's finding)
    d = section.get("data") or {}
    rows = [[f"{r[0]} (kept)" if r[-1] is True else str(r[0]), *r[1:]] for r in section["rows"]]
    if "threshold" not in d:  # a log from before the threshold was recorded: the line at 1 alone
        return interval_figure(section["title"], section["columns"], rows, log_scale=True, reference=1.0)
    rule = str(d.get("rule", "lower_bound")).replace("_", " ")
    title, mark = simulated_apart(section["title"])
    return interval_figure(f"{title}; dashed: the threshold {d['threshold']:g} its {rule} must pass{mark}",
                           section["columns"], rows, log_scale=True, reference=d["threshold"])


def reliability_figure(section: dict, log: dict):
    """Probe / neutral and probe / repeat RMS per unit: log scale, 1 = moves the score as much
    as a neutral clause (or as asking again) does."""
    cols = section["columns"][:5]  # unit, family, probe RMS, the two ratios
    return interval_figure(section["title"], cols, [r[:5] for r in section["rows"]], log_scale=True, reference=1.0)


def joint_figure(section: dict, log: dict):
    """Interaction RMS per pair of instructions (point: estimate, bar: 95% interval, n beside);
    dashed: the additive reference, √2 × the neutral RMS (what responses that add up give);
    above it, the two instructions interact."""
    ref = section.get("data", {}).get("additive_reference")  # its row has no Metric: drawn as the line
    rows = section["rows"][:-1] if ref is not None else section["rows"]  # the reference is the last row
    return interval_figure(section["title"], section["columns"], rows,
                           reference=None if ref is None else {"interaction RMS [95% CI]": ref})


def subsets_figure(section: dict, log: dict):
    """Gain against bank size: the table's median and interquartile band, min-max faint, and
    each subset's gain as a dot."""
    if not section["rows"]:
        return None
    k = np.asarray(column(section, "units"), float)
    fig, (ax,) = new_figure(7.5, 3.8)
    if len(k) > 1:
        ax.fill_between(k, column(section, "min"), column(section, "max"), color=FAINT, alpha=0.25, lw=0,
                        label="min-max over subsets")
        ax.fill_between(k, column(section, "25%"), column(section, "75%"), color=FAINT, alpha=0.8, lw=0,
                        label="interquartile range")
    else:  # one size: bands of one point are not drawn, and the axis spanned 1.0000-1.0036 (a user's finding)
        ax.vlines(k, column(section, "min"), column(section, "max"), color=FAINT, alpha=0.25, lw=14,
                  label="min-max over subsets")
        ax.vlines(k, column(section, "25%"), column(section, "75%"), color=FAINT, alpha=0.8, lw=14,
                  label="interquartile range")
        ax.set_xlim(k[0] - 1, k[0] + 1)
    for size, gains in (section.get("data", {}).get("gains_by_size") or {}).items():
        jitter = np.random.default_rng(int(size)).uniform(-0.15, 0.15, len(gains))  # seeded: the same picture
        ax.plot(int(size) + jitter, gains, ".", color=POINT, alpha=0.15, ms=2)
    ax.plot(k, column(section, "median gain"), "o-", color=POINT, label="median")
    ax.axhline(0, color=REFERENCE, lw=0.8, ls="--")
    ax.set_xlabel("units in the subset")
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))  # 2 units read 1.2, 1.4, ... (a user's finding)
    ax.set_ylabel("held-out gain over Vanilla\n(within-group Spearman)")
    ax.legend(fontsize=8, loc="lower right")
    ax.grid(alpha=0.3)
    fig.suptitle(wrap(section["title"]), fontsize=10)
    return fig


def omission_figure(section: dict, log: dict):
    """Change in held-out gain when each unit is left out (same folds as the subset curve): left
    of 0, the study does better with the unit; right of 0, better without it."""
    rows = [r for r in section["rows"] if len(r) > 2 and r[2] is not None]
    if not rows:
        return None
    fig, (ax,) = new_figure(6.5, 1.3 + 0.24 * len(rows))
    ax.plot([r[2] for r in rows], range(len(rows)), "o", color=POINT, ms=5)
    ax.axvline(0, color=REFERENCE, lw=0.8, ls="--")
    ax.set_yticks(range(len(rows)), [str(r[0]) for r in rows], fontsize=8)
    ax.set_ylim(len(rows) - 0.5, -0.5)
    every = (section.get("data") or {}).get("all_units_gain")
    ax.set_xlabel("change in held-out gain, without the unit vs all units"
                  + (f" (all units: {every:+.3f})" if every is not None else ""), fontsize=9)
    ax.grid(axis="x", alpha=0.3)
    fig.suptitle(wrap(section["title"]), fontsize=10)
    return fig


def penalty_figure(section: dict, log: dict):
    """Gain at each fixed gamma, with the gain of the gamma inner CV chose."""
    d = section.get("data", {})
    if not d.get("gammas"):
        return None
    fig, (ax,) = new_figure(6.5, 3.2)
    ax.plot(d["gammas"], d["gain"], "o-", color=POINT, label="fixed gamma")
    if d.get("selected_gain") is not None:
        ax.axhline(d["selected_gain"], color=POINT, ls=":", label="gamma chosen by inner CV")
    ax.axhline(0, color=REFERENCE, lw=0.8, ls="--")
    ax.set_xscale("log")
    ax.set_xlabel("gamma (penalty)")
    ax.set_ylabel("held-out gain over Vanilla")
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    fig.suptitle(wrap(section["title"]), fontsize=10)
    return fig


def profile_figure(section: dict, log: dict):
    """Normalised coefficients: mean over the outer folds (point) and their range (bar); dark
    where the sign held in every fold."""
    d = section.get("data", {})
    if not d.get("columns"):
        return None
    order = np.argsort(-np.abs(np.asarray(d["mean"], float)))[:PROFILE_ROWS]
    folds = d.get("folds")
    title, mark = simulated_apart(section["title"])
    title += (f" ({len(order)} largest of {len(d['columns'])} by |mean|)" if len(d["columns"]) > PROFILE_ROWS
              else "") + mark
    fig, (ax,) = new_figure(7.5, 1.3 + 0.24 * len(order))
    unused = False
    for i, j in enumerate(order):
        held = folds is not None and d["sign_held"][j] == folds
        ax.hlines(i, d["min"][j], d["max"][j], color=FAINT, lw=3)
        if d["sign_held"][j] is None:  # 0 in every fold: no sign that flipped (a second reader's finding)
            ax.plot(d["mean"][j], i, "x", color=POINT, ms=5)
            unused = True
        else:
            ax.plot(d["mean"][j], i, "o", color=POINT if held else "white", mec=POINT, ms=5)
    ax.axvline(0, color=REFERENCE, lw=0.8, ls="--")
    ax.set_yticks(range(len(order)), [d["columns"][j] for j in order], fontsize=8)
    ax.set_ylim(len(order) - 0.5, -0.5)
    ax.set_xlabel(f"normalised correction: mean (point), range (bar) over {folds} outer folds;\n"
                  "open point: the sign flipped in some fold" + ("; x: 0 in every fold (a column never used)"
                                                                 if unused else ""), fontsize=8)
    ax.grid(axis="x", alpha=0.3)
    fig.suptitle(wrap(title), fontsize=10)
    return fig
