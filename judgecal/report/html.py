"""A short, self-contained HTML report of one PRISM study's results log."""

from __future__ import annotations

import html
import json

from judgecal.report.sections import html_sections, penalty_text
from judgecal.report.table import (agreement_lines, data_lines, fold_assignments, foot_lines, header, result_rows,
                                   screened_line, variant_line)

STYLE = ("body{font-family:system-ui,sans-serif;max-width:60em;margin:2em auto;color:#222}"
         "table{border-collapse:collapse}td,th{padding:.3em .8em;border-bottom:1px solid #ccc;text-align:left}"
         ".sim{background:#fee;padding:.5em;border:1px solid #c00}.foot p{margin:.2em 0;font-size:90%;color:#444}")


def html_table(header, rows) -> str:
    e = html.escape
    head = "".join(f"<th>{e(h)}</th>" for h in header)
    body = "".join("<tr>" + "".join(f"<td>{e(c)}</td>" for c in row) + "</tr>" for row in rows)
    return f"<table><tr>{head}</tr>{body}</table>"


GROUPS_INTRO = """<p>Mean within-group Spearman correlation with the human target, each item predicted by a model
fitted without its group (outer {folds}-fold split by group, {seeds}; penalty chosen by inner grouped CV).
Intervals: studentized bootstrap over groups (95%; the percentile interval where a cell's note says so); the difference to Vanilla is paired by group;
the spread column shows how the gain moves with the fold assignment alone.</p>"""


def render_html(log: dict) -> str:
    from judgecal.report.figures import methods_html  # matplotlib loads only when HTML is drawn

    e = html.escape
    res = log["results"]
    sim = ('<p class="sim">These numbers come from a SIMULATED judge with planted biases; they test the '
           "method, not any real model.</p>") if log.get("simulated_judge") else ""
    gammas = "".join(f"<li>{e(r['method'])} (fold seed {k}): {', '.join(penalty_text(g) for g in seed)}</li>"
                     for r in res["methods"] for k, seed in enumerate(r["gammas"]))
    intro = ("<p>" + e(" ".join(agreement_lines(res))) + "</p>") if res.get("unit") == "items" else GROUPS_INTRO.format(
        folds=res["folds"], seeds=fold_assignments(res.get("fold_seeds", 1)))
    # the table's items and groups: a screened study's exploration groups alone, said so (a user read 70 of 100)
    facts = {"judge": res["judge"], "target": res["target"], "items in the table": res["items"],
             "groups in the table": res["groups"],
             **({"confirmation groups (held out)": c} if (c := (res.get("design") or {}).get("confirmation_groups"))
                else {}),
             **{k: res[k] for k in ("features", "dropped_items", "filled_deltas")}}
    facts |= log["stats"]["responses"]
    # above the table they qualify, not under "Run facts" at the bottom (a user's finding)
    above = [line for line in (variant_line(log), screened_line(res), *data_lines(res)) if line]
    variant = "".join(f'<p class="sim">{e(line)}</p>' for line in above)
    # the rest of the text table's foot under the table (the report had left out some: a user's finding)
    foot = "".join(f"<p>{e(line)}</p>" for line in foot_lines(log) if line not in above)
    return f"""<!doctype html><html><head><meta charset="utf-8"><title>judgecal: {e(log['study'])}</title>
<style>{STYLE}</style></head><body>
<h1>judgecal study: {e(log['study'])}</h1>{sim}{variant}
{intro}
{html_table(header(log), result_rows(log))}
<div class="foot">{foot}</div>
{methods_html(log)}
{html_sections(log)}
<h2>Penalties chosen per outer fold</h2><ul>{gammas}</ul>
<h2>Run facts</h2><pre>{e(json.dumps(facts, indent=2))}</pre>
</body></html>
"""
