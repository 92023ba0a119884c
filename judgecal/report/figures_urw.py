"""URW's figures: the datasets x methods table, the coverage check against alpha with the
weight separation (Remark B.3), and accuracy against the number of templates."""

from __future__ import annotations

import numpy as np

from judgecal.report.plot import (FAINT, POINT, REFERENCE, as_metric, column, finite, interval_figure, metric, new_figure,
                                  percentile_fallback, wrap)
from judgecal.report.sections import simulated_mark
from judgecal.report.urw import auroc_text


def methods_figure(log: dict):
    """Pairwise accuracy and the difference to Uniform per dataset and method, n = prompts."""
    res = log["results"]
    rows = [[f"{d}: {r['method']}", as_metric(r[d], "accuracy", r[d]["prompts"]),
             None if r["method"] == "Uniform" else as_metric(r[d], "diff", r[d]["prompts"])]
            for d in res["datasets"] for r in res["methods"]]
    return interval_figure("Pairwise accuracy per dataset and method (a tie counts 1/2; dashed: 0.5, chance)"
                           + simulated_mark(log), ["dataset: method", "accuracy [95% CI]", "diff vs Uniform [95% CI]"],
                           rows, reference={"accuracy [95% CI]": 0.5})  # below chance was not seen (a user's finding)


def coverage_figure(log: dict):
    """Both coverage events against alpha (each should lie on or under the diagonal), and the
    mean raw weight of correct and of wrong votes."""
    cov = log["results"].get("coverage") or {}
    if not cov.get("rows"):
        return None
    w = cov.get("weights") or {}
    sep = all(k in w for k in ("correct", "wrong"))
    fig, axes = new_figure(10 if sep else 5.5, 3.8, 2 if sep else 1)
    ax = axes[0]
    alpha = [c["alpha"] for c in cov["rows"]]
    ax.plot([0, max(alpha)], [0, max(alpha)], color=REFERENCE, lw=0.8, ls="--", label="= alpha")
    ax.plot(alpha, [c["theorem"] for c in cov["rows"]], "o-", color=POINT,
            label="(a) Theorem 3.1: vote correct, weight <= alpha")
    ax.plot(alpha, [c["validity"] for c in cov["rows"]], "s-", color=FAINT, mec=POINT,
            label="(b) validity: true label's p-value <= alpha")
    ax.set_xlabel("alpha")
    ax.set_ylabel("rate on held-out folds")
    ax.legend(fontsize=7, loc="upper left")
    ax.grid(alpha=0.3)
    by = "prompt" if "prompts" in cov else "response"  # a log from before held out by response
    ax.set_title(f"Coverage ({cov['folds']}-fold by {by}, {cov['criteria']} criteria)", fontsize=9)
    if sep:
        ax = axes[1]
        kinds = ["correct", "wrong"]
        heights = [w[k]["mean_weight"] if w[k]["n"] else 0.0 for k in kinds]  # no such vote: no bar, n=0
        ax.bar(kinds, heights, color=[POINT, FAINT])
        for i, k in enumerate(kinds):
            ax.annotate(f"n={w[k]['n']}", (i, heights[i]), xytext=(0, 3), textcoords="offset points",
                        ha="center", fontsize=8)
        auroc = auroc_text(w)
        ax.set_title(wrap(f"Weight separation (Remark B.3): AUROC {auroc}", 50), fontsize=9)
        ax.set_ylabel("mean raw weight of the votes")
    fig.suptitle("URW coverage check" + simulated_mark(log), fontsize=10)
    return fig


def template_count_figure(section: dict, log: dict):
    """Accuracy against the number of templates N: the mean over subsets with its 95% interval,
    each subset's accuracy as a dot, and Uniform's accuracy on all pairs for reference."""
    if not section["rows"]:
        return None
    n = column(section, "N")
    means = [metric(c) for c in column(section, next(c for c in section["columns"] if c.startswith("accuracy")))]
    fig, (ax,) = new_figure(7, 3.6)
    for size, accs in (section.get("data", {}).get("accuracy_by_subset_size") or {}).items():
        jitter = np.random.default_rng(int(size)).uniform(-0.12, 0.12, len(accs))  # seeded: the same picture
        ax.plot(int(size) + jitter, accs, ".", color=FAINT, ms=4)
    percentile = False
    for k, m in zip(n, means):
        if m is None:
            continue
        if finite(m.get("low")) and finite(m.get("high")):
            fallback = percentile_fallback(m)  # dashed, as in every interval figure
            ax.vlines(k, m["low"], m["high"], color=POINT, lw=2, linestyles="--" if fallback else "-")
            percentile |= fallback
        ax.plot(k, m["value"], "o", color=POINT)
    uniform = next((r for r in log.get("results", {}).get("methods", []) if r["method"] == "Uniform"), None)
    if uniform and "all" in uniform:
        ax.axhline(uniform["all"]["accuracy"], color=REFERENCE, lw=0.8, ls="--", label="Uniform, all pairs")
        # under the axes: "best" sees no interval drawn as vlines and sat on two (users' findings)
        fig.legend(fontsize=8, loc="outside lower center", frameon=False)
    ax.set_xticks(n)
    ax.set_xlabel("templates N (every subset of that size)"
                  + ("; dashed bar: percentile interval (the table's note says why)" if percentile else ""))
    ax.set_ylabel("pairwise accuracy")
    ax.grid(alpha=0.3)
    fig.suptitle(wrap(section["title"]), fontsize=10)
    return fig
