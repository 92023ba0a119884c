"""Agreement over all items, for data with one item per group (one response per prompt, say):
there is nothing to rank within a group, so the table's Spearman is over every item, folds
are over items, and intervals are over items (``unit = "items"``).

* a method's Spearman: the mean over fold seeds of the held-out predictions' Spearman with
  the target; interval: Fisher's z with the Bonett-Wright standard error for Spearman,
  sqrt((1 + r^2 / 2) / (n - 3)), an interval that holds at small n (the seed average varies
  less than one seed's r, so it is conservative for it);
* the difference to Vanilla: paired over items (both correlations share the target), the
  percentile interval of the item bootstrap of the difference.

Coverage of both at n = 40 and n = 100 is checked by simulation in tests/test_evaluate.py.
"""

from __future__ import annotations

import numpy as np
from scipy import stats

from judgecal.evaluate.metrics import MIN_CLUSTERS, RESAMPLE_CHUNK, Interval, rankable

UNIT = "items"


def pooled_spearman(pred, target) -> float:
    """Spearman over all items; a constant prediction scores 0 (no ranking information), a
    constant target has nothing to rank (NaN)."""
    pred, target = rankable(pred), np.asarray(target, float)
    if len(pred) < 3 or np.ptp(target) == 0:
        return float("nan")
    if np.ptp(pred) == 0:
        return 0.0
    return float(stats.spearmanr(pred, target).statistic)


def _too_few(n: int) -> str:
    """Why there is no interval, as the grouped tables say it (metrics.MIN_CLUSTERS; Fisher z
    asks n > 3 too), or that the estimate itself is undefined."""
    if n >= MIN_CLUSTERS:
        return f"undefined (a constant target or no prediction), n = {n}"
    return f"too few {UNIT} for an interval that holds, n = {n} (needs {MIN_CLUSTERS})"


def fisher_interval(r: float, n: int) -> Interval:
    if not np.isfinite(r) or n < MIN_CLUSTERS:
        return Interval(r, float("nan"), float("nan"), n, UNIT, note=_too_few(n))
    if abs(r) >= 1:
        return Interval(r, float("nan"), float("nan"), n, UNIT, note=f"perfect rank agreement, n = {n}")
    z, se = np.arctanh(r), np.sqrt((1 + r * r / 2) / (n - 3))
    return Interval(r, float(np.tanh(z - 1.959964 * se)), float(np.tanh(z + 1.959964 * se)), n, UNIT,
                    note="Fisher z")


def pooled_interval(preds: list, target) -> Interval:
    """A method's Spearman over items (``preds``: one prediction per fold seed, averaged)."""
    r = float(np.mean([pooled_spearman(p, target) for p in preds]))
    return fisher_interval(r, len(np.asarray(target)))


def _row_spearman(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Spearman of each row of ``a`` with the same row of ``b`` (ties: average ranks)."""
    ra, rb = stats.rankdata(rankable(a), axis=1), stats.rankdata(b, axis=1)
    ra -= ra.mean(1, keepdims=True)
    rb -= rb.mean(1, keepdims=True)
    den = np.sqrt((ra**2).sum(1) * (rb**2).sum(1))
    with np.errstate(invalid="ignore", divide="ignore"):
        r = (ra * rb).sum(1) / den
    flat_pred = (ra**2).sum(1) == 0
    return np.where(flat_pred & ((rb**2).sum(1) > 0), 0.0, r)  # a constant prediction scores 0


def pooled_difference(preds: list, base, target, n_resamples: int = 2000, seed: int = 0) -> Interval:
    """Mean over seeds of Spearman(pred_s) minus Spearman(base), over items; 95% percentile
    interval of the paired item bootstrap (resamples with a constant target left out)."""
    target, base = np.asarray(target, float), np.asarray(base, float)
    preds = [np.asarray(p, float) for p in preds]
    n = len(target)
    est = float(np.mean([pooled_spearman(p, target) for p in preds]) - pooled_spearman(base, target))
    if n < MIN_CLUSTERS or not np.isfinite(est):
        return Interval(est, float("nan"), float("nan"), n, UNIT, note=_too_few(n))
    rng = np.random.default_rng(seed)
    diffs = []
    step = max(1, RESAMPLE_CHUNK // (n * (len(preds) + 2)))
    for start in range(0, n_resamples, step):
        idx = rng.integers(0, n, (min(step, n_resamples - start), n))
        t = target[idx]
        r_base = _row_spearman(base[idx], t)
        r_pred = np.mean([_row_spearman(p[idx], t) for p in preds], axis=0)
        diffs.append(r_pred - r_base)
    d = np.concatenate(diffs)
    d = d[np.isfinite(d)]
    if len(d) < n_resamples / 2:
        return Interval(est, float("nan"), float("nan"), n, UNIT, note="most resamples have a constant target")
    low, high = np.quantile(d, [0.025, 0.975], method="inverted_cdf")
    return Interval(est, float(low), float(high), n, UNIT, note="percentile")
