"""Judge output hygiene: every answer without a usable score says why (its parse status), the
results log counts each reason, and the missing-score policy ([fit] missing, max_missing) is
applied by the fit and stated by the report. The end-to-end test runs a PRISM study against a
real local chat-completions server whose answers include refusals, several numbers, empty and
undecodable text."""

import itertools
import json
import threading
import zlib
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from judgecal.calibrate.features import build_features
from judgecal.engines.base import parsed_output
from judgecal.errors import InputError
from judgecal.scale import ScoreScale

from conftest import chat_completion, send_json, write_config


@pytest.mark.parametrize("text,scale,want", [
    ("4", "1-5", (4.0, "ok")),
    ("Score: 4/5", "1-5", (4.0, "ok")),
    ("I'd say 4 out of 5.", "1-5", (4.0, "ok")),
    ("On a 1-5 scale I give it 3.", "1-5", (3.0, "ok")),
    ("Rating: 4. Final answer: 4", "1-5", (4.0, "ok")),
    ("85/100", "0-100", (85.0, "ok")),
    ("3 or maybe 4", "1-5", (None, "several_numbers")),
    ("7", "1-5", (None, "out_of_scale")),
    ("I'm sorry, but I cannot rate this summary.", "1-5", (None, "refusal")),
    ("As an AI, I am unable to evaluate that.", "1-10", (None, "refusal")),
    ("", "1-5", (None, "empty")),
    ("  \n", "1-5", (None, "empty")),
    ("\ufffd\ufffd", "1-5", (None, "non_utf8")),
    ("good summary", "1-5", (None, "unparsed")),
])
def test_each_answer_without_a_score_says_why(text, scale, want):
    assert ScoreScale.parse(scale).read(text) == want


def test_a_lone_surrogate_becomes_a_replacement_character_that_parquet_can_store():
    o = parsed_output("\udc80\udc81", ScoreScale())
    assert (o.score, o.parse_status) == (None, "non_utf8")
    pq.write_table(pa.table({"raw_text": [o.raw_text]}), pa.BufferOutputStream())  # no UnicodeEncodeError


def _answered(statuses: dict[str, list[str]]):
    """An answered plan: item -> [baseline status, probe status]; usable answers score 3 and 4."""
    rows = []
    for item, (s0, s1) in statuses.items():
        for probe, status, score in (("baseline", s0, 3.0), ("length:more", s1, 4.0)):
            usable = status == "ok"
            rows.append({"item_id": item, "probe_id": probe, "attribute": None if probe == "baseline" else "length",
                         "direction": None if probe == "baseline" else "more", "strength": "standard",
                         "score": score if usable else None, "expected_score": None, "parse_status": status})
    items = pa.table({"item_id": list(statuses), "group_id": ["g1", "g1", "g2", "g2"][: len(statuses)],
                      "target": [1.0, 2.0, 3.0, 4.0][: len(statuses)]})
    return pa.Table.from_pylist(rows), items


def test_the_missing_score_policy_is_applied_counted_and_refused_above_its_threshold():
    ans, items = _answered({"a": ["ok", "ok"], "b": ["refusal", "ok"], "c": ["ok", "several_numbers"],
                            "d": ["ok", "ok"]})
    imputed = build_features(ans, items, "expected", "impute", 0.5)
    assert list(imputed.frame.index) == ["a", "c", "d"] and imputed.frame.loc["c", "length:more"] == 0.0
    m = imputed.missing
    assert (m["policy"], m["requests"], m["without_score"], m["by_status"]) == (
        "impute", 8, 2, {"refusal": 1, "several_numbers": 1})
    assert (m["items_left_out"], m["deltas_filled"]) == (1, 1)
    dropped = build_features(ans, items, "expected", "drop", 0.5)
    assert list(dropped.frame.index) == ["a", "d"] and dropped.missing["items_left_out"] == 2
    assert dropped.missing["deltas_filled"] == 0
    with pytest.raises(InputError) as e:
        build_features(ans, items, "expected", "impute", 0.2)  # 2 of 8 = 25%
    assert "2 of 8 judge answers (25.0%)" in str(e.value) and "refusal 1, several_numbers 1" in str(e.value)
    assert "max_missing = 0.2" in str(e.value) and "\n" not in str(e.value)


