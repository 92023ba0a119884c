"""PRISM's results table as text (the CLI) and as rows (the HTML report), from the results log."""

from __future__ import annotations

import math

from judgecal.report.sections import simulated_mark

HEADER = ("method", "Spearman [95% CI]", "diff vs Vanilla [95% CI]", "diff by fold seed: mean (sd) [range]",
          "Kendall", "groups (+tied)", "gamma on grid top, bottom")


def header(log: dict) -> tuple[str, ...]:
    """The table's columns; n counts items when every group has one item."""
    if log["results"].get("unit") == "items":
        return tuple("items" if c == "groups (+tied)" else c for c in HEADER)
    return HEADER


def fold_assignments(n: int) -> str:
    """How the cross-fitting was repeated ("repeated over 1 shuffled fold assignments" read wrong)."""
    return f"repeated over {n} shuffled fold assignments" if n != 1 else "one shuffled fold assignment"


def agreement_lines(res: dict) -> list[str]:
    """What the Spearman column is and what its intervals resample."""
    seeds = fold_assignments(res.get("fold_seeds", 1))
    if res.get("unit") == "items":
        return [f"target: {res['target']}; {res['items']} items, one per group: held-out Spearman over all items "
                f"(nothing to rank within a group of one): {res['folds']}-fold cross-fitting by item, {seeds} (the "
                "mean of their correlations)" + _sampling(res),
                "intervals: 95% Fisher z with the Bonett-Wright standard error (Spearman); differences: paired "
                "bootstrap over items, percentile; n: items; a constant prediction scores 0"]
    return [f"target: {res['target']}; {res['items']} items in {res['groups']} groups; held-out mean within-group "
            f"Spearman: {res['folds']}-fold cross-fitting by group, {seeds} (each group's correlation averaged over "
            "them)" + _sampling(res),
            "intervals: 95% studentized bootstrap over groups (percentile where a cell's note says so); n: groups "
            "averaged by every row (+ groups left out because the human target ties throughout); a constant "
            "prediction scores 0"]


def _ci(est, lo, hi, n=None, note="") -> str:
    if est is None or (isinstance(est, float) and math.isnan(est)):
        return "n/a"
    bounded = lo is not None and not math.isnan(lo)
    if note and not bounded:
        return f"{est:+.3f} ({note})"
    size = f" n={n}" if n is not None else ""
    if not bounded:
        return f"{est:+.3f}{size}"
    return f"{est:+.3f} [{lo:+.3f}, {hi:+.3f}]{size}" + (f" ({note})" if note else "")  # note: a percentile fallback


def _spread(r: dict, prefix: str, seeds: int | None = None) -> str:
    if f"{prefix}_seed_mean" not in r:
        return "-"
    if seeds == 1:  # one assignment shows no spread; "the same for every one" claimed it did (a user's finding)
        return f"{r[prefix + '_seed_mean']:+.3f} (one fold assignment: fold_seeds = 1)"
    if r[prefix + "_seed_max"] - r[prefix + "_seed_min"] <= 1e-12:  # an unfitted baseline: no fold to move it
        return f"{r[prefix + '_seed_mean']:+.3f} (the same for every fold assignment)"
    return (f"{r[prefix + '_seed_mean']:+.3f} ({r[prefix + '_seed_sd']:.3f}) "
            f"[{r[prefix + '_seed_min']:+.3f}, {r[prefix + '_seed_max']:+.3f}]")


def _edges(r: dict) -> str:
    e = r.get("gamma_edges") or {}
    if not e.get("fits"):
        return "-"
    if e.get("one_value"):  # "0, 0 of 10" read as no fit on an edge of a grid of one value (a user's finding)
        return f"a grid of one value ({e['fits']} fits)"
    return f"{e['top']}, {e['bottom']} of {e['fits']}"


def result_rows(log: dict) -> list[tuple[str, ...]]:
    rows = []
    for r in log["results"]["methods"]:
        n = r["groups"]
        diff = _ci(r["diff"], r["diff_low"], r["diff_high"], n, r.get("diff_note", "")) if "diff" in r else "-"
        rows.append((r["method"], _ci(r["spearman"], r["spearman_low"], r["spearman_high"], n,
                                      r.get("spearman_note", "")),
                     diff, _spread(r, "diff", log["results"].get("fold_seeds")), f"{r['kendall']:+.3f}",
                     str(n) if r.get("unit") == "items" else f"{n} (+{r['groups_left_out']})", _edges(r)))
    return rows


