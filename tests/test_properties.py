"""Property tests (hypothesis) of the calibrators: what must hold for any data, not one example.

PRISM (judgecal.calibrate.PRISM), y_hat = alpha s0 - c - D . beta with penalty gamma m ||beta||^2,
m the mean squared design entry (so gamma is relative to the deltas' size):

* row order: the fit does not depend on it. GroupKFold assigns folds from the sorted group
  labels and the group sizes, never from row positions, so even the chosen gamma is the same.
* group labels: with one gamma the groups are not read at all. With a grid, GroupKFold breaks
  ties between groups of one size by label order, so the folds, and with them gamma, stay the
  same under any renaming when the group sizes differ, and under any renaming that keeps the
  labels' order whatever the sizes; a renaming that reorders equal-size groups can move
  them between folds (not asserted).
* shifts (D holds deltas, which a shift of every judge score leaves unchanged): with an
  intercept, scores + b and target + a give predictions + a (PRISM and alpha-PRISM; the
  intercept absorbs a - b, the span of [1, s0] is unchanged). Without an intercept only PRISM
  with a = b (target and scores shifted alike: y - s0 is unchanged) gives predictions + a.
* scales: scores and target times k > 0 give predictions times k, beta and alpha unchanged,
  with or without intercept, for paired and half (the objective is k^2 times the old one at
  the same beta, since m scales by k^2). Not for quadratic (its D^2 columns scale by k^2).
* constant delta columns, a constant baseline, all-zero deltas, groups of 2 items, fewer
  groups than folds: finite coefficients and predictions; with an intercept a constant
  column's coefficient is 0 (it is centred away and only the penalty sees it).

URW's weighters: fitting on the calibration rows in any order gives the same fitted state
and the same weights, bit for bit; a response's score does not depend on the order of its
criteria (exact for the weighters whose weights are integer numerators, see urw.py).
Each property runs 25 examples; the file takes seconds.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from judgecal.calibrate import (
    PRISM,
    SCP,
    URW,
    BetaBinomial,
    MondrianSCP,
    SamplingEnsemble,
    TemplateVoteUniform,
    Uniform,
    URWSingleVote,
)
from judgecal.calibrate.prism import DEFAULT_GAMMAS

# derandomized: CI sees the same 25 examples every run (no float edge case appearing one day at
# random); no example database is written into the checkout
PROPERTY = settings(max_examples=25, deadline=None, derandomize=True, database=None,
                    suppress_health_check=[HealthCheck.too_slow])
GRID = (0.01, 1.0, 100.0)  # a short grid: cross-validated choice, fast


@st.composite
def studies(draw, min_groups=3, max_groups=9, min_size=2, max_size=8, distinct_sizes=False):
    """(X, y, groups): judge scores on 1-5 (rounded to the scale for ties and zero deltas, or
    continuous), deltas of 1-4 attributes, some columns constant, targets on 1-5."""
    n_groups = draw(st.integers(min_groups, max_groups))
    if distinct_sizes:
        sizes = draw(st.lists(st.integers(min_size, max_size + n_groups), min_size=n_groups, max_size=n_groups,
                              unique=True))
    else:
        sizes = draw(st.lists(st.integers(min_size, max_size), min_size=n_groups, max_size=n_groups))
    attrs = draw(st.integers(1, 4))
    rounded = draw(st.booleans())
    constant = draw(st.sets(st.integers(0, 2 * attrs - 1), max_size=2 * attrs))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    n = sum(sizes)
    quality = rng.uniform(1, 5, n)
    feats = rng.normal(size=(n, attrs))
    s0 = np.clip(quality + 0.7 * feats[:, 0] + rng.normal(0, 0.4, n), 1, 5)
    probe = np.clip(s0[:, None] + np.repeat(feats, 2, axis=1) * np.tile([0.5, -0.5], attrs)
                    + rng.normal(0, 0.2, (n, 2 * attrs)), 1, 5)
    if rounded:
        s0, probe = np.round(s0), np.round(probe)
    D = probe - s0[:, None]
    for j in constant:
        D[:, j] = 0.0 if j % 2 else 0.5
    names = [f"a{j}:{d}" for j in range(attrs) for d in ("more", "less")]
    X = pd.DataFrame(np.column_stack([s0, D]), columns=["baseline", *names])
    groups = np.repeat([f"g{k:02d}" for k in range(n_groups)], sizes)
    return X, quality, groups


def fit_predict(X, y, groups, **params):
    m = PRISM(**params).fit(X, y, groups)
    return m, m.predict(X)


def affine(X, k=1.0, b=0.0):
    """Every judge score k s + b: the baseline moves, the deltas scale by k."""
    out = X.copy()
    out["baseline"] = k * X["baseline"] + b
    cols = [c for c in X.columns if c != "baseline"]
    out[cols] = k * X[cols]
    return out


representations = st.sampled_from(["paired", "half", "quadratic"])
gammas = st.sampled_from([0.05, GRID])


def _close(a, b, scale=1.0, rtol=1e-7):
    np.testing.assert_allclose(a, b, rtol=rtol, atol=rtol * scale)


@PROPERTY
@given(studies(), representations, gammas, st.booleans(), st.booleans(), st.randoms(use_true_random=False))
def test_prism_does_not_depend_on_row_order(data, representation, gamma, learn, intercept, rnd):
    X, y, g = data
    params = dict(gammas=gamma, representation=representation, learn_baseline=learn, fit_intercept=intercept, cv=3)
    m, pred = fit_predict(X, y, g, **params)
    perm = np.array(rnd.sample(range(len(y)), len(y)))
    m2, pred2 = fit_predict(X.iloc[perm].reset_index(drop=True), y[perm], g[perm], **params)
    assert m2.gamma_ == m.gamma_
    _close(pred2, pred[perm], scale=5)
    _close(m2.coef_, m.coef_, scale=1 + np.abs(m.coef_).max())
    _close(m2.predict(X), pred, scale=5)


@PROPERTY
@given(studies(distinct_sizes=True), representations, st.booleans(), st.randoms(use_true_random=False))
def test_prism_does_not_depend_on_group_names_when_sizes_differ(data, representation, learn, rnd):
    X, y, g = data
    params = dict(gammas=GRID, representation=representation, learn_baseline=learn, cv=3)
    m, pred = fit_predict(X, y, g, **params)
    names = sorted(set(g))
    renamed = dict(zip(names, rnd.sample([f"h{k}" for k in range(len(names))], len(names))))
    m2, pred2 = fit_predict(X, y, np.array([renamed[x] for x in g]), **params)
    assert m2.gamma_ == m.gamma_
    _close(pred2, pred, scale=5)


@PROPERTY
@given(studies(), representations, st.booleans(), st.integers(0, 1000))
def test_prism_does_not_depend_on_group_names_that_keep_their_order(data, representation, learn, offset):
    X, y, g = data
    params = dict(gammas=GRID, representation=representation, learn_baseline=learn, cv=3)
    m, pred = fit_predict(X, y, g, **params)
    m2, pred2 = fit_predict(X, y, np.array([f"x{int(x[1:]) + offset:06d}" for x in g]), **params)
    assert m2.gamma_ == m.gamma_
    _close(pred2, pred, scale=5)


@PROPERTY
@given(studies(), representations, st.booleans(), st.randoms(use_true_random=False))
def test_prism_with_one_gamma_never_reads_the_groups(data, representation, learn, rnd):
    X, y, g = data
    params = dict(gammas=0.3, representation=representation, learn_baseline=learn)
    _, pred = fit_predict(X, y, g, **params)
    _, pred2 = fit_predict(X, y, np.array(rnd.choices(["p", "q", "r"], k=len(g))), **params)
    np.testing.assert_array_equal(pred2, pred)


@PROPERTY
@given(studies(), representations, gammas, st.booleans(), st.floats(-20, 20), st.floats(-20, 20))
def test_prism_with_intercept_shifts_predictions_with_the_target(data, representation, gamma, learn, a, b):
    X, y, g = data
    params = dict(gammas=gamma, representation=representation, learn_baseline=learn, cv=3)
    m, pred = fit_predict(X, y, g, **params)
    m2, pred2 = fit_predict(affine(X, b=b), y + a, g, **params)
    assert m2.gamma_ == m.gamma_
    _close(pred2, pred + a, scale=5 + abs(a) + abs(b), rtol=1e-6)
    _close(m2.coef_, m.coef_, scale=1 + np.abs(m.coef_).max(), rtol=1e-6)
    if learn:
        assert m2.alpha_ == pytest.approx(m.alpha_, rel=1e-6, abs=1e-6)


@PROPERTY
@given(studies(), representations, gammas, st.floats(-20, 20))
def test_prism_without_intercept_shifts_predictions_when_target_and_scores_shift_alike(data, representation,
                                                                                        gamma, a):
    X, y, g = data
    params = dict(gammas=gamma, representation=representation, fit_intercept=False, cv=3)
    m, pred = fit_predict(X, y, g, **params)
    m2, pred2 = fit_predict(affine(X, b=a), y + a, g, **params)
    assert m2.gamma_ == m.gamma_ and m2.intercept_ == 0.0
    _close(pred2, pred + a, scale=5 + abs(a), rtol=1e-6)


@PROPERTY
@given(studies(), st.sampled_from(["paired", "half"]), gammas, st.booleans(), st.booleans(),
       st.floats(0.01, 100))
def test_prism_scales_predictions_with_scores_and_target(data, representation, gamma, learn, intercept, k):
    X, y, g = data
    params = dict(gammas=gamma, representation=representation, learn_baseline=learn, fit_intercept=intercept, cv=3)
    m, pred = fit_predict(X, y, g, **params)
    m2, pred2 = fit_predict(affine(X, k=k), k * y, g, **params)
    assert m2.gamma_ == m.gamma_
    _close(pred2, k * pred, scale=5 * k, rtol=1e-6)
    _close(m2.coef_, m.coef_, scale=1 + np.abs(m.coef_).max(), rtol=1e-6)  # gamma is relative: beta stays
    assert m2.alpha_ == pytest.approx(m.alpha_, rel=1e-6, abs=1e-6)
    assert m2.penalty_scale_ == pytest.approx(k**2 * m.penalty_scale_, rel=1e-9) or m.penalty_scale_ == 1.0


@PROPERTY
@given(studies(min_groups=2, max_groups=12, min_size=2, max_size=2), representations, st.booleans(),
       st.booleans(), st.booleans())
def test_prism_on_groups_of_two_and_constant_columns_is_finite(data, representation, learn, intercept, flat):
    X, y, g = data
    if flat:  # a judge that gives every item the same score and never moves under a probe
        X = X.copy()
        X.loc[:, :] = 0.0
        X["baseline"] = 3.0
    for gamma in (DEFAULT_GAMMAS, 0.5):
        m = PRISM(gammas=gamma, representation=representation, learn_baseline=learn, fit_intercept=intercept)
        pred = m.fit(X, y, g).predict(X)
        assert np.all(np.isfinite(pred)) and np.all(np.isfinite(m.coef_))
        assert np.isfinite([m.alpha_, m.intercept_, m.penalty_scale_, m.gamma_]).all() and m.penalty_scale_ > 0
        if m.cv_mse_ is not None:
            assert np.all(np.isfinite(m.cv_mse_))
        if intercept and representation != "quadratic":  # centred away: only the penalty sees it
            const = [j for j, c in enumerate(m.design_names_) if np.ptp(_design_column(X, c)) == 0]
            assert np.all(np.abs(m.coef_[const]) <= 1e-8 * (1 + np.abs(m.coef_).max()))


def _design_column(X, name):
    if name.endswith(":half"):
        a = name[: -len(":half")]
        return (X[f"{a}:more"] - X[f"{a}:less"]).to_numpy() / 2
    return X[name].to_numpy()


# -- URW's weighters ------------------------------------------------------------------------

WEIGHTERS = [URW, URWSingleVote, SCP, MondrianSCP, BetaBinomial, Uniform, TemplateVoteUniform, SamplingEnsemble]


@st.composite
def calibration(draw, min_rows=1, max_rows=80):
    """Soft scores k/6 (six templates), 0/1 labels, criterion lengths (ties included)."""
    n = draw(st.integers(min_rows, max_rows))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    v = rng.integers(0, 7, n) / 6
    y = (rng.random(n) < np.where(draw(st.booleans()), v, 0.5)).astype(int)
    strata = rng.integers(3, 3 + draw(st.integers(1, 30)), n).astype(float)
    return v, y, strata


def _fitted(cls, v, y, strata):
    est = cls(alpha=0.2) if cls in (SCP, MondrianSCP) else cls()
    return est.fit(v, y, strata)


@PROPERTY
@given(calibration(), calibration(max_rows=30), st.sampled_from(WEIGHTERS), st.randoms(use_true_random=False))
def test_weighters_do_not_depend_on_calibration_order(cal, query, cls, rnd):
    v, y, s = cal
    perm = np.array(rnd.sample(range(len(v)), len(v)))
    a, b = _fitted(cls, v, y, s), _fitted(cls, v[perm], y[perm], s[perm])
    assert a.to_dict() == b.to_dict()
    qv, _, qs = query
    np.testing.assert_array_equal(a.raw_weight(qv, qs), b.raw_weight(qv, qs))


@PROPERTY
@given(calibration(min_rows=12), calibration(max_rows=40), st.sampled_from(WEIGHTERS),
       st.randoms(use_true_random=False))
def test_response_scores_do_not_depend_on_criterion_order(cal, query, cls, rnd):
    est = _fitted(cls, *cal)
    qv, _, qs = query
    response = np.array([f"r{rnd.randrange(5)}" for _ in qv])
    perm = np.array(rnd.sample(range(len(qv)), len(qv)))
    keys, scores = est.response_scores(qv, response, qs)
    keys2, scores2 = est.response_scores(qv[perm], response[perm], qs[perm])
    np.testing.assert_array_equal(keys2, keys)
    if cls is SamplingEnsemble:  # weights max(v, 1 - v) are fractions: sums in another order, last bits
        np.testing.assert_allclose(scores2, scores, rtol=1e-12, atol=1e-15)
    else:  # integer numerators (or 0/1, or 1): the same bits
        np.testing.assert_array_equal(scores2, scores)