@pytest.mark.parametrize("field,value,says", [
    ("missing", '"median"', "unknown policy 'median'"),
    ("max_missing", "1.5", "must lie in [0, 1]"),
    ("max_missing", "nan", "must lie in [0, 1]"),
])
def test_a_missing_score_policy_that_does_not_exist_is_one_line(tmp_path, field, value, says):
    from judgecal.config import load_config

    path = write_config(tmp_path / "c.toml", f"[engine]\nkind = \"simulated\"\n[fit]\n{field} = {value}\n")
    with pytest.raises(InputError) as e:
        load_config(str(path))
    assert says in str(e.value) and f"[fit].{field}" in str(e.value)


# -- end to end: a study against a judge that answers badly now and then ----------------------
ANSWERS = {0: "I'm sorry, I cannot rate this.", 1: "3 or maybe 4", 2: "", 3: "\udc80\udc81", 4: "7"}


class UnevenJudge:
    """Answers by arrival: a tenth of them without a usable score, each reason as often (the
    first request, the collect's check of the judge, is answered well). By arrival, not by a
    hash of the request: request ids hold the server's port, so a hash would change per run."""

    def __init__(self):
        count = itertools.count()
        lock = threading.Lock()

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers["Content-Length"]))
                with lock:
                    k = next(count)
                h = (k - 1) % 50 if k else 49
                send_json(self, chat_completion(ANSWERS.get(h, f"Score: {1 + zlib.crc32(body) % 5}/5")))

            def log_message(self, *a):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()


def test_a_study_counts_each_reason_and_its_report_states_the_policy(ray_local, tmp_path):
    from judgecal.config import load_config
    from judgecal.methods.runner import StudyRunner
    from judgecal.report.html import render_html
    from judgecal.report.table import format_table

    srv = UnevenJudge()
    out = tmp_path / "out"
    path = write_config(tmp_path / "c.toml", f"""
[study]
output = "{out}"
[dataset]
max_groups = 10
max_items_per_group = 6
[pool]
attributes = ["length", "detail"]
[engine]
kind = "http"
base_url = "{srv.url}"
max_retries = 0
logprobs = false
[collect]
num_actors = 1
[fit]
folds = 2
inner_folds = 2
bootstrap = 100
fold_seeds = 1
""")
    with pytest.raises(InputError) as e:  # a tenth of the answers unusable: above 5%
        StudyRunner(load_config(str(path), ["fit.max_missing=0.05"])).run_all()
    assert "[fit].max_missing = 0.05" in str(e.value) and "refusal" in str(e.value)
    assert not (out / "results.json").exists()  # nothing fitted on what was refused

    log = StudyRunner(load_config(str(path), ["fit.max_missing=0.4"])).run_all()
    stored = pq.read_table(out / "responses", columns=["parse_status"])["parse_status"].to_pylist()
    m = log["results"]["missing_scores"]
    for status in ("refusal", "several_numbers", "empty", "non_utf8", "out_of_scale"):
        assert m["by_status"][status] == stored.count(status) > 0, status
        assert log["stats"]["responses"]["parse_status"][status] == stored.count(status)
    assert m["without_score"] == sum(s != "ok" for s in stored) and m["requests"] == len(stored)
    assert m["policy"] == "impute" and m["max_missing"] == 0.4
    assert log["results"]["dropped_items"] == m["items_left_out"] and log["results"]["filled_deltas"] == m["deltas_filled"]
    line = f"missing scores: {m['without_score']:,} of {m['requests']:,} requests have no usable score"
    assert line in format_table(log) and line in render_html(log)
    assert json.loads((out / "results.json").read_text())["results"]["missing_scores"] == m

    drop = StudyRunner(load_config(str(path), ["fit.max_missing=0.4", 'fit.missing="drop"'])).evaluate()
    assert drop["results"]["missing_scores"]["policy"] == "drop"
    assert drop["results"]["items"] < log["results"]["items"] and drop["results"]["filled_deltas"] == 0
    assert "policy drop: items missing any usable score left out" in format_table(drop)


