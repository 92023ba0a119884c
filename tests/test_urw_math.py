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
from judgecal.evaluate.pairwise import coverage_table, pair_outcomes, relative_improvement

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
    for row in coverage_table(v_hat, truth, alphas=(0.05, 0.1, 0.2, 0.3, 0.5)):
        assert row["rate"] <= row["alpha"] + 0.015, row  # P(true label's weight <= alpha) <= alpha


def test_baselines_on_a_hand_computed_case():
    # one response, three criteria; template soft scores 6/6, 4/6 and 1/6
    v = np.array([1.0, 4 / 6, 1 / 6])
    resp = np.array(["r", "r", "r"])
    assert Uniform().score(np.array([1.0, 1.0, 0.0]), resp)[1][0] == pytest.approx(2 / 3)
    assert TemplateVoteUniform().score(v, resp)[1][0] == pytest.approx(2 / 3)  # votes 1, 1, 0
    # Beta(1,1): (k+1)/(N+2) with k = 6, 4, 5 agreeing templates -> 7/8, 5/8, 6/8
    np.testing.assert_allclose(BetaBinomial(6).raw_weight(v), [7 / 8, 5 / 8, 6 / 8])
    assert BetaBinomial(6).score(v, resp)[1][0] == pytest.approx((7 / 8 + 5 / 8) / (7 / 8 + 5 / 8 + 6 / 8))
    np.testing.assert_allclose(SamplingEnsemble().raw_weight(v), [1.0, 4 / 6, 5 / 6])
    # calibration: nonconformity scores 0, 0, 1/6, 1/2 (N_cal = 4)
    cal_v, cal_y = np.array([1.0, 0.0, 5 / 6, 0.5]), np.array([1, 0, 1, 1])
    urw = URW().fit(cal_v, cal_y)
    # |v - vote| = 0, 1/3, 1/6 -> #{s >= x} = 4, 1, 2 -> p = 5/5, 2/5, 3/5
    np.testing.assert_allclose(urw.raw_weight(v), [1.0, 2 / 5, 3 / 5])
    assert urw.score(v, resp)[1][0] == pytest.approx((1 + 2 / 5) / (1 + 2 / 5 + 3 / 5))
    # SCP at alpha = 0.5: p(1|v), p(0|v) = (1, 1/5), (2/5, 1/5), (1/5, 3/5) -> sets {1}, {}, {0}
    np.testing.assert_allclose(SCP(0.5).fit(cal_v, cal_y).raw_weight(v), [1.0, 0.0, 1.0])
    # SCP abstains on every criterion (both sets empty at 0.5) -> uniform mean of the votes 1, 0
    assert SCP(0.5).fit(cal_v, cal_y).score(np.array([4 / 6, 2 / 6]), np.array(["r", "r"]))[1][0] == 0.5
    # URW-double-dagger weights the given single votes by their p-values
    two = URWSingleVote().fit(cal_v, cal_y)
    base = np.array([1.0, 0.0, 0.0])
    np.testing.assert_allclose(two.score(v, resp, votes=base)[1], [(1.0) / (1.0 + 1 / 5 + 3 / 5)])


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
            s = est.score(vv, resp)[1]
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
    for a, b in zip(back.score(t_v, resp, t_len), est.score(t_v, resp, t_len)):
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