def grid(rows: list[tuple[str, ...]] | list[list[str]]) -> list[str]:
    """Left-aligned columns with a rule under the header row."""
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths)) for r in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return lines


def cost_lines(log: dict) -> list[str]:
    """The judge's cost, when its engine config sets prices (http): the answers behind the
    table, and what the log's collects sent (new requests only)."""
    eng = log.get("spec", {}).get("config", {}).get("engine", {})
    batch = "batch_" if eng.get("batch_price_per_million_prompt_tokens") or eng.get(
        "batch_price_per_million_completion_tokens") else ""  # openai-batch: the batch price
    pp = eng.get(f"{batch}price_per_million_prompt_tokens") or 0.0
    pc = eng.get(f"{batch}price_per_million_completion_tokens") or 0.0
    if not (pp or pc):
        return []
    facts = log["stats"]["responses"]
    sent = sum(s.get("cost_usd", 0.0) for s in log["stats"].get("collect", {}).values())
    return [(f"cost: ${facts.get('cost_usd', 0.0):,.4f} for these answers ({facts['prompt_tokens']:,} prompt + "
             f"{facts.get('completion_tokens', 0):,} completion tokens at ${pp:g} / ${pc:g} per million"
             f"{', the batch price' if batch else ''}); "
             f"new requests of the collect(s) recorded here: ${sent:,.4f}")]


def variant_line(log: dict) -> str:
    """The settings this log was evaluated with that are not the collected config's
    (``evaluate --set``): a report of a variant said nothing of it (a user's finding)."""
    return changed_text(log.get("spec", {}).get("not_as_collected"), "evaluated")


def changed_text(changed: dict | None, done: str, against: str = "the study's collect",
                 was: str = "collected") -> str:
    """``field = now (collected with old)``, for settings_changed's dict; "" when none."""
    if not changed:
        return ""
    from judgecal.config import toml_value

    def value(v):  # a field the collected config left unset: not JSON's null (a user's finding)
        return "unset (the default)" if v is None else toml_value(v)

    return f"{done} with settings other than {against}: " + ", ".join(
        f"{k} = {value(new)} ({was} with {value(old)})" for k, (old, new) in changed.items())


def _sampling(res: dict) -> str:
    """What the scores averaged, when it is not one greedy answer per probe (a diagnostic's
    repeats are runs, and every run is averaged into the features), and which reading they
    are: an expected score that no run changed is said to be one (logs before the reading was
    recorded: the runs only)."""
    runs, t = res.get("runs", 1), res.get("temperature", 0.0)
    rd = res.get("reading")
    # asked for the expected score, and no answer had a distribution: the table's one Vanilla
    # row is the parsed score, which nothing said (a user's finding: a batch judge without logprobs)
    none = "; each score the parsed one: no answer gave a score distribution, so there is no expected score" \
        if rd and rd["score_field"] == "expected" and rd["expected_share"] == 0 else ""
    if runs == 1 and not t:
        return none
    sampled = f"{runs} run{'s' * (runs > 1)}" + (f" sampled at temperature {t:g}" if t else "")
    if not rd or rd["score_field"] != "expected" or rd["expected_share"] == 0:
        return none + (f"; each score the mean of {sampled}" if runs > 1 else f"; each score {sampled}")
    share = rd["expected_share"]
    what = "; each score the judge's expected score over the scale" + (
        f" ({share:.1%} of them; the parsed score where the judge gave none)" if share < 1 else "")
    if not rd["cells_with_runs"]:  # one run: nothing to compare
        return f"{what} ({sampled})"
    if rd["cells_runs_differ"] == 0:
        return (f"{what}: the same in all {sampled}, in each of the {rd['cells_with_runs']:,} item x probe "
                "cells, so the runs add nothing to it" + ("; [fit] score_field = \"parsed\" averages the sampled "
                                                          "scores instead" if t else ""))
    return (f"{what}, the mean of {sampled} (they differed in {rd['cells_runs_differ']:,} of "
            f"{rd['cells_with_runs']:,} item x probe cells)")


