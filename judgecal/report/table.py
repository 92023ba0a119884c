"""The results table printed by the CLI (plain text) and embedded in the HTML report."""

from __future__ import annotations

import math

HEADER = ("method", "Spearman (95% CI)", "diff vs Vanilla (95% CI)", "Kendall", "groups")


def _ci(est, lo, hi) -> str:
    if est is None or (isinstance(est, float) and math.isnan(est)):
        return "n/a"
    if lo is None or math.isnan(lo):
        return f"{est:+.3f}"
    return f"{est:+.3f} [{lo:+.3f}, {hi:+.3f}]"


def result_rows(summary: dict) -> list[tuple[str, ...]]:
    rows = []
    for r in summary["results"]:
        diff = _ci(r.get("diff"), r.get("diff_low"), r.get("diff_high")) if "diff" in r else "-"
        rows.append((r["method"], _ci(r["spearman"], r["spearman_low"], r["spearman_high"]), diff,
                     f"{r['kendall']:+.3f}", f"{r['groups']} (+{r['groups_left_out']} constant)"))
    return rows


def format_table(summary: dict) -> str:
    rows = [HEADER, *result_rows(summary)]
    widths = [max(len(r[i]) for r in rows) for i in range(len(HEADER))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths)) for r in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    judge = summary["judge"] + ("  (SIMULATED judge)" if summary.get("simulated_judge") else "")
    foot = [
        f"judge: {judge}",
        f"target: {summary['target']}; {summary['items']} items in {summary['groups']} groups; "
        "held-out (5-fold by group) mean within-group correlation",
        f"requests: {summary['requests']:,}  parse: {summary['parse_status']}  "
        f"prompt tokens: {summary['prompt_tokens']:,} ({summary['computed_tokens']:,} computed, rest reused prefix)",
    ]
    if "wall_seconds" in summary:
        c = summary.get("collect", {})
        foot.append(f"time: {summary['wall_seconds']:.0f}s total, {c.get('wall_s', 0):.0f}s collecting "
                    f"({c.get('computed', 0)} new requests)")
    return "\n".join(lines + [""] + foot)
