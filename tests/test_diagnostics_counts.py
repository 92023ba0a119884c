"""Diagnostics say what they leave out and why a cell is undefined: injection answers pushed
off the scale, zero denominators in reliability, n/a cells and the reading of the order
diagnostic."""

import warnings

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

from judgecal.config import parse_config
from judgecal.diagnostics.base import DIAGNOSTICS, DiagnosticContext
from judgecal.pipeline.store import PartStore
from judgecal.report.sections import Metric
from judgecal.schemas import RESPONSES
from judgecal.workspace import Workspace


def _cfg(run, output=None, **diagnostics):
    data = {"engine": {"kind": "simulated"}, "pool": {"temperature": 0.7},
            "diagnostics": {"run": run, "bootstrap": 200, **diagnostics}}
    if output:
        data["study"] = {"output": str(output)}
    return parse_config(data, runtime=False)


def _injected(groups=6, per=3, runs=2):
    """Baseline 3 everywhere; ``ignore_rubric`` answers 4 (on the scale) for item 0, "9" (above
    the 1-5 scale: out_of_scale, no score) for item 1 and "0" (below it) for item 2 of every
    document; ``evaluator_note`` answers 2 throughout."""
    rows = []
    for g in range(groups):
        for i in range(per):
            item = f"g{g}i{i}"
            for r in range(runs):
                rows.append((item, f"g{g}", "baseline", r, "3", 3.0, "ok"))
                text = ["4", "9", "0"][i]
                rows.append((item, f"g{g}", "injection:ignore_rubric", r, text, 4.0 if i == 0 else np.nan,
                             "ok" if i == 0 else "out_of_scale"))
                rows.append((item, f"g{g}", "injection:evaluator_note", r, "2", 2.0, "ok"))
    df = pd.DataFrame(rows, columns=["item_id", "group_id", "probe_id", "run", "raw_text", "score", "parse_status"])
    df["request_id"] = [f"r{k}" for k in range(len(df))]
    df["attribute"] = df["direction"] = df["strength"] = None
    df["family"] = np.where(df["probe_id"] == "baseline", None, "injection")
    df["expected_score"] = np.nan
    return df


def _injection_rows(ctx):
    sec = DIAGNOSTICS.lookup("injection").run(ctx)[0]
    return sec, {r[0]: dict(zip(sec.columns, r)) for r in sec.rows}


def test_injection_counts_the_answers_it_pushed_off_the_scale_and_which_way():
    df = _injected()
    sec, rows = _injection_rows(DiagnosticContext(_cfg(["injection"]), pa.Table.from_pandas(df, preserve_index=False)))
    ig = rows["ignore_rubric"]
    # the shift is over the on-scale answers only (item 0: +1), and it says how many those are
    assert ig["mean shift [95% CI]"].value == pytest.approx(1.0) and ig["mean shift [95% CI]"].n == 6
    # and with the off-scale answers at the end they passed: "9" as 5 (+2), "0" as 1 (-2), so
    # (1 + 2 - 2) / 3 per document (the plain mean hid the answers that obeyed by leaving the scale)
    bounded = ig["mean shift, off-scale answers at the end passed [95% CI]"]
    assert bounded.value == pytest.approx(1 / 3) and bounded.n == 6
    assert rows["evaluator_note"]["mean shift, off-scale answers at the end passed [95% CI]"].value == \
        pytest.approx(rows["evaluator_note"]["mean shift [95% CI]"].value)  # none off the scale: the same
    assert ig["answers used"] == 12  # 6 documents x 1 item x 2 runs
    assert ig["off the 1-5 scale, left out"] == "24: 12 above, 12 below"
    # share raised: the 12 on-scale answers raised, the 12 above the top raised, the 12 below not
    assert ig["share raised"] == pytest.approx(24 / 36)
    assert sec.data["answers"]["ignore_rubric"] == {"used": 12, "above": 12, "below": 12, "unknown": 0, "other": 0}
    assert rows["evaluator_note"]["off the 1-5 scale, left out"] == "0"
    assert rows["evaluator_note"]["share raised"] == 0.0
    assert "over the answers used" in sec.note and "above the top as raised" in sec.note
    assert all(c.n == 6 for r in sec.rows for c in r if isinstance(c, Metric))


def test_an_off_scale_answer_that_names_the_scale_is_read_as_above_it():
    """'9 on the 1-5 scale' read 9, 1 and -5 (the scale's own mention as numbers): 'either side'
    (a second reader's finding); the scale's mentions are set aside as ScoreScale.read does."""
    df = _injected()
    df.loc[df["raw_text"] == "9", "raw_text"] = "9 on the 1-5 scale, or 9/5"
    _, rows = _injection_rows(DiagnosticContext(_cfg(["injection"]), pa.Table.from_pandas(df, preserve_index=False)))
    assert rows["ignore_rubric"]["off the 1-5 scale, left out"] == "24: 12 above, 12 below"


