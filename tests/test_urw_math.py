"""URW's p-values, weights and baselines against the formulas and hand-computed cases."""

import json
from fractions import Fraction

import numpy as np
import pytest

from judgecal.calibrate.urw import (
    SCP,
    URW,
    BetaBinomial,
    MondrianSCP,
    SamplingEnsemble,
    TemplateVoteUniform,
    Uniform,
    URWSingleVote,
    normalised_score,
)
from judgecal.errors import InputError
from judgecal.evaluate.pairwise import (
    accuracy,
    coverage_table,
    difference,
    held_out_p_values,
    pair_outcomes,
    prompt_clusters,
    relative_improvement,
    relative_improvement_interval,
    response_folds,
    weight_separation,
)

N = 6


def exact_p(u, v, cal_v, cal_y):
    """The formula in exact arithmetic: (1 + #{i : s_i >= |v - u|}) / (N_cal + 1)."""
    s = [abs(Fraction(a) - Fraction(b)) for a, b in zip(cal_v, cal_y)]
    x = abs(Fraction(v) - Fraction(u))
    return Fraction(1 + sum(si >= x for si in s), len(s) + 1)


def test_p_values_match_the_formula_including_ties():
    rng = np.random.default_rng(0)
    k = rng.integers(0, N + 1, 300)
    cal_v = [Fraction(int(a), N) for a in k]
    cal_y = [int(a) for a in rng.integers(0, 2, 300)]
    urw = URW().fit([float(v) for v in cal_v], cal_y)
    for kv in range(N + 1):  # every soft score ties with many calibration scores
        v = Fraction(kv, N)
        for u in (0, 1):
            assert urw.p_value(u, float(v)) == pytest.approx(float(exact_p(u, v, cal_v, cal_y)), abs=1e-15)
        vote = 1 if v >= Fraction(1, 2) else 0
        assert urw.raw_weight([float(v)])[0] == pytest.approx(float(exact_p(vote, v, cal_v, cal_y)), abs=1e-15)


def test_weight_is_monotone_in_agreement():
    rng = np.random.default_rng(1)
    v = rng.integers(0, N + 1, 500) / N
    y = (rng.random(500) < np.where(v > 0.5, 0.8, 0.3)).astype(int)
    urw = URW().fit(v, y)
    grid = np.arange(N + 1) / N
    w = urw.raw_weight(grid)
    agreement = np.abs(2 * grid - 1)
    order = np.argsort(agreement, kind="stable")
    assert np.all(np.diff(w[order]) >= -1e-15)
    assert w[0] == w[-1] and w[0] > w[3]  # symmetric, and unanimity beats a split


def test_coverage_bound_on_exchangeable_data():
    rng = np.random.default_rng(2)
    n = 4000
    truth = rng.integers(0, 2, n)
    flip = rng.uniform(0, 0.45, n)
    votes = (rng.random((n, N)) >= flip[:, None]) == truth[:, None]
    v_hat = np.where(truth[:, None] == 1, votes, ~votes).mean(axis=1)
    cov = coverage_table(v_hat, truth, alphas=(0.05, 0.1, 0.2, 0.3, 0.5))
    assert cov["folds"] == 5 and cov["prompts"] == cov["criteria"] == n  # no groups: one criterion each
    for row in cov["rows"]:
        assert row["validity"] <= row["alpha"] + 0.015, row  # P(true label's p-value <= alpha) <= alpha
        assert row["theorem"] <= row["validity"], row  # Theorem 3.1's event is a sub-event


def test_baselines_on_a_hand_computed_case():
    # one response, three criteria; template soft scores 6/6, 4/6 and 1/6
    v = np.array([1.0, 4 / 6, 1 / 6])
    resp = np.array(["r", "r", "r"])
    assert Uniform().response_scores(np.array([1.0, 1.0, 0.0]), resp)[1][0] == pytest.approx(2 / 3)
    assert TemplateVoteUniform().response_scores(v, resp)[1][0] == pytest.approx(2 / 3)  # votes 1, 1, 0
    # Beta(1,1): (k+1)/(N+2) with k = 6, 4, 5 agreeing templates -> 7/8, 5/8, 6/8
    np.testing.assert_allclose(BetaBinomial(6).raw_weight(v), [7 / 8, 5 / 8, 6 / 8])
    assert BetaBinomial(6).response_scores(v, resp)[1][0] == pytest.approx((7 / 8 + 5 / 8) / (7 / 8 + 5 / 8 + 6 / 8))
    np.testing.assert_allclose(SamplingEnsemble().raw_weight(v), [1.0, 4 / 6, 5 / 6])
    # calibration: nonconformity scores 0, 0, 1/6, 1/2 (N_cal = 4)
    cal_v, cal_y = np.array([1.0, 0.0, 5 / 6, 0.5]), np.array([1, 0, 1, 1])
    urw = URW().fit(cal_v, cal_y)
    # |v - vote| = 0, 1/3, 1/6 -> #{s >= x} = 4, 1, 2 -> p = 5/5, 2/5, 3/5
    np.testing.assert_allclose(urw.raw_weight(v), [1.0, 2 / 5, 3 / 5])
    assert urw.response_scores(v, resp)[1][0] == pytest.approx((1 + 2 / 5) / (1 + 2 / 5 + 3 / 5))
    # SCP at alpha = 0.5: p(1|v), p(0|v) = (1, 1/5), (2/5, 1/5), (1/5, 3/5) -> sets {1}, {}, {0}
    np.testing.assert_allclose(SCP(0.5).fit(cal_v, cal_y).raw_weight(v), [1.0, 0.0, 1.0])
    # SCP abstains on every criterion (both sets empty at 0.5) -> uniform mean of the votes 1, 0
    assert SCP(0.5).fit(cal_v, cal_y).response_scores(np.array([4 / 6, 2 / 6]), np.array(["r", "r"]))[1][0] == 0.5
    # URW-double-dagger weights the given single votes by their p-values
    two = URWSingleVote().fit(cal_v, cal_y)
    base = np.array([1.0, 0.0, 0.0])
    np.testing.assert_allclose(two.response_scores(v, resp, votes=base)[1], [(1.0) / (1.0 + 1 / 5 + 3 / 5)])