def missing_line(res: dict, key: str = "missing_scores") -> str:
    """The missing-score policy the fit applied and what it met (results logs before it: none)."""
    m = res.get(key)
    if not m:
        return ""
    why = f" ({', '.join(f'{k} {v}' for k, v in m['by_status'].items())})" if m["by_status"] else ""
    prism = f"; {m['items_left_out']} items left out, {m['deltas_filled']} probe deltas set to 0" \
        if "items_left_out" in m else ""
    section, _, field = m.get("setting", "[fit].max_missing").partition(".")
    kept = m.get("expected_kept") or {}
    n = sum(kept.values())
    kept = (f"; {n:,} answer{'s' * (n != 1)} whose text gave no score on the scale "
            f"({', '.join(f'{k} {v}' for k, v in kept.items())}) "
            + ("keeps the expected score of its" if n == 1 else "keep the expected score of their")
            + " distribution") if kept else ""
    return (f"missing scores: {m['without_score']:,} of {m['requests']:,} requests have no usable score{why}{kept}; "
            f"policy {m['policy']}: {m['rule']}{prism}; refused above {m['max_missing']:.0%} "
            f"({section} {'missing, ' if section == '[fit]' else ''}{field})")


def data_lines(res: dict) -> list[str]:
    """The data's layout warnings of the collected items (:mod:`judgecal.datasets.layout`): said
    once at collect, they were lost by the table and the report (a user's finding)."""
    return [f"data warning: {w}" for w in res.get("data_warnings", [])]


def ties_line(res: dict) -> str:
    """Items Vanilla ties within their group (results logs before it: no line)."""
    tied = res.get("vanilla_ties")
    if not tied:
        return ""
    penalty = any(sec.get("name") == "penalty" for sec in res.get("sections", []))
    if (one := res.get("vanilla_one_value")) is not None:
        return (f"Vanilla ties: every one of the {tied} items scores {one:g}: the judge ranks none of them, so a "
                "difference from Vanilla is any ordering at all (a judge pinned at its scale's end? check its answers)")
    where = "of the items" if res.get("unit") == "items" else "in their group"
    return (f"Vanilla ties: {tied} of {res.get('vanilla_ties_of', res['items'])} items score the same as another "
            f"{where}; Vanilla "
            "cannot order them and any correction can, so part of a difference from Vanilla may be that ordering"
            + (" (the penalty section's strongest penalty shows how much)" if penalty else ""))


def scale_line(res: dict) -> str:
    """The judge's scale against the target's, when they differ."""
    m = res.get("scale_mapping")
    return f"scales: judge {m['judge']}, target {m['target']}: {m['vanilla']}; {m['prism']}" if m else ""


def computed_tokens(facts: dict, rest: str = ", rest reused prefix") -> str:
    """How many prompt tokens the judge computed, where its engine measures what a prefix cache
    served (ray.data.llm's vLLM rows do not say: a vLLM stranger read "0 reused")."""
    if facts.get("tokens_are_words"):  # a user budgeted a real judge on them, against show's estimate
        return "words of the user messages: the SIMULATED judge has no tokenizer"
    if not facts.get("prefix_reuse_measured", True):
        return "prefix-cache reuse not measured by this engine"
    return f"{facts['computed_tokens']:,} computed{rest}"


def format_table(log: dict) -> str:
    from judgecal.report.sections import format_sections

    return "\n".join(simulated_banner(log) + grid([header(log), *result_rows(log)]) + [""] + foot_lines(log)
                     + format_sections(log))


