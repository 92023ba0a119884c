"""The order diagnostic (PRISM §B.6): batched and pairwise prompts, their parser, the
statistics on scores whose answer is known, and a study with a planted position bias."""

import json
import subprocess

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

from conftest import ROOT, judgecal_cmd, write_config
from judgecal.datasets import load_dataset, subset_items
from judgecal.diagnostics.formats import BATCH, PAIR, OrderRenderer, order_plan, orders_for, pair_prompt, parse_batch
from judgecal.diagnostics.order import order_stats, pair_stats
from judgecal.scale import ScoreScale

SCALE = ScoreScale(1, 5)


def test_batched_answers_are_read_per_position():
    text = "Summary 1: 4\nSummary 2: 2\nSummary 3: 9\n- 4) 5\nSummary 2: 1"
    # position 3's 9 is off the scale; a later repeat of position 2 does not overwrite it
    assert parse_batch(text, 4, SCALE) == [4.0, 2.0, None, 5.0]
    assert parse_batch("I think they are all good.", 2, SCALE) == [None, None]
    assert parse_batch(None, 1, SCALE) == [None]


def test_orders_are_listed_reversed_then_random_and_the_same_for_every_document_of_a_size():
    perms = orders_for(5, 4, seed=3)
    assert perms[0] == [0, 1, 2, 3, 4] and perms[1] == [4, 3, 2, 1, 0]
    assert all(sorted(p) == list(range(5)) for p in perms) and perms == orders_for(5, 4, seed=3)
    assert perms[2] != perms[3]


def test_the_order_plan_shows_each_documents_candidates_in_each_order():
    items = subset_items(load_dataset("summeval"), 2, 4)
    plan = order_plan(items, "j", SCALE, orders=3, pairs_per_group=2, runs=2, temperature=0.0, seed=0, study_seed=0)
    df = plan.to_pandas()
    batch, pair = df[df["probe_id"] == BATCH], df[df["probe_id"] == PAIR]
    assert len(batch) == 2 * 3 * 2 and len(pair) == 2 * 2 * 2 * 2
    assert df["request_id"].is_unique
    for (_, order), rows in pair.groupby(["item_id", "run"]):
        a, b = rows.sort_values("order")["shown"]
        assert list(a) == list(b)[::-1]  # both orders of the pair
    # the prompt shows the candidates in the plan's order, its wording asks for one line each
    r = OrderRenderer(items, SCALE).render([batch.iloc[1].to_dict()])[0]
    contents = dict(zip(items["item_id"].to_pylist(), items["content"].to_pylist()))
    shown = list(batch.iloc[1]["shown"])
    assert [r.user.index(contents[i]) for i in shown] == sorted(r.user.index(contents[i]) for i in shown)
    assert '"Summary k: score"' in r.user and r.answer_prefix == "Summary 1:" and r.mode == "generate"
    p = pair_prompt("story", "a prompt", "first story", "second story")
    assert p.scale == ScoreScale(1, 2) and p.user.index("first story") < p.user.index("second story")


def _batch_rows(scores: dict, orders: list[list[str]], runs=(0,)):
    """Rows as batch_scores writes them: scores[(item, order, run)]."""
    rows = []
    for run in runs:
        for o, shown in enumerate(orders):
            for pos, item in enumerate(shown):
                rows.append(("g", item, o, run, pos, scores(item, o, run, pos)))
    return pd.DataFrame(rows, columns=["group_id", "item_id", "order", "run", "position", "value"])


def test_order_statistics_on_scores_with_a_known_answer():
    items = ["a", "b", "c", "d"]
    orders = [items, items[::-1], ["c", "a", "d", "b"]]
    quality = {"a": 1.0, "b": 2.0, "c": 3.0, "d": 4.0}
    # an order that shifts every candidate alike: rankings never move, all its variance is additive
    shift = {0: 0.0, 1: 0.6, 2: -0.3}
    s = order_stats(_batch_rows(lambda i, o, r, p: quality[i] + shift[o], orders))[0]
    assert s["tau_reversed"]["g"] == (1.0, 1.0)
    num, den = s["additive"]["g"]
    assert num / den == pytest.approx(1.0)
    # a first-position bonus of 1.0: the shift is 1 - (mean over orders of the bonus) per first-shown
    bonus = order_stats(_batch_rows(lambda i, o, r, p: quality[i] + (1.0 if p == 0 else 0.0), orders))[0]
    first_shown = [o[0] for o in orders]  # a, d, c: each first in exactly one of the 3 orders
    expected = np.mean([1.0 - 1.0 / 3 for _ in first_shown])
    num, den = bonus["first_shift"]["g"]
    assert num / den == pytest.approx(expected)
    # repeats: two runs whose scores of one order rank the items oppositely give τ = -1
    rep = order_stats(_batch_rows(lambda i, o, r, p: quality[i] * (1 if r == 0 else -1), orders, runs=(0, 1)))[0]
    assert rep["tau_repeat"]["g"] == (-3.0, 3.0)  # one run pair in each of the 3 orders