def test_mondrian_calibrates_per_bin():
    rng = np.random.default_rng(3)
    length = rng.integers(3, 30, 600).astype(float)
    v = rng.integers(0, N + 1, 600) / N
    y = np.where(length > 15, (v >= 0.5).astype(int), rng.integers(0, 2, 600))  # long criteria reliable
    m = MondrianSCP(alpha=0.2, n_bins=6).fit(v, y, length)
    assert len(m.bins_) == 6
    w_long = m.raw_weight(np.full(50, 4 / 6), np.full(50, 28.0))
    w_short = m.raw_weight(np.full(50, 4 / 6), np.full(50, 4.0))
    assert w_long.mean() >= w_short.mean()
    with pytest.raises(InputError, match="strata"):
        m.raw_weight(v)


def test_bad_calibration_input():
    with pytest.raises(InputError, match=r"v_true\[2\].*not 0 or 1"):
        URW().fit([0.5, 1.0, 0.0], [1, 0, 2])
    with pytest.raises(InputError, match=r"v_hat\[1\].*outside \[0, 1\]"):
        URW().fit([0.5, 1.5], [1, 0])
    with pytest.raises(InputError, match="outside"):
        URW().fit([0.5], [1]).raw_weight([-0.1])


def test_pairwise_outcomes_and_improvement():
    out = pair_outcomes([0.9, 0.5, 0.2], [0.1, 0.5, 0.8], ["a", "b", "a"])
    np.testing.assert_allclose(out, [1.0, 0.5, 0.0])
    assert relative_improvement([1, 1, 0.5], [1, 0.5, 0.5]) == pytest.approx((2.5 / 3 - 2 / 3) / (2 / 3))
    keys, scores = normalised_score(np.array([1.0, 3.0, 2.0]), np.array([1.0, 0.0, 1.0]), np.array(["x", "x", "y"]))
    assert list(keys) == ["x", "y"] and scores.tolist() == [0.25, 1.0]


def test_urw_beats_uniform_when_some_criteria_are_unstable():
    """Simulated: unstable criteria (templates disagree) are down-weighted and ranking improves."""
    rng = np.random.default_rng(4)

    def draw(n):
        truth = rng.integers(0, 2, n)
        flip = np.where(rng.random(n) < 0.5, 0.45, 0.02)
        votes = np.where(rng.random((n, N)) < flip[:, None], 1 - truth[:, None], truth[:, None])
        return truth, votes.mean(axis=1), votes[:, 0]

    y_cal, v_cal, _ = draw(2000)
    urw = URW().fit(v_cal, y_cal)
    pairs, k = 600, 8
    wins = {"URW": [], "Uniform": []}
    for _ in range(pairs):
        ta, va, ba = draw(k)
        tb, vb, bb = draw(k)
        if ta.sum() == tb.sum():
            continue
        better = "a" if ta.sum() > tb.sum() else "b"
        resp = np.array(["a"] * k + ["b"] * k)
        for name, est, vv in (("URW", urw, np.r_[va, vb]), ("Uniform", Uniform(), np.r_[ba, bb])):
            s = est.response_scores(vv, resp)[1]
            wins[name].append(pair_outcomes([s[0]], [s[1]], [better])[0])
    assert np.mean(wins["URW"]) > np.mean(wins["Uniform"]) + 0.05


def test_every_weighter_is_importable_from_judgecal_calibrate():
    import judgecal.calibrate as cal
    from judgecal.calibrate import METHODS, URW as URW2  # noqa: N811 - the same class under another name
    from judgecal.calibrate import urw as module

    assert URW2 is URW and METHODS == module.METHODS
    for name in ("Uniform", "BetaBinomial", "SamplingEnsemble", "SCP", "MondrianSCP", "TemplateVoteUniform",
                 "URWSingleVote"):
        assert getattr(cal, name) is getattr(module, name) and name in cal.__all__


def _round_trip(est):
    d = json.loads(json.dumps(est.to_dict()))
    assert d["class"] == type(est).__name__
    back = type(est).from_dict(d)
    assert type(back) is type(est) and back.get_params() == est.get_params()
    return back


@pytest.mark.parametrize("est", [URW(), URWSingleVote(), SCP(alpha=0.3), MondrianSCP(alpha=0.2, n_bins=4),
                                 Uniform(), TemplateVoteUniform(), BetaBinomial(n_templates=4), SamplingEnsemble()],
                         ids=lambda e: type(e).__name__)