def _two_runs(expected_second_run: float):
    """Two items answered twice (runs 0 and 1) at a temperature: the sampled scores differ
    between the runs; the expected score of the second run is ``expected_second_run``."""
    rows = []
    for item in ("a", "b"):
        for probe in ("baseline", "length:more"):
            for run, score, exp in ((0, 3.0, 3.4), (1, 4.0, expected_second_run)):
                rows.append({"item_id": item, "probe_id": probe, "run": run,
                             "attribute": None if probe == "baseline" else "length",
                             "direction": None if probe == "baseline" else "more", "strength": "standard",
                             "score": score, "expected_score": exp, "parse_status": "ok"})
    return pa.Table.from_pylist(rows), pa.table({"item_id": ["a", "b"], "group_id": ["g1", "g1"],
                                                "target": [1.0, 2.0]})


def test_the_table_says_which_reading_its_scores_are_and_what_the_runs_changed():
    from judgecal.report.table import agreement_lines

    res = {"target": "human", "items": 2, "groups": 1, "folds": 2, "fold_seeds": 1, "runs": 2, "temperature": 0.7}
    same = build_features(*_two_runs(3.4), "expected")
    assert same.reading == {"score_field": "expected", "expected_share": 1.0, "cells_with_runs": 4,
                            "cells_runs_differ": 0}
    line = agreement_lines({**res, "reading": same.reading})[0]
    # the sampled scores differ, but the fit reads the expected score, which no run changed
    assert ("each score the judge's expected score over the scale: the same in all 2 runs sampled at temperature "
            "0.7, in each of the 4 item x probe cells, so the runs add nothing to it") in line
    moved = build_features(*_two_runs(3.6), "expected")
    assert "the mean of 2 runs sampled at temperature 0.7 (they differed in 4 of 4 item x probe cells)" in \
        agreement_lines({**res, "reading": moved.reading})[0]
    parsed = build_features(*_two_runs(3.4), "parsed")
    assert parsed.reading["expected_share"] == 0.0
    assert agreement_lines({**res, "reading": parsed.reading})[0].endswith(
        "; each score the mean of 2 runs sampled at temperature 0.7")
    assert agreement_lines(res)[0].endswith("; each score the mean of 2 runs sampled at temperature 0.7")  # older logs


def test_a_judge_without_score_distributions_is_said_to_be_read_by_its_parsed_scores():
    """A batch judge without logprobs: the table's one Vanilla row was the parsed score and no
    line said the expected score could not be read (a user's finding)."""
    from judgecal.report.table import agreement_lines

    ans, items = _two_runs(3.4)
    ans = ans.filter(pa.compute.equal(ans["run"], 0)).set_column(
        ans.schema.get_field_index("expected_score"), "expected_score", pa.nulls(4, pa.float64()))
    plain = build_features(ans, items, "expected")
    assert plain.reading["expected_share"] == 0.0
    res = {"target": "human", "items": 2, "groups": 1, "folds": 2, "fold_seeds": 1, "runs": 1, "temperature": 0.0}
    assert agreement_lines({**res, "reading": plain.reading})[0].endswith(
        "; each score the parsed one: no answer gave a score distribution, so there is no expected score")


def test_the_reading_line_for_one_run_at_a_temperature_and_for_items_left_out():
    """One run at a temperature has no runs to compare (it said 'the mean of 1 runs ... differed
    in 0 of 0 cells'); items the fit leaves out are not counted in the reading."""
    from judgecal.report.table import agreement_lines

    res = {"target": "human", "items": 2, "groups": 1, "folds": 2, "fold_seeds": 1, "runs": 1, "temperature": 0.7}
    ans, items = _two_runs(3.4)
    one = build_features(ans.filter(pa.compute.equal(ans["run"], 0)), items, "expected")
    line = agreement_lines({**res, "reading": one.reading})[0]
    assert line.endswith("; each score the judge's expected score over the scale (1 run sampled at temperature 0.7)")
    # item b's baseline has no score in either run: "drop" and "impute" both leave b out
    rows = [{**r, "score": None, "expected_score": None, "parse_status": "refusal"}
            if r["item_id"] == "b" and r["probe_id"] == "baseline" else r for r in ans.to_pylist()]
    left = build_features(pa.Table.from_pylist(rows), items, "expected")
    assert list(left.frame.index) == ["a"] and left.reading["cells_with_runs"] == 2


