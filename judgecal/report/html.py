"""A short, self-contained HTML report of one study's results.json."""

from __future__ import annotations

import html
import json
from pathlib import Path

from judgecal.io import write_text
from judgecal.report.table import HEADER, result_rows

_STYLE = ("body{font-family:system-ui,sans-serif;max-width:60em;margin:2em auto;color:#222}"
          "table{border-collapse:collapse}td,th{padding:.3em .8em;border-bottom:1px solid #ccc;text-align:left}"
          ".sim{background:#fee;padding:.5em;border:1px solid #c00}")


def render_html(summary: dict) -> str:
    e = html.escape
    head = "".join(f"<th>{e(h)}</th>" for h in HEADER)
    body = "".join("<tr>" + "".join(f"<td>{e(c)}</td>" for c in row) + "</tr>" for row in result_rows(summary))
    sim = ('<p class="sim">These numbers come from a SIMULATED judge with planted biases; they test the '
           "method, not any real model.</p>") if summary.get("simulated_judge") else ""
    gammas = "".join(f"<li>{e(r['method'])}: {', '.join(f'{g:.3g}' for g in r['gammas'])}</li>"
                     for r in summary["results"] if r["gammas"])
    facts = {k: summary[k] for k in ("judge", "target", "items", "groups", "attributes", "requests", "parse_status",
                                     "prompt_tokens", "computed_tokens", "dropped_items", "filled_deltas")}
    return f"""<!doctype html><html><head><meta charset="utf-8"><title>judgecal: {e(summary['study'])}</title>
<style>{_STYLE}</style></head><body>
<h1>judgecal study: {e(summary['study'])}</h1>{sim}
<p>Mean within-group Spearman correlation with the human target, each item predicted by a model
fitted without its group (outer 5-fold split by group; penalty chosen by inner grouped CV).
Intervals: percentile bootstrap over groups (95%); the difference to Vanilla is paired by group.</p>
<table><tr>{head}</tr>{body}</table>
<h2>Penalties chosen per outer fold</h2><ul>{gammas}</ul>
<h2>Run facts</h2><pre>{e(json.dumps(facts, indent=2))}</pre>
</body></html>
"""


def write_html(summary: dict, path: Path) -> Path:
    write_text(render_html(summary), path)
    return path