def test_to_dict_from_dict_round_trip_gives_identical_weights_and_scores(est):
    rng = np.random.default_rng(5)
    length = rng.integers(3, 30, 300).astype(float)
    v, y = rng.integers(0, N + 1, 300) / N, rng.integers(0, 2, 300)
    est.fit(v, y, length)
    back = _round_trip(est)
    t_v, t_len = rng.integers(0, N + 1, 200) / N, rng.integers(1, 40, 200).astype(float)
    resp = rng.integers(0, 20, 200)
    np.testing.assert_array_equal(back.raw_weight(t_v, t_len), est.raw_weight(t_v, t_len))
    for a, b in zip(back.response_scores(t_v, resp, t_len), est.response_scores(t_v, resp, t_len)):
        np.testing.assert_array_equal(a, b)


def test_from_dict_rejects_another_class_and_missing_fields():
    d = URW().fit([1.0, 0.5, 0.0], [1, 1, 0]).to_dict()
    with pytest.raises(InputError, match=r"^SCP\.class: a 'URW' dict, not 'SCP'$"):
        SCP.from_dict(d)
    with pytest.raises(InputError, match=r"^URW\.fitted\.scores_: missing field$"):
        URW.from_dict({**d, "fitted": {"n_cal_": 3}})
    with pytest.raises(InputError, match=r"^URW\.params: missing field$"):
        URW.from_dict({"class": "URW"})
    with pytest.raises(InputError, match=r"^SCP\.params\.alpha: missing field$"):
        SCP.from_dict({"class": "SCP", "params": {}, "fitted": {}})
    scp = SCP(0.1).fit([1.0, 0.5, 0.0], [1, 1, 0]).to_dict()
    del scp["fitted"]["urw_"]["fitted"]["n_cal_"]
    with pytest.raises(InputError, match=r"^SCP\.fitted\.urw_\.fitted\.n_cal_: missing field$"):
        SCP.from_dict(scp)
    with pytest.raises(InputError, match=r"^URW\.fitted: malformed"):
        URW.from_dict({**d, "fitted": {"scores_": ["x"], "n_cal_": 1}})


def test_equal_multisets_of_verdicts_score_equal_bit_for_bit():
    """(5,5,0,3)/6 and (3,0,5,5)/6: the same soft scores in another criterion order. Summing
    p-values as fractions gave 0.6425702811244981 vs 0.642570281124498 (a pair scored 1, not
    1/2); integer numerators, one division, make them equal."""
    from judgecal.calibrate import URW, BetaBinomial, URWSingleVote
    from judgecal.evaluate.pairwise import pair_outcomes

    rng = np.random.default_rng(0)
    cal_v = rng.integers(0, 7, 400) / 6
    cal_y = (rng.random(400) < cal_v).astype(int)
    v = np.array([5, 5, 0, 3, 3, 0, 5, 5]) / 6
    resp = np.array(["a"] * 4 + ["b"] * 4)
    for est in (URW().fit(cal_v, cal_y), URWSingleVote().fit(cal_v, cal_y), BetaBinomial(6)):
        keys, scores = est.response_scores(v, resp)
        assert list(keys) == ["a", "b"] and scores[0] == scores[1], type(est).__name__
    assert pair_outcomes([0.6425702811244981], [0.642570281124498], ["a"])[0] == 0.5
    assert pair_outcomes([0.7], [0.6], ["a"])[0] == 1.0 and pair_outcomes([0.6], [0.7], ["a"])[0] == 0.0


# Issue 7, item 9: baselines count what parsed, drop what has no vote, merge bins too small for alpha.


def test_beta_binomial_divides_by_the_answers_that_parsed():
    """Old: k was read as round(v * n_templates) and divided by n_templates + 2, so 2 of 3 parsed
    answers weighed (4 + 1)/8 and a lone parsed answer (6 + 1)/8."""
    v, n = np.array([2 / 3, 0.0, 5 / 6]), np.array([3, 1, 6])
    bb = BetaBinomial(6)
    w = np.array([3 / 5, 2 / 3, 6 / 8])  # (k + 1)/(N + 2): 2 of 3, 1 of 1, 5 of 6 agree with the vote
    np.testing.assert_allclose(bb.raw_weight(v, n_parsed=n), w)
    assert bb.response_scores(v, np.array(["r"] * 3), n_parsed=n)[1][0] == pytest.approx((w[0] + w[2]) / w.sum())
    # integer numerators over lcm(N + 2): the same criteria in another order tie bit for bit
    order = [2, 0, 1]
    s = bb.response_scores(np.r_[v, v[order]], np.array(["a"] * 3 + ["b"] * 3), n_parsed=np.r_[n, n[order]])[1]
    assert s[0] == s[1]
    np.testing.assert_allclose(bb.raw_weight(v), [5 / 8, 7 / 8, 6 / 8])  # no counts: all templates parsed
    with pytest.raises(InputError, match="n_parsed"):
        bb.raw_weight(v, n_parsed=[3, 0, 6])