def test_an_order_whose_batched_answer_never_parsed_is_no_keyerror():
    """The demo's CPU judge: the batched answer of order 0 did not parse at all (every value
    NaN), which pivot_table drops as a column; the statistics go on from the other orders."""
    items = ["a", "b", "c", "d"]
    orders = [items, items[::-1], ["c", "a", "d", "b"]]
    quality = {"a": 1.0, "b": 2.0, "c": 3.0, "d": 4.0}
    s = order_stats(_batch_rows(lambda i, o, r, p: np.nan if o == 0 else quality[i] + (1.0 if p == 0 else 0.0),
                                orders, runs=(0, 1)))[0]
    assert np.isnan(s["tau_reversed"]["g"][0])  # order 0 is gone: nothing to compare the reversal with
    num, den = s["first_shift"]["g"]
    assert den == 4 and num / den == pytest.approx(0.5)  # d and c first in orders 1 and 2, x 2 runs: 1 - 1/2
    assert s["tau_repeat"]["g"][1] == 2  # orders 1 and 2 each have one run pair
    why = order_stats(_batch_rows(lambda i, o, r, p: np.nan if o == 0 else quality[i], orders, runs=(0, 1)))[1]
    assert why["tau_reversed"]["g"] == "fewer than 3 candidates with a parsed score in both orders"
    assert why["tau_repeat"]["g"] == "fewer than 3 candidates with a parsed score in both runs"  # order 0's pair


def test_a_statistic_is_undefined_for_the_reason_its_computation_met():
    """The reasons are decided where each statistic is computed (they had been derived again
    beside it, and could drift from it)."""
    items = ["a", "b", "c"]
    flat = order_stats(_batch_rows(lambda i, o, r, p: 2.0, [items, items[::-1]]))
    assert np.isnan(flat[0]["tau_reversed"]["g"][0])
    assert flat[1]["tau_reversed"]["g"] == "no ranking, every candidate got one score in one of the two orders"
    assert flat[1]["tau_repeat"]["g"] == "one run, τ between repeats needs [pool] runs >= 2"
    assert np.isnan(flat[0]["additive"]["g"][0])
    assert flat[1]["additive"]["g"] == "no order-induced variance, every candidate got one score in every order"
    pair = pd.DataFrame({"group_id": ["g"] * 2, "pair": ["a|b"] * 2, "order": [0, 1], "run": [0, 0],
                         "first": ["a", "b"], "second": ["b", "a"], "p_second": [0.0, 0.0]})
    stats, why = pair_stats(pair, {"a": 3.0, "b": 3.0})
    assert np.isnan(stats["acc_one"]["g"][0]) and stats["consistent"]["g"] == (0.0, 1.0)
    assert why["acc_one"]["g"] == why["acc_both"]["g"] == "people rank none of its pairs (tied targets)"
    stats, why = pair_stats(pair[pair["order"] == 0], {"a": 3.0, "b": 1.0})
    assert np.isnan(stats["acc_one"]["g"][0])
    assert why["acc_one"]["g"] == "no pair with a choice read in both orders that people rank"


def test_pairwise_statistics_on_choices_with_a_known_answer():
    # a judge that always picks the first shown: every pair flips with the order
    pair = pd.DataFrame({"group_id": ["g"] * 4, "pair": ["a|b", "a|b", "a|c", "a|c"], "order": [0, 1, 0, 1],
                         "run": [0] * 4, "first": ["a", "b", "a", "c"], "second": ["b", "a", "c", "a"],
                         "p_second": [0.0, 0.0, 0.0, 0.0]})
    s = pair_stats(pair, {"a": 3.0, "b": 1.0, "c": 5.0})[0]
    assert s["first_chosen"]["g"] == (4.0, 4.0)
    assert s["consistent"]["g"] == (0.0, 2.0)
    assert s["acc_one"]["g"] == (2.0, 4.0)  # right in one order of each pair
    assert s["acc_both"]["g"] == (1.0, 2.0)  # averaged: a tie, half a point each


