"""Pairwise preference accuracy (a tie counts one half) with bootstrap intervals over pairs,
and the empirical check of URW's coverage guarantee on held-out calibration folds."""

from __future__ import annotations

import numpy as np
from sklearn.model_selection import KFold

from judgecal.calibrate.urw import URW
from judgecal.evaluate.metrics import Interval, bootstrap_mean


TIE_TOLERANCE = 1e-9  # scores in [0, 1] closer than this are a tie (float noise, never a preference)


def pair_outcomes(score_a, score_b, preferred) -> np.ndarray:
    """1 when the preferred response scores higher, 0.5 on a tie (within TIE_TOLERANCE), 0 otherwise."""
    a, b = np.asarray(score_a, float), np.asarray(score_b, float)
    pref_a = np.asarray(preferred) == "a"
    diff = np.where(pref_a, a - b, b - a)
    return np.where(diff > TIE_TOLERANCE, 1.0, np.where(diff >= -TIE_TOLERANCE, 0.5, 0.0))


def accuracy(outcomes, n_resamples: int = 2000, seed: int = 0) -> Interval:
    return bootstrap_mean(outcomes, n_resamples, seed)


def relative_improvement(method, uniform) -> float:
    """(acc - acc_uniform) / acc_uniform."""
    u = float(np.mean(uniform))
    return (float(np.mean(method)) - u) / u if u else float("nan")


def coverage_table(v_hat, v_true, alphas=(0.05, 0.1, 0.2, 0.3, 0.5), folds: int = 5, seed: int = 0) -> list[dict]:
    """For each alpha, the rate at which the true label's p-value is <= alpha on held-out
    calibration folds (URW fitted on the other folds). The guarantee says rate <= alpha."""
    v, y = np.asarray(v_hat, float), np.asarray(v_true, float)
    pv = np.empty(len(v))
    for tr, te in KFold(n_splits=folds, shuffle=True, random_state=seed).split(v):
        pv[te] = URW().fit(v[tr], y[tr]).p_value(y[te], v[te])
    return [{"alpha": float(a), "rate": float(np.mean(pv <= a)), "n": int(len(v))} for a in alphas]