def _answers(rows):
    import pyarrow as pa

    keys = ("item_id", "criterion_id", "template", "temperature", "score", "parse_status")
    return pa.Table.from_pylist([dict(zip(keys, r)) for r in rows])


def test_soft_scores_count_parsed_answers_and_leave_a_missing_vote_missing():
    """Old: a failed base answer became the template mean's rounding and no parsed sample became
    0.5 (a vote of 1 for the Sampling Ensemble)."""
    from judgecal.rubrics import TemplateSet
    from judgecal.rubrics.votes import soft_scores, usable

    t = TemplateSet()
    rows = [("r", "c1", tpl, 0.0, None if k in (0, 3) else float(k < 5), "unparsed" if k in (0, 3) else "ok")
            for k, tpl in enumerate(t.active)]  # base and one more unparsed; parsed votes 1, 1, 1, 0
    rows += [("r", "c1", t.base, 0.7, None, "error")] * 2
    rows += [("r", "c2", tpl, 0.0, None, "error") for tpl in t.active]
    rows += [("r", "c2", t.base, 0.7, s, "ok") for s in (1.0, 1.0, 0.0)]
    out = soft_scores(_answers(rows), t).set_index("criterion_id")
    assert out.loc["c1", "v_tmpl"] == 0.75 and out.loc["c1", "n_tmpl"] == 4 and out.loc["c1", "n_unparsed"] == 4
    assert np.isnan(out.loc["c1", "v_base"]) and out.loc["c1", "v_two"] == 1.0
    assert np.isnan(out.loc["c1", "v_samp"]) and out.loc["c1", "n_samp"] == 0
    assert np.isnan(out.loc["c2", "v_tmpl"]) and out.loc["c2", "n_tmpl"] == 0
    assert out.loc["c2", "v_samp"] == pytest.approx(2 / 3) and out.loc["c2", "n_samp"] == 3
    assert usable(out, "v_tmpl").tolist() == [True, False]


def test_a_criterion_without_a_usable_vote_is_dropped_and_counted():
    from types import SimpleNamespace

    import pandas as pd

    from judgecal.methods.urw import weighted_scores

    rng = np.random.default_rng(6)
    cal = pd.DataFrame({"v_tmpl": rng.integers(0, N + 1, 200) / N, "label": rng.integers(0, 2, 200),
                        "length": rng.integers(3, 20, 200).astype(float)})
    cal["v_two"] = cal["v_tmpl"]
    cal.loc[:4, "v_tmpl"] = np.nan  # 5 calibration criteria without a parsed template answer
    ev = pd.DataFrame({"item_id": ["a", "a", "a", "b", "b"], "v_tmpl": [1, 5 / 6, 1 / 6, 1, 0],
                       "v_base": [1, 1, 0, 1, np.nan], "v_two": [1, 1, 0, 1, 0],
                       "v_samp": [0, np.nan, 0, np.nan, np.nan], "n_tmpl": [6] * 5, "length": [5.0, 6, 7, 8, 9]})
    scores, dropped = weighted_scores(cal, ev, SimpleNamespace(alpha=0.1, mondrian_bins=6), N)
    assert dropped["Sampling Ensemble"] == {"evaluation_criteria": 3, "calibration_criteria": 0,
                                            "unscored_responses": 1, "abstained_responses": 0,
                                            "evaluation_responses": 2}
    assert scores["Sampling Ensemble"]["a"] == 0.0  # old: the missing samples voted 1 at weight 1/2 -> 0.2
    assert np.isnan(scores["Sampling Ensemble"]["b"])
    assert pair_outcomes([scores["Sampling Ensemble"]["a"]], [scores["Sampling Ensemble"]["b"]], ["a"])[0] == 0.5
    assert dropped["Uniform"]["evaluation_criteria"] == 1 and scores["Uniform"]["b"] == 1.0
    assert dropped["URW‡"]["evaluation_criteria"] == 1
    assert dropped["URW"] == {"evaluation_criteria": 0, "calibration_criteria": 5, "unscored_responses": 0,
                              "abstained_responses": 0, "evaluation_responses": 2}
    assert dropped["URW‡"]["calibration_criteria"] == 0 and dropped["URW†"]["calibration_criteria"] == 0


def test_mondrian_merges_a_bin_too_small_for_alpha():
    """30 calibration points in 6 length bins at alpha = 0.1: 5 per bin, whose smallest p-value
    1/6 is above 0.1, so the old per-bin SCP abstained on every criterion."""
    from judgecal.calibrate.urw import merge_small_bins, min_calibration

    assert [min_calibration(a) for a in (0.05, 0.1, 0.2, 0.3, 0.5)] == [19, 9, 4, 3, 1]
    assert merge_small_bins([5] * 6, 9) == [1, 3]  # pairs of bins
    assert merge_small_bins([20, 0, 3, 20], 9) == [0]  # an empty and a small bin join the next one
    assert merge_small_bins([20, 20, 3], 9) == [0]  # the last bin joins the one before it
    assert merge_small_bins([3, 3], 9) == []
    length = np.arange(30, dtype=float)
    m = MondrianSCP(alpha=0.1, n_bins=6).fit(np.ones(30), np.ones(30), length)  # unanimous and right
    assert len(m.bins_) == 3 and all(u.n_cal_ >= 9 for u in m.bins_.values())
    assert np.bincount(m._bin(length)).tolist() == [10, 10, 10]
    np.testing.assert_array_equal(m.raw_weight(np.ones(30), length), np.ones(30))  # old: all 0
    back = _round_trip(m)
    np.testing.assert_array_equal(back.edges_, m.edges_)
    np.testing.assert_array_equal(back.raw_weight(np.ones(30), length), np.ones(30))


