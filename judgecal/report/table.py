"""PRISM's results table as text (the CLI) and as rows (the HTML report), from the results log."""

from __future__ import annotations

import math

HEADER = ("method", "Spearman (95% CI)", "diff vs Vanilla (95% CI)", "Kendall", "n groups")


def _ci(est, lo, hi) -> str:
    if est is None or (isinstance(est, float) and math.isnan(est)):
        return "n/a"
    if lo is None or math.isnan(lo):
        return f"{est:+.3f}"
    return f"{est:+.3f} [{lo:+.3f}, {hi:+.3f}]"


def result_rows(log: dict) -> list[tuple[str, ...]]:
    rows = []
    for r in log["results"]["methods"]:
        diff = _ci(r.get("diff"), r.get("diff_low"), r.get("diff_high")) if "diff" in r else "-"
        rows.append((r["method"], _ci(r["spearman"], r["spearman_low"], r["spearman_high"]), diff,
                     f"{r['kendall']:+.3f}", f"{r['groups']} (+{r['groups_left_out']} tied)"))
    return rows


def grid(rows: list[tuple[str, ...]] | list[list[str]]) -> list[str]:
    """Left-aligned columns with a rule under the header row."""
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths)) for r in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return lines


def format_table(log: dict) -> str:
    res, facts = log["results"], log["stats"]["responses"]
    judge = res["judge"] + ("  (SIMULATED judge)" if log.get("simulated_judge") else "")
    foot = [
        f"judge: {judge}",
        f"target: {res['target']}; {res['items']} items in {res['groups']} groups; "
        f"held-out ({res['folds']}-fold by group) mean within-group correlation; n: groups averaged by every row "
        "(+ groups left out because the human target ties throughout); a constant prediction scores 0",
        f"requests: {facts['requests']:,}  parse: {facts['parse_status']}  "
        f"prompt tokens: {facts['prompt_tokens']:,} ({facts['computed_tokens']:,} computed, rest reused prefix)",
    ]
    timing = log["stats"]["timing"]
    if "total" in timing:
        new = sum(s.get("computed", 0) for s in log["stats"]["collect"].values())
        foot.append(f"time: {timing['total']:.0f}s total, {timing.get('collect', 0):.0f}s collecting "
                    f"({new} new requests)")
    return "\n".join(grid([HEADER, *result_rows(log)]) + [""] + foot)