def rows_line(res: dict) -> str:
    """What each row of the table is (G-Eval, SAJA and alpha-PRISM were named nowhere in the
    report: a user's finding), as this log read the judge's scores."""
    rd = res.get("reading") or {}
    expected = rd.get("score_field", "expected") == "expected" and rd.get("expected_share", 1) > 0
    reading = "expected over its scale's tokens" if expected else "one value per answer"
    terms = {"Vanilla": f"the judge's score, uncorrected ({reading})",
             # the engines that read a distribution (llamacpp, vLLM) give its most likely value, which may
             # differ from the number written ("10" read as 1 on 1-10, status constrained): a user's finding
             "Vanilla (parsed score)": "one value per answer, the PRISM paper's Vanilla (the number an API judge "
                                       "wrote; a judge read from its distribution, its most likely value)",
             "Vanilla (expected score)": "the judge's probability-weighted score over its scale (where it gave "
                                         "none: its group's mean, else 0)",
             "G-Eval": f"the judge's score per rubric criterion ({reading}), averaged",
             "SAJA (rubric ridge)": "a ridge fit on the rubric criteria's scores",
             "PRISM": "Vanilla minus a ridge correction fitted on the probes' score changes",
             "alpha-PRISM": "PRISM with Vanilla's weight fitted too",
             "PRISM (all units, unscreened)": "PRISM on every unit of the design, before screening"}
    shown = [r["method"] for r in res["methods"] if r["method"] in terms]
    return "rows: " + "; ".join(f"{m}: {terms[m]}" for m in shown) if shown else ""


def foot_lines(log: dict) -> list[str]:
    """What the table's numbers are (the text table's foot, and the HTML report's under its
    table: the report had left out the screening and sampling lines, a user's finding)."""
    res, facts = log["results"], log["stats"]["responses"]
    judge = res["judge"] + (" " + simulated_mark(log) if log.get("simulated_judge") else "")
    foot = [
        f"judge: {judge}",
        *agreement_lines(res),
        *filter(None, [rows_line(res)]),
        "gamma on grid top, bottom: outer-fold fits whose penalty sat on the grid's top edge (the strongest "
        "penalty, next to no correction) or its bottom edge (a grid of one value has neither)",
        f"requests: {facts['requests']:,}  parse: {facts['parse_status']}  "
        f"prompt tokens: {facts['prompt_tokens']:,} ({computed_tokens(facts)})",
        *cost_lines(log),
        *filter(None, [res.get("sample"), scale_line(res), missing_line(res), ties_line(res), variant_line(log)]),
        *data_lines(res),
    ]
    foot.extend(filter(None, [screened_line(res)]))
    foot.extend(filter(None, [time_line(log, "the diagnostics' included")]))
    return foot


def time_line(log: dict, other_sets: str = "") -> str:
    """The run's time, and what its collect asked and reused ("" for a log of a standalone
    evaluate). ``other_sets``: what the request sets beyond the first are, said where there are
    several (beside 'requests:', which counts the first alone: a user's finding)."""
    timing = log["stats"]["timing"]
    if "total" not in timing:
        return ""
    sets = log["stats"].get("collect") or {}
    new = sum(s.get("computed", 0) for s in sets.values())
    over = f" over its {len(sets)} request sets" + (f", {other_sets}" if other_sets else "") if len(sets) > 1 else ""
    earlier = sum(s.get("already_done", 0) for s in sets.values())
    # a rerun's "1s total" read as the study's cost (a user's finding): the answers it reused are said
    return (f"time: {timing['total']:.0f}s total, {timing.get('collect', 0):.0f}s collecting ({new:,} new requests{over}"
            + (f"; {earlier:,} answered by an earlier collect, whose time is not counted" if earlier else "") + ")")


def screened_line(res: dict) -> str:
    """A screened study's table is fitted on the groups screening read: it leans optimistic."""
    design = res.get("design", {})
    if not design.get("screened"):
        return ""
    rep = res.get("representation", "paired")
    # probe columns, whatever the representation made of them ("16 columns" for half too: a user's finding)
    return (f"screened: the fitted rows use the {len(design['fitted'])} probe columns screening kept "
            f"({rep} representation built from them) on these same "
            f"{design['exploration_groups']} exploration groups, so they lean optimistic; the confirmation "
            "table below is the held-out one")


def simulated_banner(log: dict) -> list[str]:
    """A simulated judge's table says so above its first row too (a table copied without its
    foot said nothing: a user's finding)."""
    mark = simulated_mark(log).strip(" ()")
    return [f"{mark}: these numbers test the method, not any real model"] if mark else []
