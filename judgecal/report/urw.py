"""URW's datasets x methods table (printed and in HTML), the coverage check and the weight
separation (Remark B.3), from the results log."""

from __future__ import annotations

import html
import json
import math

from judgecal.report.html import html_table
from judgecal.report.sections import format_sections, html_sections
from judgecal.report.table import (computed_tokens, cost_lines, grid, missing_line, simulated_banner, time_line,
                                   variant_line)
from judgecal.rubrics.data import opposite_label_lines
from judgecal.rubrics.votes import one_label_lines

HEADER = ["dataset", "method", "pairs", "prompts", "accuracy [95% CI]", "diff vs Uniform [95% CI]",
          "RI vs Uniform [95% CI]"]
INTERVALS = ("95% studentized (bootstrap-t) cluster bootstrap over prompts (the percentile interval where a "
             "cell's note says so; pairs that share a prompt are "
             "resampled together; pairs and prompts beside each row);\n  RI = (acc - acc_Uniform) / acc_Uniform, "
             "bootstrap-t with the delta-method SE of that ratio, over the same prompt resampling")


def _iv(c: dict, key: str, fmt) -> str:
    """``est [low, high]``, ``est (note)`` for a degenerate interval, or ``est [low, high] (note)``
    when the bounds are not the bootstrap-t's (a percentile fallback)."""
    est, note, low = c[key], c.get(f"{key}_note", ""), c.get(f"{key}_low")
    if est is None or math.isnan(est):
        return f"n/a ({note})" if note else "n/a"
    if note and (low is None or math.isnan(low)):
        return f"{fmt(est)} ({note})"
    return f"{fmt(est)} [{fmt(low)}, {fmt(c[key + '_high'])}]" + (f" ({note})" if note else "")


def _row(dataset: str, method: str, c: dict) -> list[str]:
    ref = method == "Uniform"
    return [dataset, method, str(c["pairs"]), str(c["prompts"]), _iv(c, "accuracy", lambda x: f"{x:.3f}"),
            "(reference)" if ref else _iv(c, "diff", lambda x: f"{x:+.3f}"),
            "(reference)" if ref else _iv(c, "rel_improvement", lambda x: f"{100 * x:+.1f}%")]


def urw_rows(log: dict) -> tuple[list[str], list[list[str]]]:
    res = log["results"]
    return HEADER, [_row(d, r["method"], r[d]) for d in res["datasets"] for r in res["methods"]]


def _of(dropped: dict) -> str:
    """``40 `` of ``3 of 40 evaluation responses`` (logs before the count: ``the``)."""
    n = dropped.get("evaluation_responses")
    return f"{n:,} " if n is not None else "the "


# the ablations, named by a dagger the table does not explain (a user's finding)
ABLATIONS = {"URW†": "URW's template votes with uniform weights (ablation: URW without its weights)",
             "URW‡": "the base template's one vote weighted by its p-value under a two-template score (ablation)"}


# what each row is, for a reader who does not know the methods (a user's finding: SCP, Mondrian-SCP
# and URW itself were named nowhere in the report)
BASELINES = {"Uniform": "the base template's one vote per criterion, weights 1/K",
             "Beta-Binomial": "weights (k + 1)/(N + 2), k of a criterion's N parsed template answers agreeing "
                              "with its vote",
             "Sampling Ensemble": "the base template's sampled answers ([urw] sample_temperature), weight the share "
                                  "agreeing with their majority",
             "SCP": "split-conformal prediction at level alpha, weight 1 where one label remains, else abstaining",
             "Mondrian-SCP": "SCP within bins of criterion length",
             "URW": "uncertainty-aware rubric weighting: each vote weighted by its split-conformal p-value"}


def data_warning_lines(res: dict) -> list[str]:
    """The log's warnings of its data: pairs repeated (with the opposite or the same label) and
    fit's of calibration labels of one value (from the log's counts)."""
    counts = res.get("calibration_labels") or {}
    labels = one_label_lines(counts.get("met", 0), counts.get("not met", 0)) if counts else []
    return [*opposite_label_lines(res.get("opposite_label_pairs") or {}, res.get("repeated_pairs")),
            *(f"warning: {line}" for line in labels)]