def test_the_footer_counts_answers_off_the_scale_that_the_expected_reading_keeps():
    """'missing scores: 0 of 192 requests have no usable score' stood beside 'out_of_scale 7'
    (a user's finding): the expected reading keeps the distribution's score of an answer whose
    text was off the scale, and the footer now says so; the parsed reading counts it missing."""
    from judgecal.report.table import missing_line

    ans, items = _two_runs(3.4)
    rows = [{**r, "score": None, "parse_status": "out_of_scale"} if (r["item_id"], r["probe_id"], r["run"]) ==
            ("a", "length:more", 1) else r for r in ans.to_pylist()]
    expected = build_features(pa.Table.from_pylist(rows), items, "expected")
    assert expected.missing["without_score"] == 0 and expected.missing["expected_kept"] == {"out_of_scale": 1}
    assert ("0 of 8 requests have no usable score; 1 answer whose text gave no score on the scale (out_of_scale 1) "
            "keeps the expected score of its distribution") in missing_line({"missing_scores": expected.missing})
    parsed = build_features(pa.Table.from_pylist(rows), items, "parsed")
    assert parsed.missing["without_score"] == 1 and parsed.missing["expected_kept"] == {}
    assert "expected score" not in missing_line({"missing_scores": parsed.missing})


def test_the_tokens_line_says_reuse_only_where_the_engine_measures_it():
    """The vLLM stranger read "25,637 (25,637 computed, rest reused prefix)" as no prefix reuse:
    ray.data.llm's rows do not say what vLLM's prefix cache served, nor do http judges."""
    from judgecal.engines import HttpEngineConfig, LlamaCppEngineConfig, SimulatedEngineConfig
    from judgecal.engines.vllm import VllmEngineConfig
    from judgecal.methods.prism import response_facts
    from judgecal.report.table import computed_tokens

    ans = pa.table({"parse_status": ["ok", "ok"], "prompt_tokens": [600, 600], "computed_tokens": [600, 20],
                    "completion_tokens": [1, 1], "latency_s": [0.1, 0.1], "attempt": [1, 1]})
    said = {name: computed_tokens(response_facts(ans, cfg)) for name, cfg in [
        ("llamacpp", LlamaCppEngineConfig()), ("offline", VllmEngineConfig(model_source="m", processor="offline")),
        ("ray.data.llm", VllmEngineConfig(model_source="m")), ("http", HttpEngineConfig(model="m")),
        ("simulated", SimulatedEngineConfig())]}
    assert said["llamacpp"] == said["offline"] == "620 computed, rest reused prefix"
    assert said["ray.data.llm"] == said["http"] == "prefix-cache reuse not measured by this engine"
    # a user at scale read its count as tokens, against show's estimate 1.8x larger
    assert said["simulated"] == "words of the user messages: the SIMULATED judge has no tokenizer"
    assert computed_tokens({"computed_tokens": 620}) == "620 computed, rest reused prefix"  # a log from before


def test_a_prism_study_on_an_engine_that_does_not_measure_reuse_says_so(tmp_path, ray_local):
    """A second reader's finding: the PRISM report (where the vLLM stranger read "0 reused")
    still claimed reuse, because its facts were taken without the engine."""
    from judgecal.config import load_config
    from judgecal.methods.runner import StudyRunner
    from judgecal.report.table import format_table

    from conftest import small_study

    log = StudyRunner(load_config(str(small_study(tmp_path, tmp_path / "out")))).run_all()
    facts = log["stats"]["responses"]
    assert facts["prefix_reuse_measured"] is False and facts["tokens_are_words"] is True
    assert "(words of the user messages: the SIMULATED judge has no tokenizer)" in format_table(log)
    facts["tokens_are_words"] = False  # the same study's log as an http judge's would read
    assert "(prefix-cache reuse not measured by this engine)" in format_table(log)
