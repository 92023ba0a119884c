"""URW's methods x datasets table (printed and in HTML) and the coverage check."""

from __future__ import annotations

import html
import json
from pathlib import Path

from judgecal.io import write_text


def _cell(c: dict) -> str:
    return f"{c['accuracy']:.3f} [{c['low']:.3f}, {c['high']:.3f}] {100 * c['rel_improvement']:+.1f}%"


def urw_rows(summary: dict) -> tuple[list[str], list[list[str]]]:
    head = ["method"] + [f"{d} ({summary['results'][0][d]['pairs']} pairs)" for d in summary["datasets"]]
    return head, [[r["method"]] + [_cell(r[d]) for d in summary["datasets"]] for r in summary["results"]]


def _grid(head, rows) -> list[str]:
    table = [head, *rows]
    widths = [max(len(r[i]) for r in table) for i in range(len(head))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths)) for r in table]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return lines


def format_urw_table(summary: dict) -> str:
    head, rows = urw_rows(summary)
    cov = _grid(["alpha", "P(correct vote weight <= alpha)", "held-out calibration criteria"],
                [[f"{c['alpha']:.2f}", f"{c['rate']:.3f}", str(c["n"])] for c in summary["coverage"]])
    verifier = summary["verifier"] + ("  (SIMULATED verifier)" if summary.get("simulated_judge") else "")
    foot = [
        "cells: pairwise accuracy (tie = 1/2) [95% bootstrap CI over pairs], relative improvement over Uniform",
        f"verifier: {verifier}; templates {summary['templates']} (set {summary['template_version']})",
        f"calibration: {summary['calibration_criteria']} labelled criteria; evaluation: {summary['pairs']} pairs, "
        f"{summary['evaluation_criteria']} criteria {summary['criterion_sources']}",
        f"requests: {summary['requests']:,}  parse: {summary['parse_status']}  prompt tokens: "
        f"{summary['prompt_tokens']:,} ({summary['computed_tokens']:,} computed)",
    ]
    if "wall_seconds" in summary:
        foot.append(f"time: {summary['wall_seconds']:.0f}s total")
    return "\n".join(_grid(head, rows) + [""] + foot + ["", "coverage check (5-fold on the calibration set):"] + cov)


def write_urw_html(summary: dict, path: Path) -> Path:
    e = html.escape
    head, rows = urw_rows(summary)
    th = "".join(f"<th>{e(h)}</th>" for h in head)
    body = "".join("<tr>" + "".join(f"<td>{e(c)}</td>" for c in r) + "</tr>" for r in rows)
    cov = "".join(f"<tr><td>{c['alpha']:.2f}</td><td>{c['rate']:.3f}</td></tr>" for c in summary["coverage"])
    sim = '<p style="color:#c00">SIMULATED verifier: these numbers test the method only.</p>' \
        if summary.get("simulated_judge") else ""
    facts = {k: summary[k] for k in ("verifier", "templates", "template_version", "calibration_criteria",
                                     "evaluation_criteria", "pairs", "criterion_sources", "requests", "parse_status")}
    page = f"""<!doctype html><html><head><meta charset="utf-8"><title>judgecal URW: {e(summary['study'])}</title>
<style>body{{font-family:system-ui,sans-serif;max-width:70em;margin:2em auto}}td,th{{padding:.3em .8em;
border-bottom:1px solid #ccc;text-align:left}}table{{border-collapse:collapse}}</style></head><body>
<h1>URW study: {e(summary['study'])}</h1>{sim}
<p>Pairwise accuracy (a tie counts 1/2) with 95% bootstrap intervals over pairs, and the relative
improvement over Uniform.</p><table><tr>{th}</tr>{body}</table>
<h2>Coverage check</h2><p>For each α, the rate at which the correct vote's p-value (its URW weight)
is ≤ α on held-out calibration folds. The guarantee: rate ≤ α.</p>
<table><tr><th>α</th><th>rate</th></tr>{cov}</table>
<h2>Run facts</h2><pre>{e(json.dumps(facts, indent=2))}</pre></body></html>
"""
    write_text(page, path)
    return path