def test_a_study_with_a_planted_position_bias_reports_it(tmp_path):
    out = tmp_path / "o"
    cfg = write_config(tmp_path / "o.toml", f"""
[study]
output = "{out}"
[dataset]
name = "summeval"
max_groups = 8
max_items_per_group = 5
[pool]
attributes = ["length"]
[diagnostics]
run = ["order", "resolution"]
bootstrap = 200
orders = 3
pairs_per_group = 4
[engine]
kind = "simulated"
position_bias = 1.0
[fit]
folds = 3
inner_folds = 3
fold_seeds = 1
bootstrap = 200
[design]
subsets = false
""")
    r = subprocess.run(judgecal_cmd("run", str(cfg)), cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    assert "orders: 8 documents x 3 orders batched + 32 pairs x 2 orders pairwise, x 1 runs" in r.stderr
    log = json.loads((out / "results.json").read_text())
    sections = {s["name"]: s for s in log["results"]["sections"]}
    rows = {row[0]: row[1] for row in sections["order"]["rows"]}
    assert rows["parsed share of batched scores"] == 1.0
    shift = rows["first-position shift"]["metric"]
    # planted: +1.0 when first, 2/3 of it above the mean over 3 orders (less after rounding and clipping)
    assert shift["n"] == 8 and 0.15 < shift["low"] and shift["value"] < 2 / 3
    assert rows["pairwise: first shown chosen"]["metric"]["low"] > 0.5
    agreement = sections["order_agreement"]["rows"]
    assert [row[1] for row in agreement] == [1, 1, 2, 3]
    assert all(row[2]["metric"]["n"] == 8 for row in agreement)
    for title in ("Order and format effects", "Agreement with people against the number of averaged orders"):
        assert title in r.stdout and title in (out / "report.html").read_text()
    assert (out / "orders.parquet").exists() and (out / "orders_responses").is_dir()
    # resolution: the study's scale from its own requests, the others from a plan of their own
    scales = sections["resolution"]["rows"]
    assert [row[0] for row in scales] == ["1-5 (study)", "1-10", "0-100"] and (out / "scales.parquet").exists()
    assert all(cell["metric"]["n"] == 8 for row in scales for cell in row[1:4])
    # a second evaluate reads the same answers: the same sections, nothing re-collected
    r2 = subprocess.run(judgecal_cmd("evaluate", str(out)), cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert r2.returncode == 0, r2.stderr
    again = {s["name"]: s for s in json.loads((out / "results.json").read_text())["results"]["sections"]}
    assert again["order"] == sections["order"]


def test_the_cpu_judge_answers_a_batched_prompt():
    from judgecal.engines import LlamaCppEngineConfig
    from judgecal.pipeline.render import judge_prompts

    items = subset_items(load_dataset("summeval"), 1, 3)
    plan = order_plan(items, "j", SCALE, orders=2, pairs_per_group=1, runs=1, temperature=0.0, seed=0, study_seed=0)
    batch = plan.filter(pa.compute.equal(plan["probe_id"], BATCH))
    prompts = judge_prompts(OrderRenderer(items, SCALE), batch)
    eng = LlamaCppEngineConfig().build()
    try:
        outs = eng.generate(prompts, max(p.max_tokens for p in prompts))
    finally:
        eng.close()
    for p, o in zip(prompts, outs):
        assert o.raw_text.startswith("Summary 1:") and 0 < o.completion_tokens <= p.max_tokens
        assert len(parse_batch(o.raw_text, 3, SCALE)) == 3


def test_resolution_statistics_on_scores_with_a_known_answer():
    from judgecal.diagnostics.bootstrap import GroupBootstrap
    from judgecal.diagnostics.resolution import Resolution

    # document g1: baselines 3, 3, 4 (1 tied pair of 3); g2: 1, 2, 5 (none tied)
    base = {"a": 3, "b": 3, "c": 4, "d": 1, "e": 2, "f": 5}
    group_of = {i: "g1" if i in "abc" else "g2" for i in base}
    rows = [(i, group_of[i], "baseline", v, np.nan) for i, v in base.items()]
    # each item has two probes: g1's move none of their scores, g2's move one of six
    rows += [(i, group_of[i], f"p{k}", base[i] + (1 if (i, k) == ("d", 0) else 0), 1 if (i, k) == ("d", 0) else 0)
             for i in base for k in range(2)]
    df = pd.DataFrame(rows, columns=["item_id", "group_id", "probe_id", "value", "delta"])
    df.loc[df["probe_id"] == "baseline", "delta"] = np.nan
    gb = GroupBootstrap(["g1", "g2"], 200, 0)
    target = {"a": 1.0, "b": 2.0, "c": 3.0, "d": 1.0, "e": 2.0, "f": 3.0}
    name, tied, zero, spearman, parsed = Resolution._row("1-5", df, gb, target, group_of, own=True)
    assert name == "1-5 (study)" and parsed == 1.0
    assert tied.value == pytest.approx((1 / 3 + 0) / 2) and tied.n == 2
    assert zero.value == pytest.approx((1.0 + 5 / 6) / 2)
    assert spearman.value == pytest.approx((np.sqrt(3) / 2 + 1.0) / 2)  # ties (3, 3, 4) rank 0.866 in g1


def test_two_candidates_with_one_text_are_still_two_requests_in_each_order():
    # SummEval has documents where two systems wrote the same summary: the pair renders one
    # prompt in both orders, which once gave two plan rows one id (and a collect that never completed)
    items = subset_items(load_dataset("summeval"), 1, 3)
    content = items["content"].to_pylist()
    items = items.set_column(items.schema.get_field_index("content"), "content", pa.array([content[0]] * 3))
    plan = order_plan(items, "j", SCALE, orders=3, pairs_per_group=3, runs=1, temperature=0.0, seed=0, study_seed=0)
    assert plan.num_rows == 3 + 3 * 2 and len(set(plan["request_id"].to_pylist())) == plan.num_rows
