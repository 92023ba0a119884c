"""The baselines PRISM is compared against, as estimators on the same feature table.

* **G-Eval** (Liu et al., 2023): one prompt per rubric criterion, the probability-weighted
  score (``expected_score``) of each, averaged over the criteria. No fitting: :func:`geval`.
  judgecal's variant puts the criterion's instruction after the content (so the item's
  prefix is reused) and has no generated chain-of-thought steps.
* **SAJA-style rubric regression**: the criterion ratings as ridge features, the penalty
  chosen by the same grouped cross-validation as PRISM (:class:`RubricRidge`).

:class:`OnColumns` lets every method of a table read the one feature frame: it hands its
estimator only the columns it is defined on, and clones like any scikit-learn estimator.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from sklearn.base import BaseEstimator, RegressorMixin, clone
from sklearn.model_selection import GroupKFold
from sklearn.utils.validation import check_is_fitted

from judgecal.calibrate.prism import BASELINE_COL, DEFAULT_GAMMAS, ridge_shrink
from judgecal.errors import InputError


def criterion_scores(X: pd.DataFrame, criteria: list[str]) -> np.ndarray:
    """The judge's score per criterion: the feature table keeps it as a change from the baseline."""
    return X[criteria].to_numpy(float) + X[BASELINE_COL].to_numpy(float)[:, None]


def geval(X: pd.DataFrame, criteria: list[str]) -> np.ndarray:
    if not criteria:
        raise InputError("[pool].criteria", "G-Eval needs the rubric criteria's responses (set it to true)")
    return criterion_scores(X, criteria).mean(1)


class RubricRidge(RegressorMixin, BaseEstimator):
    """Ridge regression of the target on criterion ratings (``X``: baseline + criterion
    columns as the feature table holds them), with an intercept; the penalty ``gamma`` is
    relative to the mean squared centred rating (as PRISM's) and chosen by grouped CV."""

    def __init__(self, criteria=(), gammas=DEFAULT_GAMMAS, cv: int = 5):
        self.criteria = criteria
        self.gammas = gammas
        self.cv = cv

    @staticmethod
    def _path(R, y, gammas):
        mu, ybar = R.mean(0), y.mean()
        Rc = R - mu
        m = float(np.mean(Rc**2)) or 1.0
        U, S, Vt = np.linalg.svd(Rc, full_matrices=False)
        proj = U.T @ (y - ybar)
        g = np.asarray(gammas, float)[:, None]
        coef = (Vt.T @ (ridge_shrink(S, len(y) * g * m, Rc.shape) * proj).T).T  # (gammas, k)
        return coef, ybar - coef @ mu

    def fit(self, X, y, groups=None):
        R, y = criterion_scores(X, list(self.criteria)), np.asarray(y, float)
        gammas = np.atleast_1d(np.asarray(self.gammas, float))
        if gammas.size > 1:
            groups = np.asarray(groups)
            mse = np.zeros(gammas.size)
            for tr, va in GroupKFold(n_splits=min(self.cv, len(np.unique(groups)))).split(R, y, groups):
                coef, icpt = self._path(R[tr], y[tr], gammas)
                mse += ((R[va] @ coef.T + icpt - y[va][:, None]) ** 2).sum(0)
            best = np.flatnonzero(mse <= mse.min() * (1 + 1e-12))
            self.gamma_ = float(gammas[best].max())
        else:
            self.gamma_ = float(gammas[0])
        coef, icpt = self._path(R, y, [self.gamma_])
        self.coef_, self.intercept_ = coef[0], float(icpt[0])
        return self

    def predict(self, X):
        check_is_fitted(self, "coef_")
        return criterion_scores(X, list(self.criteria)) @ self.coef_ + self.intercept_


class OnColumns(BaseEstimator):
    """``estimator`` fitted and applied on ``columns`` of the frame it is given."""

    def __init__(self, estimator=None, columns=()):
        self.estimator = estimator
        self.columns = columns

    def fit(self, X, y, groups=None):
        self.estimator_ = clone(self.estimator).fit(X[list(self.columns)], y, groups)
        self.gamma_ = getattr(self.estimator_, "gamma_", float("nan"))
        return self

    def predict(self, X):
        check_is_fitted(self, "estimator_")
        return self.estimator_.predict(X[list(self.columns)])