# Issue 7, item 5: intervals over prompts.


def test_prompt_clusters_are_the_prompt_hash_across_datasets():
    got = prompt_clusters(["llmbar/Natural/ab12", "rm-bench/chat/ab12", "rm-bench/chat/cd34"])
    assert list(got) == ["ab12", "ab12", "cd34"]


def _width(iv):
    return iv.high - iv.low


def test_cluster_bootstrap_over_prompts_is_wider_when_prompts_repeat():
    """Three pairs per prompt with one outcome (RM-Bench-like). Resampling pairs treats them as
    independent and narrows the interval by about sqrt(3); resampling prompts gives the interval
    of one pair per prompt."""
    rng = np.random.default_rng(7)
    per_prompt = rng.choice([0.0, 0.5, 1.0], 60, p=[0.3, 0.2, 0.5])
    uni_prompt = rng.choice([0.0, 0.5, 1.0], 60, p=[0.4, 0.2, 0.4])
    out, uni, cl = np.repeat(per_prompt, 3), np.repeat(uni_prompt, 3), np.repeat(np.arange(60), 3)
    by_pair, by_prompt, one_each = accuracy(out), accuracy(out, cl), accuracy(per_prompt)
    assert (by_prompt.n, by_prompt.clusters, by_pair.clusters) == (180, 60, None)
    assert _width(by_prompt) > 1.5 * _width(by_pair)
    assert _width(by_prompt) == pytest.approx(_width(one_each), rel=0.05)
    d = difference(out, uni, cl)
    assert d.estimate == pytest.approx(out.mean() - uni.mean()) and d.clusters == 60 and d.unit == "pairs"
    ri, ri_pairs = relative_improvement_interval(out, uni, cl), relative_improvement_interval(out, uni)
    assert ri.estimate == pytest.approx(relative_improvement(out, uni)) and (ri.n, ri.clusters) == (180, 60)
    assert ri.low < ri.estimate < ri.high and _width(ri) > 1.5 * _width(ri_pairs)


def test_relative_improvement_interval_covers_and_names_degenerate_cases():
    """Prompt types with known probabilities: true RI = E[sum m] / E[sum u] - 1 = 1.8 / 1.4 - 1."""
    rng = np.random.default_rng(8)
    types = [([1, 1, 1], [1, 1, 0]), ([0, 0, 1], [0, 0, 0]), ([0, 0, 0], [1, 0, 1])]
    truth, hits, reps = 1.8 / 1.4 - 1, 0, 200
    for r in range(reps):
        pick = rng.choice(3, 40, p=[0.5, 0.3, 0.2])
        m = np.concatenate([types[k][0] for k in pick]).astype(float)
        u = np.concatenate([types[k][1] for k in pick]).astype(float)
        iv = relative_improvement_interval(m, u, np.repeat(np.arange(40), 3), n_resamples=500, seed=r)
        hits += iv.low <= truth <= iv.high
    assert hits / reps >= 0.9, hits / reps
    x, cl = np.array([1.0, 0.0, 0.5, 1.0, 1.0, 0.5, 0.0, 1.0]), np.repeat(np.arange(4), 2)
    same = relative_improvement_interval(x, x, cl)
    assert same.estimate == 0 and np.isnan(same.low) and "no spread" in same.note
    zero = relative_improvement_interval(x, np.zeros(8), cl)
    assert np.isnan(zero.estimate) and "Uniform scores 0" in zero.note
    one = relative_improvement_interval(x, x[::-1], np.zeros(8))
    assert np.isnan(one.high) and "too few" in one.note and one.clusters == 1
    three = relative_improvement_interval(x[:6], x[::-1][:6], cl[:6])  # 3 prompts: no interval holds
    assert np.isnan(three.high) and three.note == "too few pairs for an interval that holds, n = 6 in 3 clusters " \
        "(needs 4 clusters)"


# Issue 7, item 6: both coverage events, on folds by response, and the weights of right and wrong votes.


def _responses(rng, n_resp, k, flip):
    """``n_resp`` responses of ``k`` criteria; each template flips the truth at the criterion's rate."""
    truth = rng.integers(0, 2, n_resp * k)
    rate = flip(rng, truth.size)
    votes = np.where(rng.random((truth.size, N)) < rate[:, None], 1 - truth[:, None], truth[:, None])
    return votes.mean(axis=1), truth, np.repeat(np.arange(n_resp), k)


