"""URW's methods x datasets table (printed and in HTML) and the coverage check, from the results log."""

from __future__ import annotations

import html
import json

from judgecal.report.html import html_table
from judgecal.report.table import grid


def _cell(c: dict) -> str:
    return f"{c['accuracy']:.3f} [{c['low']:.3f}, {c['high']:.3f}] {100 * c['rel_improvement']:+.1f}%"


def urw_rows(log: dict) -> tuple[list[str], list[list[str]]]:
    res = log["results"]
    head = ["method"] + [f"{d} ({res['methods'][0][d]['pairs']} pairs)" for d in res["datasets"]]
    return head, [[r["method"]] + [_cell(r[d]) for d in res["datasets"]] for r in res["methods"]]


def format_urw_table(log: dict) -> str:
    res, facts = log["results"], log["stats"]["responses"]
    head, rows = urw_rows(log)
    cov = grid([["alpha", "P(correct vote weight <= alpha)", "held-out calibration criteria"],
                *[[f"{c['alpha']:.2f}", f"{c['rate']:.3f}", str(c["n"])] for c in res["coverage"]]])
    verifier = res["verifier"] + ("  (SIMULATED verifier)" if log.get("simulated_judge") else "")
    foot = [
        "cells: pairwise accuracy (tie = 1/2) [95% bootstrap CI over pairs], relative improvement over Uniform",
        f"verifier: {verifier}; templates {res['templates']} (set {res['template_version']})",
        f"calibration: {res['calibration_criteria']} labelled criteria; evaluation: {res['pairs']} pairs, "
        f"{res['evaluation_criteria']} criteria {res['criterion_sources']}",
        f"requests: {facts['requests']:,}  parse: {facts['parse_status']}  prompt tokens: "
        f"{facts['prompt_tokens']:,} ({facts['computed_tokens']:,} computed)",
    ]
    if "total" in log["stats"]["timing"]:
        foot.append(f"time: {log['stats']['timing']['total']:.0f}s total")
    return "\n".join(grid([head, *rows]) + [""] + foot + ["", "coverage check (5-fold on the calibration set):"] + cov)


def render_urw_html(log: dict) -> str:
    e = html.escape
    res = log["results"]
    head, rows = urw_rows(log)
    cov = html_table(["α", "rate", "n"], [[f"{c['alpha']:.2f}", f"{c['rate']:.3f}", str(c["n"])]
                                          for c in res["coverage"]])
    sim = '<p style="color:#c00">SIMULATED verifier: these numbers test the method only.</p>' \
        if log.get("simulated_judge") else ""
    facts = {k: res[k] for k in ("verifier", "templates", "template_version", "calibration_criteria",
                                 "evaluation_criteria", "pairs", "criterion_sources")}
    facts |= log["stats"]["responses"]
    return f"""<!doctype html><html><head><meta charset="utf-8"><title>judgecal URW: {e(log['study'])}</title>
<style>body{{font-family:system-ui,sans-serif;max-width:70em;margin:2em auto}}td,th{{padding:.3em .8em;
border-bottom:1px solid #ccc;text-align:left}}table{{border-collapse:collapse}}</style></head><body>
<h1>URW study: {e(log['study'])}</h1>{sim}
<p>Pairwise accuracy (a tie counts 1/2) with 95% bootstrap intervals over pairs, and the relative
improvement over Uniform.</p>{html_table(head, rows)}
<h2>Coverage check</h2><p>For each α, the rate at which the correct vote's p-value (its URW weight)
is ≤ α on held-out calibration folds. The guarantee: rate ≤ α.</p>
{cov}
<h2>Run facts</h2><pre>{e(json.dumps(facts, indent=2))}</pre></body></html>
"""