def method_lines(res: dict) -> list[str]:
    shown = [m for m in BASELINES if any(r["method"] == m for r in res["methods"])]
    ablations = [m for m in ABLATIONS if any(r["method"] == m for r in res["methods"])]
    return ((["; ".join(f"{m}: {BASELINES[m]}" for m in shown)] if shown else [])
            + (["; ".join(f"{m}: {ABLATIONS[m]}" for m in ablations)] if ablations else []))


def dropped_lines(res: dict) -> list[str]:
    """Per method, the criteria dropped for want of a usable vote (never made into a vote)."""
    out = []
    for r in res["methods"]:
        d = r.get("dropped") or {}
        # the dropped counts alone: the responses' count beside them made every method list its zeros
        if any(d.get(k) for k in ("evaluation_criteria", "calibration_criteria", "unscored_responses")):
            out.append(f"  {r['method']}: {d['evaluation_criteria']} evaluation, {d['calibration_criteria']} "
                       f"calibration criteria; {d['unscored_responses']} response(s) left with none (pairs tie)")
    abstained = [f"  {r['method']}: {n} of {_of(r['dropped'])}evaluation responses (each scored by the uniform mean "
                 "of its votes)" for r in res["methods"] if (n := (r.get("dropped") or {}).get("abstained_responses"))]
    return (["criteria with no usable vote (dropped, never made into a vote):" + ("" if out else " none")] + out
            + (["responses on which the method abstained on every criterion:", *abstained] if abstained else []))


def coverage_folds(cov: dict) -> str:
    """What the coverage folds held out: by prompt (a log without ``prompts``, from before,
    held out by response and says so)."""
    if "prompts" not in cov:
        return f"folds by response: {cov['criteria']} criteria of {cov['responses']} responses"
    of = f"{cov['responses']} responses to " if "responses" in cov else ""
    return f"folds by prompt: {cov['criteria']} criteria of {of}{cov['prompts']} prompts"


def coverage_scope(cov: dict) -> str:
    """What one fold keeps together, for the HTML report's sentence."""
    if "prompts" not in cov:
        return "all criteria of a response in one fold"
    return ("all criteria of a prompt, over all its responses, in one fold: a prompt's criteria are shared "
            "word for word by its responses, so no held-out criterion's text is in the calibration folds")


def coverage_lines(cov: dict) -> list[str]:
    """Both coverage events and Remark B.3's weight separation, with the folds actually used."""
    head = f"coverage check ({cov['folds']}-fold on the calibration set, {coverage_folds(cov)}):"
    if not cov["rows"]:
        return [head, f"  {cov['note']}"]
    rows = grid([["alpha", "(a) Theorem 3.1: P(vote correct and its weight <= alpha)",
                  "(b) validity: P(true label's p-value <= alpha)"],
                 *[[f"{c['alpha']:.2f}", f"{c['theorem']:.3f}", f"{c['validity']:.3f}"] for c in cov["rows"]]])
    w = cov["weights"]
    sep = grid([["votes", "n", "mean raw weight"],
                *[[k, str(w[k]["n"]), f"{w[k]['mean_weight']:.3f}" if w[k]["n"] else "n/a (no such vote)"]
                  for k in ("correct", "wrong")]])  # a mean over no votes printed nan (a user's finding)
    auroc = auroc_text(w)
    return ([head, "both should be <= alpha; (a) <= (b) always", *rows, "",
             "weight separation on the same held-out folds (Remark B.3):", *sep,
             f"AUROC of the raw weight for a correct vote: {auroc}"])


def auroc_text(w: dict) -> str:
    """The weight separation's AUROC with what qualifies it (logs before the caveat: none)."""
    if w.get("note"):
        return f"n/a ({w['note']})"
    return f"{w['auroc']:.3f}" + (f" ({w['caveat']})" if w.get("caveat") else "")


def format_urw_table(log: dict) -> str:
    head, rows = urw_rows(log)
    return "\n".join(simulated_banner(log) + grid([head, *rows]) + [""] + urw_foot_lines(log) + [""]
                     + coverage_lines(log["results"]["coverage"]) + format_sections(log))