def test_coverage_folds_keep_a_response_whole_and_both_events_hold():
    rng = np.random.default_rng(9)
    v, y, resp = _responses(rng, 400, 5, lambda r, n: r.uniform(0, 0.45, n))
    fold, k = response_folds(resp, 5, seed=0)
    assert k == 5 and all(len(set(fold[resp == g])) == 1 for g in range(400))  # no response split
    assert np.bincount(fold[::5]).tolist() == [80] * 5  # responses dealt evenly
    assert response_folds(["x", "x", "y", "z"], 5)[1] == 3  # fewer responses than folds: the folds used
    cov = coverage_table(v, y, resp, alphas=(0.05, 0.1, 0.2, 0.3, 0.5))
    assert (cov["folds"], cov["prompts"], cov["criteria"]) == (5, 400, 2000) and "responses" not in cov
    for row in cov["rows"]:
        assert row["theorem"] <= row["validity"] <= row["alpha"] + 0.02, row
    p_vote, p_true = held_out_p_values(v, y, fold)
    correct = (v >= 0.5) == y
    np.testing.assert_array_equal(p_vote[correct], p_true[correct])  # why (a) <= (b) always
    assert correct.sum() < len(v) and cov["rows"][-1]["theorem"] < cov["rows"][-1]["validity"]
    tiny = coverage_table(v[:3], y[:3], ["r"] * 3)
    assert tiny["folds"] == 1 and tiny["rows"] == [] and "nothing to hold out" in tiny["note"]


def test_unstable_wrong_votes_get_low_weights_auroc_above_one_half():
    rng = np.random.default_rng(10)
    v, y, resp = _responses(rng, 300, 5, lambda r, n: np.where(r.random(n) < 0.4, 0.4, 0.02))
    w = coverage_table(v, y, resp)["weights"]
    assert w["wrong"]["n"] > 50 and w["correct"]["n"] + w["wrong"]["n"] == 1500
    assert w["wrong"]["mean_weight"] < w["correct"]["mean_weight"] and w["auroc"] > 0.6 and not w["note"]
    one = weight_separation([0.2, 0.9], [True, True])
    assert np.isnan(one["auroc"]) and "only correct votes" in one["note"] and one["wrong"]["n"] == 0


# Issue 14, item 9: coverage folds by prompt (a prompt's criteria are shared word for word by its
# responses), and issue 17, item 5: the capped calibration set is a seeded draw spread over prompts.


def _calibration_votes(n_prompts=12, per_prompt=3, k=4, seed=11):
    """A calibration table as URW's evaluate reads it: every response to a prompt carries the
    same ``k`` criterion texts (InfoBench's shape), with template soft scores and labels."""
    import pandas as pd

    rng = np.random.default_rng(seed)
    rows = []
    for p in range(n_prompts):
        for r in range(per_prompt):
            for q in range(k):
                y = int(rng.integers(0, 2))
                v = float(np.mean(np.where(rng.random(N) < 0.2, 1 - y, y)))
                rows.append({"item_id": f"infobench/p{p}/r{r}", "group_id": f"infobench/p{p}",
                             "criterion_id": f"q{q}", "criterion": f"Does answer {p} do thing {q}?",
                             "v_tmpl": v, "label": y})
    return pd.DataFrame(rows)


def _held_out_criteria_seen(cal, fold) -> int:
    """Held-out criteria whose text is in the calibration folds (the other folds)."""
    text, fold = cal["criterion"].to_numpy(), np.asarray(fold)
    return sum(text[i] in set(text[fold != fold[i]]) for i in range(len(text)))


def test_coverage_folds_by_prompt_share_no_prompt_or_criterion_with_calibration():
    cal = _calibration_votes()
    fold, k = response_folds(cal["group_id"], 5, seed=0)
    assert k == 5
    for f in range(k):
        out, cal_folds = cal[fold == f], cal[fold != f]
        assert not set(out["group_id"]) & set(cal_folds["group_id"])  # no prompt on both sides
        assert not set(out["criterion"]) & set(cal_folds["criterion"])  # hence no criterion text
    assert _held_out_criteria_seen(cal, fold) == 0
    by_response, _ = response_folds(cal["item_id"], 5, seed=0)  # the folds before: they leak
    assert _held_out_criteria_seen(cal, by_response) > len(cal) // 2
    cov = coverage_table(cal["v_tmpl"], cal["label"], cal["group_id"], responses=cal["item_id"])
    assert (cov["folds"], cov["prompts"], cov["responses"], cov["criteria"]) == (5, 12, 36, 144)
    one = coverage_table(cal["v_tmpl"][:12], cal["label"][:12], cal["group_id"][:12], responses=cal["item_id"][:12])
    assert one["rows"] == [] and one["note"] == "1 prompt(s): nothing to hold out" and one["responses"] == 3


def test_urw_coverage_check_holds_out_no_criterion_text_it_calibrates_on(monkeypatch):
    """What URW's evaluate runs (``calibration_coverage``), on criteria repeated across the
    responses of a prompt: no held-out criterion's text is in the folds it is calibrated on.
    (Folds by response, as before, held out criteria whose text the calibration folds had.)"""
    import judgecal.evaluate.pairwise as pairwise
    from judgecal.methods.urw import calibration_coverage

    cal = _calibration_votes()
    cal.loc[3, "v_tmpl"] = np.nan  # a criterion without a usable vote is left out of the check
    seen = {}
    real = pairwise.held_out_p_values

    def spy(v, y, fold):
        seen["fold"] = np.asarray(fold)
        return real(v, y, fold)

    monkeypatch.setattr(pairwise, "held_out_p_values", spy)
    cov = calibration_coverage(cal, (0.1, 0.5), seed=0)
    kept = cal[np.isfinite(cal["v_tmpl"])]
    assert cov["criteria"] == len(kept) == len(seen["fold"]) and cov["folds"] == 5
    assert _held_out_criteria_seen(kept, seen["fold"]) == 0
    assert (cov["prompts"], cov["responses"]) == (12, 36)


