"""Cross-fitting: every item is predicted by a model that never saw its group."""

from __future__ import annotations

from typing import Callable

import numpy as np
from sklearn.model_selection import GroupKFold

from judgecal.errors import InputError


def crossfit_predict(make_estimator: Callable, X, y, groups, n_splits: int = 5, seed: int | None = None):
    """Out-of-group predictions from an outer ``n_splits``-fold split by group, and the fitted
    estimator of each fold. Hyper-parameters are chosen inside each fold's training part.
    ``seed`` shuffles which groups share a fold (None: sklearn's size-balanced assignment)."""
    y, groups = np.asarray(y, float), np.asarray(groups)
    n_groups = len(np.unique(groups))
    if n_groups < n_splits:
        raise InputError("evaluation", f"{n_groups} groups is fewer than the {n_splits} cross-fitting folds")
    pred = np.full(len(y), np.nan)
    fitted = []
    for tr, te in GroupKFold(n_splits=n_splits, shuffle=seed is not None, random_state=seed).split(np.zeros(len(y)), y, groups):
        est = make_estimator().fit(X.iloc[tr], y[tr], groups[tr])
        pred[te] = est.predict(X.iloc[te])
        fitted.append(est)
    return pred, fitted
