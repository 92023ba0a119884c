"""Within-group rank agreement with humans and paired bootstrap intervals over groups."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import stats

METHODS = {"spearman": stats.spearmanr, "kendall": stats.kendalltau}


@dataclass
class GroupCorrelation:
    per_group: dict[str, float]  # NaN where the human target is constant in the group
    left_out: int  # groups left out because the human target is constant (the same for every method)

    @property
    def values(self) -> np.ndarray:
        return np.array(list(self.per_group.values()), dtype=float)

    @property
    def mean(self) -> float:
        v = self.values
        return float(np.nanmean(v)) if np.isfinite(v).any() else float("nan")


def within_group(pred, target, groups, method: str = "spearman") -> GroupCorrelation:
    """Correlation of ``pred`` with ``target`` inside each group.

    Only a group whose human target is constant (nothing to rank) is left out, so every
    method of a table averages the same groups. A method whose prediction is constant in a
    group scores 0 there: it carries no ranking information, which is not the same as
    leaving the group out (that would average each method over different groups)."""
    pred, target, groups = np.asarray(pred, float), np.asarray(target, float), np.asarray(groups)
    corr = METHODS[method]
    per, left_out = {}, 0
    for g in dict.fromkeys(groups.tolist()):
        m = groups == g
        a, b = pred[m], target[m]
        if m.sum() < 2 or np.ptp(b) == 0:
            per[str(g)] = float("nan")
            left_out += 1
        elif np.ptp(a) == 0:
            per[str(g)] = 0.0
        else:
            per[str(g)] = float(corr(a, b).statistic)
    return GroupCorrelation(per, left_out)


@dataclass
class Interval:
    estimate: float
    low: float
    high: float
    n: int  # groups used

    def excludes_zero(self) -> bool:
        return self.low > 0 or self.high < 0

    def __str__(self) -> str:
        return f"{self.estimate:+.3f} [{self.low:+.3f}, {self.high:+.3f}]"


def bootstrap_mean(values, n_resamples: int = 2000, seed: int = 0) -> Interval:
    """Percentile bootstrap 95% interval of the mean of ``values`` (NaNs dropped)."""
    v = np.asarray(values, float)
    v = v[np.isfinite(v)]
    if len(v) < 2:
        return Interval(float(v.mean()) if len(v) else float("nan"), float("nan"), float("nan"), len(v))
    if np.ptp(v) == 0:
        return Interval(float(v[0]), float(v[0]), float(v[0]), len(v))
    res = stats.bootstrap((v,), np.mean, n_resamples=n_resamples, confidence_level=0.95,
                          method="percentile", rng=np.random.default_rng(seed))
    ci = res.confidence_interval
    return Interval(float(v.mean()), float(ci.low), float(ci.high), len(v))


def paired_difference(a: GroupCorrelation, b: GroupCorrelation, n_resamples: int = 2000, seed: int = 0) -> Interval:
    """Bootstrap over groups of mean(a_g - b_g), on groups valid for both."""
    keys = [k for k in a.per_group if np.isfinite(a.per_group[k]) and np.isfinite(b.per_group.get(k, np.nan))]
    d = np.array([a.per_group[k] - b.per_group[k] for k in keys])
    return bootstrap_mean(d, n_resamples, seed)