def test_calibration_draw_is_seeded_spread_over_prompts_and_exactly_n():
    from judgecal.methods.urw import calibration_sample, draw_responses

    # 6 prompts with 1 to 4 responses, three criteria rows each (as load_infobench gives them)
    prompts = {f"g{p}": [f"g{p}/r{r}" for r in range(1 + p % 4)] for p in range(6)}
    items = [i for rs in prompts.values() for i in rs for _ in range(3)]
    groups = [i.split("/")[0] for i in items]
    n_resp = len(set(items))
    for n in (1, 4, 6, 9, n_resp, n_resp + 5):
        a = draw_responses(items, groups, n, seed=3)
        assert a == draw_responses(items, groups, n, seed=3)  # deterministic for a seed
        assert len(a) == min(n, n_resp) == len(set(a)) and set(a) <= set(items)
        got = [i.split("/")[0] for i in a]
        counts = {g: got.count(g) for g in prompts}
        # one per prompt before a second: the counts differ by at most one, except where a
        # prompt has run out of responses
        top = max(counts.values())
        assert all(c >= top - 1 or c == len(prompts[g]) for g, c in counts.items()), counts
        for k, i in enumerate(a):  # the r-th response of a prompt comes after every prompt's (r-1)-th
            r = got[: k + 1].count(got[k])
            assert all(got[:k].count(g) >= r - 1 or got[:k].count(g) == len(prompts[g]) for g in prompts)
    assert len({g.split("/")[0] for g in draw_responses(items, groups, 6, seed=3)}) == 6  # 6 prompts, 6 draws
    draws = {tuple(draw_responses(items, groups, 5, seed=s)) for s in range(8)}
    assert len(draws) > 1  # differs across seeds
    assert calibration_sample(20, 20, 20, 0) == ("20 responses from 20 prompts, drawn with seed 0, "
                                                 "at most one per prompt before a second")
    assert calibration_sample(9, 3, None, 0).startswith("all 9 responses to 3 prompts")


def test_demo_calibration_draw_spans_enough_prompts_for_five_folds():
    """The shipped demo's 20 InfoBench responses come from 20 prompts: the coverage check gets
    its 5 folds by prompt."""
    from judgecal.config import demo_config_path, load_config
    from judgecal.methods.urw import load_calibration

    cfg = load_config(demo_config_path("urw_demo"), runtime=False)
    t = load_calibration(cfg)
    items, prompts = set(t["item_id"].to_pylist()), set(t["group_id"].to_pylist())
    assert len(items) == cfg.urw.calibration_max_responses == 20 and len(prompts) == 20
    assert response_folds(t["group_id"].to_pylist(), 5, cfg.seed)[1] == 5


def test_criteria_stored_with_the_prefix_glued_on_are_read_without_it():
    """Answers an earlier judgecal stored from http and batch judges: "1. Does the response"
    glued before the judge's own "1. ..." (request ids unchanged, so a re-collect reuses them)."""
    from judgecal.rubrics.criteria import ANSWER_PREFIX, parse_criteria

    stored = ANSWER_PREFIX + "1. Does it give a name?\n2. Is the name related to baking?"
    assert parse_criteria(stored, 3) == ["Does it give a name?", "Is the name related to baking?"]
    continued = ANSWER_PREFIX + " answer the question?\n2. Is it short?"  # a prefilled local judge: unchanged
    assert parse_criteria(continued, 3) == ["Does the response answer the question?", "Is it short?"]


def test_weight_separation_with_no_wrong_vote_says_so_instead_of_nan():
    """A small calibration with every held-out vote correct printed 'wrong 0 nan' (a user's finding)."""
    from judgecal.report.figures_urw import coverage_figure
    from judgecal.report.urw import coverage_lines

    cov = {"folds": 2, "criteria": 4, "responses": 2, "prompts": 2, "note": "",
           "rows": [{"alpha": 0.1, "theorem": 0.0, "validity": 0.1}],
           "weights": {"correct": {"n": 4, "mean_weight": 0.5}, "wrong": {"n": 0, "mean_weight": float("nan")},
                       "auroc": float("nan"), "note": "no wrong vote"}}
    lines = coverage_lines(cov)
    wrong = next(ln for ln in lines if ln.lstrip().startswith("wrong"))
    assert "nan" not in wrong and wrong.split()[1:] == ["0", "n/a", "(no", "such", "vote)"]
    fig = coverage_figure({"method": "urw", "results": {"coverage": cov}})
    bars = fig.axes[1].patches
    assert [b.get_height() for b in bars] == [0.5, 0.0]  # no NaN bar: n=0 at the axis
    assert [t.get_text() for t in fig.axes[1].texts] == ["n=4", "n=0"]
    assert all(np.isfinite(t.xy[1]) for t in fig.axes[1].texts)


