"""PRISM and alpha-PRISM: ridge corrections of a judge's baseline score from probe deltas.

PRISM minimises, with an unpenalised intercept c,

    (1/n) sum_i (s0_i - y_i - c - D_i . beta)^2 + gamma * m * ||beta||^2,   y_hat = s0 - c - D . beta

where D is the design built from the probe deltas (see ``representation``) and m is the
mean of the squared training design entries D_ij^2, so gamma is relative to the size of
the deltas. ``learn_baseline=True`` (alpha-PRISM) also fits the baseline coefficient,
unpenalised: y_hat = alpha * s0 - c - D . beta.

Solved in closed form: the unpenalised columns ([1] or [1, s0]) are projected out
(Frisch-Waugh-Lovell), one SVD of the remaining design gives beta for every gamma at once,
and the unpenalised coefficients follow by least squares. With several ``gammas`` the
penalty is chosen by ``cv``-fold cross-validation grouped by ``groups`` on the training
data only (lowest mean squared error; ties go to the larger penalty).

Representations of the deltas, per attribute a with columns ``a:more`` (D+) and ``a:less`` (D-):
  paired  [D+, D-]                         (default)
  half    [(D+ - D-) / 2]
  taylor  [D+, D-, D+^2, D-^2]             a diagonal quadratic in the observed contrasts:
                                           no cross-attribute terms (judgecal's definition)
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from sklearn.base import BaseEstimator, RegressorMixin
from sklearn.model_selection import GroupKFold
from sklearn.utils.validation import check_is_fitted

from judgecal.errors import InputError

BASELINE_COL = "baseline"
DEFAULT_GAMMAS = tuple(float(g) for g in np.logspace(-3, 3, 13))
REPRESENTATIONS = ("paired", "half", "taylor")


def _split_columns(X, representation: str) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """Baseline vector, design matrix and design column names from a feature table."""
    if isinstance(X, pd.DataFrame):
        if BASELINE_COL not in X.columns:
            raise InputError("features", f"missing column {BASELINE_COL!r}")
        names = [c for c in X.columns if c.endswith(":more") or c.endswith(":less")]
        s0 = X[BASELINE_COL].to_numpy(float)
        paired = X[names].to_numpy(float)
    else:
        arr = np.asarray(X, dtype=float)
        s0, paired = arr[:, 0], arr[:, 1:]
        names = [f"x{j // 2}:{'more' if j % 2 == 0 else 'less'}" for j in range(paired.shape[1])]
    if not np.all(np.isfinite(s0)) or not np.all(np.isfinite(paired)):
        raise InputError("features", "contain NaN or infinite values")
    if representation == "paired":
        return s0, paired, names
    attrs = [n[: -len(":more")] for n in names if n.endswith(":more")]
    idx = {n: j for j, n in enumerate(names)}
    for a in attrs:
        if f"{a}:less" not in idx:
            raise InputError("features", f"attribute {a!r} has a ':more' column but no ':less' column")
    plus = paired[:, [idx[f"{a}:more"] for a in attrs]]
    minus = paired[:, [idx[f"{a}:less"] for a in attrs]]
    if representation == "half":
        return s0, (plus - minus) / 2, [f"{a}:half" for a in attrs]
    if representation == "taylor":
        design = np.hstack([plus, minus, plus**2, minus**2])
        cols = [f"{a}:more" for a in attrs] + [f"{a}:less" for a in attrs]
        return s0, design, cols + [f"{c}^2" for c in cols]
    raise InputError("representation", f"unknown representation {representation!r} (use {', '.join(REPRESENTATIONS)})")


def _ridge_path(s0, D, y, gammas, learn_baseline):
    """(theta, beta) for every gamma: theta = [-c] or [-c, alpha], beta the delta coefficients."""
    n = len(y)
    U = np.column_stack([np.ones(n), s0]) if learn_baseline else np.ones((n, 1))
    t = y if learn_baseline else y - s0
    P = -D
    m = float(np.mean(D**2)) if D.size else 1.0
    m = m if m > 0 else 1.0
    Q, _ = np.linalg.qr(U)
    Pt = P - Q @ (Q.T @ P)
    tt = t - Q @ (Q.T @ t)
    V, S, Wt = np.linalg.svd(Pt, full_matrices=False)
    proj = V.T @ tt
    g = np.asarray(gammas, dtype=float)[:, None]
    betas = (Wt.T @ ((S / (S**2 + n * g * m)) * proj).T).T  # (n_gammas, p)
    rest = t[None, :] - betas @ P.T  # what the unpenalised columns must explain
    thetas = np.linalg.lstsq(U, rest.T, rcond=None)[0].T  # (n_gammas, k)
    return thetas, betas, m


def _predict(s0, D, theta, beta, learn_baseline):
    base = theta[..., 1:2] * s0 if learn_baseline else s0
    return base + theta[..., 0:1] - beta @ D.T


class PRISM(RegressorMixin, BaseEstimator):
    """Probe-based residual calibration (see module docstring for the objective).

    Parameters: ``gammas`` (one value or a grid), ``learn_baseline`` (alpha-PRISM),
    ``representation`` (paired | half | taylor), ``cv`` (folds for choosing gamma).
    Learned: ``gamma_``, ``coef_`` (beta), ``intercept_`` (c), ``alpha_``,
    ``penalty_scale_`` (m), ``cv_mse_`` (per gamma, or None), ``design_names_``.
    """

    def __init__(self, gammas=DEFAULT_GAMMAS, learn_baseline: bool = False, representation: str = "paired", cv: int = 5):
        self.gammas = gammas
        self.learn_baseline = learn_baseline
        self.representation = representation
        self.cv = cv

    def fit(self, X, y, groups=None):
        s0, D, names = _split_columns(X, self.representation)
        y = np.asarray(y, dtype=float)
        if len(y) != len(s0):
            raise InputError("y", f"has {len(y)} values for {len(s0)} rows")
        if not np.all(np.isfinite(y)):
            raise InputError("y", "contains NaN or infinite values")
        gammas = np.atleast_1d(np.asarray(self.gammas, dtype=float))
        if gammas.size == 0 or np.any(gammas < 0):
            raise InputError("gammas", "must be one or more non-negative numbers")
        self.cv_mse_ = None
        if gammas.size > 1:
            if groups is None:
                raise InputError("groups", "needed to choose gamma by grouped cross-validation")
            groups = np.asarray(groups)
            n_groups = len(np.unique(groups))
            if n_groups < 2:
                raise InputError("groups", "need at least 2 groups to cross-validate gamma")
            mse = np.zeros(gammas.size)
            for tr, va in GroupKFold(n_splits=min(self.cv, n_groups)).split(s0, y, groups):
                th, be, _ = _ridge_path(s0[tr], D[tr], y[tr], gammas, self.learn_baseline)
                pred = _predict(s0[va], D[va], th, be, self.learn_baseline)
                mse += ((pred - y[va]) ** 2).mean(axis=1) * len(va)
            self.cv_mse_ = mse / len(y)
            best = np.flatnonzero(self.cv_mse_ <= self.cv_mse_.min() * (1 + 1e-12))
            self.gamma_ = float(gammas[best].max())
        else:
            self.gamma_ = float(gammas[0])
        th, be, m = _ridge_path(s0, D, y, [self.gamma_], self.learn_baseline)
        self.coef_ = be[0]
        self.intercept_ = float(-th[0, 0])
        self.alpha_ = float(th[0, 1]) if self.learn_baseline else 1.0
        self.penalty_scale_ = m
        self.design_names_ = names
        return self

    def predict(self, X):
        check_is_fitted(self, "coef_")
        s0, D, names = _split_columns(X, self.representation)
        if names != self.design_names_:
            raise InputError("features", "columns differ from the ones PRISM was fitted on")
        return self.alpha_ * s0 - self.intercept_ - D @ self.coef_

    def objective(self, X, y) -> float:
        """The training objective at the fitted coefficients (for checks and diagnostics)."""
        s0, D, _ = _split_columns(X, self.representation)
        r = self.alpha_ * s0 - np.asarray(y, float) - self.intercept_ - D @ self.coef_
        return float(np.mean(r**2) + self.gamma_ * self.penalty_scale_ * self.coef_ @ self.coef_)
