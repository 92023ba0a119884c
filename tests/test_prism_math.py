"""PRISM against closed forms: the documented objective, to numerical precision."""

import numpy as np
import pandas as pd
import pytest
from scipy.optimize import minimize
from sklearn.model_selection import GroupKFold

from judgecal.calibrate import PRISM
from judgecal.calibrate.prism import _split_columns
from judgecal.errors import InputError


def make(n=240, attrs=5, seed=0):
    rng = np.random.default_rng(seed)
    D = rng.normal(0, 0.4, size=(n, 2 * attrs))
    s0 = rng.normal(3, 1, n)
    beta = rng.normal(0, 1, 2 * attrs)
    y = 0.9 * s0 - 0.2 - D @ beta + rng.normal(0, 0.3, n)
    names = [f"a{j}:{d}" for j in range(attrs) for d in ("more", "less")]
    X = pd.DataFrame(np.column_stack([s0, D]), columns=["baseline", *names])
    return X, y, np.repeat(np.arange(n // 8), 8)


def objective(theta, s0, D, y, gamma, m, learn):
    c, beta = theta[0], theta[-D.shape[1]:]
    alpha = theta[1] if learn else 1.0
    r = alpha * s0 - y - c - D @ beta
    return np.mean(r**2) + gamma * m * beta @ beta


@pytest.mark.parametrize("learn", [False, True])
@pytest.mark.parametrize("representation", ["paired", "half", "taylor"])
@pytest.mark.parametrize("gamma", [0.0, 0.05, 3.0])
def test_fit_solves_the_normal_equations(learn, representation, gamma):
    X, y, _ = make()
    m = PRISM(gammas=gamma, learn_baseline=learn, representation=representation).fit(X, y)
    s0, D, _ = _split_columns(X, representation)
    n, p = D.shape
    pen_scale = np.mean(D**2)
    assert m.penalty_scale_ == pytest.approx(pen_scale)
    # Normal equations of y ~ U theta_u + (-D) beta with penalty n*gamma*m on beta only.
    U = np.column_stack([np.ones(n), s0]) if learn else np.ones((n, 1))
    A = np.column_stack([U, -D])
    t = y if learn else y - s0
    pen = np.zeros((A.shape[1], A.shape[1]))
    pen[U.shape[1]:, U.shape[1]:] = n * gamma * pen_scale * np.eye(p)
    sol = np.linalg.solve(A.T @ A + pen, A.T @ t)
    np.testing.assert_allclose(m.coef_, sol[U.shape[1]:], atol=1e-9)
    assert m.intercept_ == pytest.approx(-sol[0], abs=1e-9)
    assert m.alpha_ == pytest.approx(sol[1] if learn else 1.0, abs=1e-9)
    # Predictions follow the documented formula.
    np.testing.assert_allclose(m.predict(X), m.alpha_ * s0 - m.intercept_ - D @ m.coef_, atol=1e-12)


@pytest.mark.parametrize("learn", [False, True])
def test_fit_is_the_minimum_of_the_objective(learn):
    X, y, _ = make(n=120, attrs=3)
    m = PRISM(gammas=0.2, learn_baseline=learn).fit(X, y)
    s0, D, _ = _split_columns(X, "paired")
    theta = np.r_[m.intercept_, [m.alpha_] if learn else [], m.coef_]
    f0 = objective(theta, s0, D, y, 0.2, m.penalty_scale_, learn)
    assert m.objective(X, y) == pytest.approx(f0, rel=1e-12)
    res = minimize(objective, theta + 0.1, args=(s0, D, y, 0.2, m.penalty_scale_, learn), method="BFGS",
                   options={"gtol": 1e-10})
    assert f0 <= res.fun + 1e-10
    np.testing.assert_allclose(res.x, theta, atol=1e-5)


def test_gamma_is_chosen_by_grouped_cv_like_a_brute_force_loop():
    X, y, groups = make(n=320)
    grid = np.logspace(-3, 2, 9)
    m = PRISM(gammas=grid, cv=5).fit(X, y, groups)
    mse = []
    for g in grid:
        err = 0.0
        for tr, va in GroupKFold(5).split(X, y, groups):
            fold = PRISM(gammas=g).fit(X.iloc[tr], y[tr])
            err += ((fold.predict(X.iloc[va]) - y[va]) ** 2).sum()
        mse.append(err / len(y))
    np.testing.assert_allclose(m.cv_mse_, mse, rtol=1e-9)
    assert m.gamma_ == grid[int(np.argmin(mse))]
    refit = PRISM(gammas=m.gamma_).fit(X, y)
    np.testing.assert_allclose(refit.coef_, m.coef_)


def test_representations_are_the_documented_designs():
    X, _, _ = make(n=10, attrs=2)
    _, half, names = _split_columns(X, "half")
    np.testing.assert_allclose(half[:, 0], (X["a0:more"] - X["a0:less"]) / 2)
    assert names == ["a0:half", "a1:half"]
    _, tay, names = _split_columns(X, "taylor")
    assert tay.shape[1] == 8
    np.testing.assert_allclose(tay[:, names.index("a1:less^2")], X["a1:less"] ** 2)


def test_large_penalty_shrinks_to_the_mean_offset():
    X, y, _ = make()
    m = PRISM(gammas=1e9).fit(X, y)
    assert np.abs(m.coef_).max() < 1e-6
    assert m.intercept_ == pytest.approx(np.mean(X["baseline"] - y), abs=1e-6)


def test_sklearn_conventions_and_errors():
    X, y, groups = make(n=80)
    est = PRISM(gammas=[0.1, 1.0])
    assert est.get_params()["gammas"] == [0.1, 1.0]
    assert est.fit(X, y, groups) is est
    with pytest.raises(InputError, match="groups"):
        PRISM(gammas=[0.1, 1.0]).fit(X, y)
    bad = X.copy()
    bad.iloc[3, 1] = np.nan
    with pytest.raises(InputError, match="NaN"):
        PRISM(gammas=1.0).fit(bad, y)
    with pytest.raises(InputError, match="baseline"):
        PRISM(gammas=1.0).fit(X.drop(columns="baseline"), y)