def test_weight_separation_from_one_wrong_vote_says_it_is_too_few():
    """83 correct votes against 1 wrong one gave "AUROC 0.837" and two bars read as group means
    (a user's finding): the AUROC says how few it rests on, from fewer than MIN_CLUSTERS votes."""
    from judgecal.report.urw import auroc_text

    w = weight_separation(np.r_[np.linspace(0.3, 1.0, 83), 0.4], np.r_[np.ones(83, bool), False])
    assert w["caveat"] == "from 1 wrong vote: too few to read as a separation"
    assert auroc_text(w) == f"{w['auroc']:.3f} (from 1 wrong vote: too few to read as a separation)"
    many = weight_separation(np.r_[np.linspace(0.3, 1.0, 80), [0.1, 0.2, 0.3, 0.4]], np.r_[np.ones(80, bool),
                                                                                         np.zeros(4, bool)])
    assert many["caveat"] == "" and auroc_text(many) == f"{many['auroc']:.3f}"


@pytest.mark.parametrize("call, message", [
    (lambda: SCP(alpha=float("nan")).fit([0.5, 1.0], [0, 1]), "alpha: must be a number in (0, 1), not nan"),
    (lambda: SCP(alpha=1.5).fit([0.5, 1.0], [0, 1]), "alpha: must be a number in (0, 1), not 1.5"),
    (lambda: MondrianSCP(alpha=0).fit([0.5, 1.0], [0, 1], [3, 4]), "alpha: must be a number in (0, 1), not 0"),
    (lambda: BetaBinomial(n_templates=0).raw_weight([0.5]), "n_templates: must be a whole number >= 1, not 0"),
    (lambda: URW().fit(np.ones((4, 6)), [1, 1, 0, 0]), "v_hat: must be one soft score per criterion (1-D, the mean "
                                                       "template vote), not shape (4, 6)"),
    (lambda: URW().fit([0.5, 1.0], [0, 1]).response_scores([0.5, 1.0, 1.0], ["a", "b"]),
     "response: must be one response id per criterion: 3 criteria, (2,) response ids"),
    (lambda: URW.from_dict({"verifier": "x", "urw": {}, "weighters": {}}, "calibration.json"),
     "calibration.json: is a URW study's calibration.json, not one weighter's dict: its URW is under 'urw'"),
])
def test_a_library_users_mistake_with_the_weighters_is_one_line(call, message):
    """Strangers' findings: SCP at alpha NaN, 0 or 1.5 abstained on every criterion; a vote
    matrix and short response ids failed in numpy; a whole calibration.json said 'missing field'."""
    with pytest.raises(InputError) as e:
        call()
    assert message in str(e.value), str(e.value)


def test_the_weighters_have_no_scikit_learn_score():
    """URW.score(v, response) returned (ids, scores): cross_val_score read labels as response ids."""
    assert not any(hasattr(cls, "score") for cls in (URW, SCP, MondrianSCP, BetaBinomial, Uniform, URWSingleVote))


def test_a_judge_repeating_a_criterion_is_said_in_one_line():
    """A judge that repeated a criterion left its prompt with fewer than asked, without a word
    (a user's finding); a fallback prompt (no usable answer) is not counted as short."""
    import pyarrow as pa

    from judgecal.rubrics.criteria import criteria_from_answers, short_generation_line

    answers = pa.table({"group_id": ["p1", "p2", "p3"], "parse_status": ["ok", "ok", "failed"],
                        "raw_text": ["1. Does it greet the user?\n2. does it greet the user?\n3. Is it one sentence?",
                                     "1. Does it greet the user?\n2. Is it one sentence?\n3. Is it polite enough?",
                                     None]})
    prompts = {"p1": "Say hi to the user.", "p2": "Say hello politely.", "p3": "Say nothing."}
    generated = criteria_from_answers(answers, prompts, 3)
    assert generated["p1"] == (["Does it greet the user?", "Is it one sentence?"], "generated")
    assert generated["p3"][1] == "fallback"
    line = short_generation_line(generated, prompts, 3)
    assert line.startswith("1 of 3 prompts got fewer than 3 distinct criteria") and "'Say hi to the user.'" in line
    assert short_generation_line(generated, prompts, 2) == ""


def test_methods_that_dropped_nothing_are_said_in_one_word():
    """Every URW method listed "0 evaluation, 0 calibration criteria; 0 response(s)" once the log
    counted the evaluation responses beside the dropped ones (the URW demo's README block, "none")."""
    from judgecal.report.urw import dropped_lines

    none = {"evaluation_criteria": 0, "calibration_criteria": 0, "unscored_responses": 0, "abstained_responses": 0,
            "evaluation_responses": 40}
    res = {"methods": [{"method": "Uniform", "dropped": none},
                       {"method": "SCP", "dropped": {**none, "abstained_responses": 40}}]}
    assert dropped_lines(res) == ["criteria with no usable vote (dropped, never made into a vote): none",
                                  "responses on which the method abstained on every criterion:",
                                  "  SCP: 40 of 40 evaluation responses (each scored by the uniform mean of its votes)"]
    res["methods"][0]["dropped"] = {**none, "unscored_responses": 2, "evaluation_criteria": 3}
    assert dropped_lines(res)[:2] == ["criteria with no usable vote (dropped, never made into a vote):",
                                      "  Uniform: 3 evaluation, 0 calibration criteria; 2 response(s) left with none "
                                      "(pairs tie)"]