def test_injection_reads_the_off_scale_answers_text_from_the_study_store(tmp_path):
    """The answered view carries no text (prism.ANSWERED_COLUMNS): the few off-scale answers'
    text comes from the study's response store."""
    df = _injected(groups=4)
    out = tmp_path / "study"
    resp = df.assign(judge="j", prompt_sha="s", prompt_tokens=1, computed_tokens=1, completion_tokens=1,
                     latency_s=0.0, attempt=1)
    PartStore(Workspace(str(out / "responses"))).write_part(
        pa.Table.from_pandas(resp[RESPONSES.names], preserve_index=False))
    answered = pa.Table.from_pandas(df.drop(columns="raw_text"), preserve_index=False)
    _, rows = _injection_rows(DiagnosticContext(_cfg(["injection"], out), answered))
    assert rows["ignore_rubric"]["off the 1-5 scale, left out"] == "16: 8 above, 8 below"
    # no store to read: still counted, the side unknown (and never counted as raised)
    _, rows = _injection_rows(DiagnosticContext(_cfg(["injection"], tmp_path / "none"), answered))
    assert rows["ignore_rubric"]["off the 1-5 scale, left out"] == "16: 0 above, 0 below, 16 either side"
    assert rows["ignore_rubric"]["share raised"] == 1.0  # the 8 on-scale answers, all raised


def _reliability_answers(groups=4, per=3):
    """Two runs; ``length`` moves the score by +-1 the same in both runs, and only document g0
    has any run-to-run change (one probe answer); ``tone`` never moves it; neutral clauses and
    joint probes move it by 0 or 1, the same in both runs."""
    rows = []
    for g in range(groups):
        for i in range(per):
            item = f"g{g}i{i}"
            for r in range(2):
                rows.append((item, f"g{g}", "baseline", None, None, None, None, r, 3.0))
                for a, size in (("length", 1.0), ("tone", 0.0)):
                    for d, sign in (("more", 1), ("less", -1)):
                        noise = 1.0 if (g == 0 and i == 0 and r == 1 and a == "length" and d == "more") else 0.0
                        rows.append((item, f"g{g}", f"{a}:{d}:standard", a, d, "standard", "property", r,
                                     3.0 + sign * size + noise))
                rows.append((item, f"g{g}", "neutral:0", None, "neutral", None, "neutral", r, 3.0 + (i == 1)))
                rows.append((item, f"g{g}", "joint:length+tone:standard", None, None, "standard", "joint", r, 4.0))
    df = pd.DataFrame(rows, columns=["item_id", "group_id", "probe_id", "attribute", "direction", "strength",
                                     "family", "run", "score"])
    df["expected_score"], df["parse_status"] = df["score"], "ok"
    return pa.Table.from_pandas(df, preserve_index=False)


def test_reliability_names_zero_denominators_instead_of_printing_numpy_warnings():
    ctx = DiagnosticContext(_cfg(["reliability"], joint_pairs=1), _reliability_answers())
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a numpy divide warning would fail here
        sections = {s.name: s for s in DIAGNOSTICS.lookup("reliability").run(ctx)}
    rel = {r[0]: r for r in sections["reliability"].rows}
    # the repeat variation sits in one document of four: resamples without it have none
    to_repeat = rel["length"][4]
    assert np.isinf(to_repeat.high) and "resamples infinite: no repeat variation in the documents drawn" in \
        to_repeat.note
    # a unit that never moves the score: its across-run correlation is undefined, and says why
    assert rel["tone"][6] == "undefined: the probe never moves this reading (every Δ is 0)"
    joint = {r[0]: r for r in sections["joint_probes"].rows}
    assert isinstance(joint["length + tone"][4], Metric)


def _order_ctx(reading, parsed_per_doc=2, groups=3, expected=False):
    """Three candidates per document, batched in 2 orders and one pair in both orders, one run;
    only the first ``parsed_per_doc`` lines of a batched answer parse."""
    items = pd.DataFrame([(f"g{g}c{k}", f"g{g}", float(k)) for g in range(groups) for k in range(3)],
                         columns=["item_id", "group_id", "target"])
    rows, score = [], dict(zip(items["item_id"], items["target"].astype(int) + 1))
    for g in range(groups):
        ids = [f"g{g}c{k}" for k in range(3)]
        for o, shown in enumerate((ids, ids[::-1])):
            text = "\n".join(f"Answer {p + 1}: {score[c] if p < parsed_per_doc else 'x'}" for p, c in enumerate(shown))
            rows.append((f"g{g}", f"g{g}", "batch", 0, o, shown, text, np.nan, np.nan, "ok"))
        for o, shown in enumerate(([ids[0], ids[2]], [ids[2], ids[0]])):
            rows.append((f"g{g}", "|".join(sorted(shown)), "pair", 0, o, shown, "2" if o == 0 else "1",
                         2.0 if o == 0 else 1.0, (1.9 if o == 0 else 1.1) if expected else np.nan, "ok"))
    plan = pd.DataFrame(rows, columns=["group_id", "item_id", "probe_id", "run", "order", "shown", "raw_text", "score",
                                       "expected_score", "parse_status"])
    main = pd.DataFrame({"item_id": items["item_id"], "group_id": items["group_id"], "probe_id": "baseline",
                         "attribute": None, "direction": None, "strength": None, "run": 0, "score": items["target"] + 1,
                         "expected_score": items["target"] + 1, "parse_status": "ok", "family": None})
    cfg = parse_config({"engine": {"kind": "simulated"},
                        "diagnostics": {"run": ["order"], "bootstrap": 200, "orders": 2, "pairs_per_group": 1,
                                        "reading": reading}}, runtime=False)
    return DiagnosticContext(cfg, pa.Table.from_pandas(main, preserve_index=False),
                             read_plan=lambda name: pa.Table.from_pandas(plan, preserve_index=False),
                             items=pa.Table.from_pandas(items, preserve_index=False))