def urw_foot_lines(log: dict) -> list[str]:
    """What the table's numbers are: the text table's foot and the HTML report's alike."""
    res, facts = log["results"], log["stats"]["responses"]
    verifier = res["verifier"] + ("  (SIMULATED verifier)" if log.get("simulated_judge") else "")
    foot = [
        "accuracy: pairwise (tie = 1/2); a pair whose response has no usable criterion for the method ties",
        *method_lines(res),
        f"intervals: {INTERVALS}; {res.get('bootstrap_resamples', '?')} resamples",
        *dropped_lines(res),
        f"verifier: {verifier}; templates {res['templates']} (set {res['template_version']})",
        f"calibration: {res['calibration_criteria']} labelled criteria"
        + (" (" + ", ".join(f"{n} {k}" for k, n in res["calibration_labels"].items()) + ")"
           if res.get("calibration_labels") else "")
        + (f" of {res['calibration_sample']}" if res.get("calibration_sample") else "")
        + f"; evaluation: {res['pairs']} pairs"
        + (f" ({res['pair_sample']})" if res.get("pair_sample") else "")
        + f", {res['evaluation_criteria']} criteria {res['criterion_sources']}",
        *data_warning_lines(res),
        *filter(None, [missing_line(res, "missing_verdicts"), variant_line(log)]),
        f"requests: {facts['requests']:,}  parse: {facts['parse_status']}  prompt tokens: "
        f"{facts['prompt_tokens']:,} ({computed_tokens(facts, '')})",
        *cost_lines(log),
    ]
    foot.extend(filter(None, [time_line(log, "the criteria generation's included")]))
    return foot


def render_urw_html(log: dict) -> str:
    from judgecal.report.figures import coverage_html, methods_html  # matplotlib loads only when HTML is drawn

    e = html.escape
    res = log["results"]
    head, rows = urw_rows(log)
    cov = "\n".join(coverage_lines(res["coverage"]))
    # said above the table (warnings in bold), then not again in its foot, which holds every other line
    bold = data_warning_lines(res)
    plain, variant = missing_line(res, "missing_verdicts"), variant_line(log)
    above = [*bold, plain, variant]
    foot = "\n".join(x for x in urw_foot_lines(log) if x not in above)
    sim = ('<p style="background:#fee;padding:.5em;border:1px solid #c00">These numbers come from a SIMULATED '
           "verifier; they test the method, not any real model.</p>") if log.get("simulated_judge") else ""
    facts = {k: res[k] for k in ("verifier", "templates", "template_version", "calibration_criteria",
                                 "calibration_sample", "evaluation_criteria", "pairs", "pair_sample",
                                 "opposite_label_pairs", "repeated_pairs", "criterion_sources")
             if k in res}
    facts |= log["stats"]["responses"]
    warnings = "".join(f"<p><b>{e(w)}</b></p>" for w in bold) + (f"<p>{e(plain)}</p>" if plain else "") + (
        f"<p><b>{e(variant)}</b></p>" if variant else "")
    return f"""<!doctype html><html><head><meta charset="utf-8"><title>judgecal URW: {e(log['study'])}</title>
<style>body{{font-family:system-ui,sans-serif;max-width:70em;margin:2em auto}}td,th{{padding:.3em .8em;
border-bottom:1px solid #ccc;text-align:left}}table{{border-collapse:collapse}}pre{{white-space:pre-wrap}}</style>
</head><body>
<h1>URW study: {e(log['study'])}</h1>{sim}
<p>Pairwise accuracy (a tie counts 1/2), its difference from Uniform and the relative improvement (RI)
over Uniform. Intervals: {e(INTERVALS)}.</p>{html_table(head, rows)}
{methods_html(log)}
{warnings}<pre>{e(foot)}</pre>
<h2>Coverage check</h2><p>On held-out calibration folds ({e(coverage_scope(res['coverage']))}):
(a) the event URW's guarantee bounds (the URW paper's Theorem 3.1), the vote is correct and its raw URW
weight (the voted label's p-value) is ≤ α;
(b) p-value validity, the true label's p-value is ≤ α. Both should be ≤ α. Then (the paper's Remark B.3) the mean
raw weight of correct and of wrong votes, and the AUROC of the weight for correctness.</p>
<pre>{e(cov)}</pre>
{coverage_html(log)}
{html_sections(log)}
<h2>Run facts</h2><pre>{e(json.dumps(facts, indent=2))}</pre></body></html>
"""