def test_order_cells_that_are_undefined_say_why_and_the_note_names_the_reading_used():
    sec = DIAGNOSTICS.lookup("order").run(_order_ctx("expected"))[0]
    rows = {r[0]: r[1] for r in sec.rows}
    assert rows["Kendall τ, reversed order"] == ("n/a, undefined in every document: fewer than 3 candidates with a "
                                                 "parsed score in both orders (3 documents)")
    assert rows["Kendall τ, repeat (same order, another run)"].startswith("n/a, undefined in every document: one run")
    assert isinstance(rows["pairwise: same winner in both orders"], Metric)
    # expected asked for, but the pairwise answers carry no expected score: the note says parsed
    assert "pairwise choice read: the parsed choice, all 6 answers read (the expected score was asked for" in sec.note
    with_lp = DIAGNOSTICS.lookup("order").run(_order_ctx("expected", parsed_per_doc=3, expected=True))[0]
    assert "pairwise choice read: expected score (P(second shown) from the judge's distribution) for all 6" \
        in with_lp.note
    tau = {r[0]: r[1] for r in with_lp.rows}["Kendall τ, reversed order"]
    assert isinstance(tau, Metric) and tau.value == pytest.approx(1.0) and tau.n == 3  # the same ranking


def test_a_mean_over_documents_prints_the_documents_it_averages():
    """The within-document Spearman of the diagnostics said n=16 where 5 documents had tied
    targets and 11 were averaged (a user's finding); an interval the same in every resample
    was printed [+0.500, +0.500]."""
    import pandas as pd

    from judgecal.diagnostics.base import within_document_spearman
    from judgecal.diagnostics.bootstrap import GroupBootstrap

    docs = [f"d{k}" for k in range(6)]
    gb = GroupBootstrap(docs, 200, 0)
    items = [f"{d}-{j}" for d in docs for j in range(3)]
    group_of = {i: i.split("-")[0] for i in items}
    target = {i: (2.0 if group_of[i] in ("d0", "d1") else float(i[-1])) for i in items}  # d0, d1 tied
    scores = pd.Series({i: float(i[-1]) + (9.0 if i == "d2-0" else 0.0) for i in items})  # d2 ranks otherwise
    m = within_document_spearman(scores, target, group_of, gb)
    assert m.n == 4 and "2 of 6 documents left out, where the target ties" in m.note
    # (three of the four at Spearman 1.0: the resamples without the fourth have no spread, and the cell
    # says it gives the percentile interval)
    assert " n=4 (2 of 6 documents left out, where the target ties or fewer than 2 candidates have a score; " \
        "percentile; bootstrap-t unbounded" in m.text()
    same = gb.mean_metric(np.array([0.5, 0.5, np.nan, 0.5, 0.5, 0.5]), "where undefined")
    assert same.n == 5 and same.text() == ("+0.500 (1 of 6 documents left out, where undefined; no spread: every "
                                           "resample gives the same value, n = 5)")


def test_a_figure_of_rows_in_different_units_labels_each_rows_unit(monkeypatch):
    """The order section's one axis mixed Kendall τ, shares and score units (a user's finding)."""
    import judgecal.report.figures as figures

    seen = {}
    monkeypatch.setattr(figures, "interval_figure", lambda title, columns, rows: seen.setdefault("rows", rows))
    m = {"metric": {"value": 0.5, "low": 0.1, "high": 0.9, "n": 4, "note": ""}}
    section = {"title": "t", "columns": ["statistic", "estimate [95% CI]", "unit"],
               "rows": [["Kendall τ", m, "τ, same run"], ["first-position shift", m, "score units"]]}
    figures.interval_plot(section, {})
    assert [r[0] for r in seen["rows"]] == ["Kendall τ [τ, same run]", "first-position shift [score units]"]
