"""Within-group rank agreement with humans, and studentized bootstrap intervals (over groups,
or over clusters such as prompts)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import stats

METHODS = {"spearman": stats.spearmanr, "kendall": stats.kendalltau}
# Predictions equal to this many significant digits (of the largest) rank as ties: items with
# equal features get equal predictions, and another summation order (the subset engine's moments,
# rows in another order) broke those ties by floating noise, moving a 6-group gain from +0.120
# to +0.103 (a user's finding)
TIE_DIGITS = 10


def rankable(pred) -> np.ndarray:
    """``pred`` as rank correlations read it: rounded to :data:`TIE_DIGITS` significant digits
    of its largest magnitude (relative: predictions on any scale keep their order)."""
    p = np.asarray(pred, float)
    finite = np.abs(p[np.isfinite(p)])
    top = float(finite.max()) if finite.size else 0.0
    if top == 0.0:
        return p
    return np.round(p, TIE_DIGITS - 1 - int(np.floor(np.log10(top))))


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
    pred, target, groups = rankable(pred), np.asarray(target, float), np.asarray(groups)
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
    n: int  # values averaged (groups, pairs)
    unit: str = "groups"
    clusters: int | None = None  # resampled clusters when the bootstrap is clustered
    # a degenerate outcome, said instead of a zero-width or undefined interval (NaN bounds); or,
    # beside finite bounds, which interval they are when not the bootstrap-t (percentile fallback)
    note: str = ""
    edge: float | None = None  # a difference's bound past this is past what a correlation reaches (the figure marks it)

    def excludes_zero(self) -> bool:
        return self.low > 0 or self.high < 0

    def size(self) -> str:
        """``n = 20`` or ``n = 60 pairs in 20 prompts``."""
        return f"n = {self.n}" + (f" in {self.clusters} clusters" if self.clusters is not None else "")

    def __str__(self) -> str:
        if self.note and not np.isfinite(self.low):
            return f"{self.estimate:+.3f} ({self.note})"
        note = f" ({self.note})" if self.note else ""
        return f"{self.estimate:+.3f} [{self.low:+.3f}, {self.high:+.3f}] {self.size()}{note}"


RESAMPLE_CHUNK = 2_000_000  # resampled cells per step: bounds memory for large n


def _resample(sums, counts, estimate, n_resamples, rng):
    """Over resampled clusters: the ratios m* = sum(sums) / sum(counts), their bootstrap-t
    statistics (m* - m) / se*, and how many resamples had no spread (se* = 0)."""
    c = len(sums)
    ms, ts, flat = [], [], 0
    step = max(1, RESAMPLE_CHUNK // c)
    for start in range(0, n_resamples, step):
        idx = rng.integers(0, c, (min(step, n_resamples - start), c))
        s, k = sums[idx], counts[idx]
        keep = k.sum(1) > 0  # a resample with nothing to divide by has no statistic: left out
        s, k = s[keep], k[keep]
        m = s.sum(1) / k.sum(1)
        se = ratio_se(s, k, m[:, None])
        flat += int(np.sum(se == 0))
        with np.errstate(divide="ignore", invalid="ignore"):
            # a resample with no spread has se* = 0: its t is +-inf (or 0 when it hits the estimate)
            t = np.where(se > 0, (m - estimate) / se, np.sign(m - estimate) * np.inf)
        ms.append(m)
        ts.append(np.nan_to_num(t, nan=0.0, posinf=np.inf, neginf=-np.inf))
    return np.concatenate(ms), np.concatenate(ts), flat


def ratio_se(sums, counts, mean):
    """Standard error of sum(s)/sum(k) over clusters (linearised; the usual SE with ddof=1
    when every cluster holds one value)."""
    c = sums.shape[-1]
    resid = sums - mean * counts
    return np.sqrt(c / (c - 1) * np.sum(resid**2, axis=-1)) / np.sum(counts, axis=-1)


def ratio_interval(sums, counts, estimate: float, se: float, n_resamples: int, seed: int,
                   bounds: tuple[float, float] | None = None) -> tuple[float, float, str]:
    """95% interval of the ratio sum(sums) / sum(counts) over clusters: (low, high, note).

    The bootstrap-t (``se`` the linearised standard error, :func:`ratio_se`; order statistics,
    ``inverted_cdf``, no interpolation between +-inf) with an empty note; or, when it cannot
    be formed, the percentile interval of the same resamples with a note that says so and
    why: a bound is infinite (over 2.5% of the resamples have no spread, t* = +-inf) or lies
    outside ``bounds``, the statistic's range. No bound is ever clipped to the range's edge."""
    m, t, flat = _resample(sums, counts, estimate, n_resamples, np.random.default_rng(seed))
    return studentized_interval(estimate, se, m, t, flat, bounds)


def studentized_interval(estimate: float, se: float, m: np.ndarray, t: np.ndarray, flat: int,
                         bounds: tuple[float, float] | None = None) -> tuple[float, float, str]:
    """The 95% bootstrap-t interval from the resamples' statistics ``m`` and their t values
    ``t`` (+-inf for the ``flat`` resamples with no spread), or the percentile interval of
    ``m`` with a note where it cannot be formed (see :func:`ratio_interval`)."""
    q_low, q_high = np.quantile(t, [0.975, 0.025], method="inverted_cdf")
    with np.errstate(invalid="ignore"):
        low, high = float(estimate - q_low * se), float(estimate - q_high * se)
    # short: the note sits in a table cell beside the interval
    spread = f", {flat}/{len(t)} resamples flat" if flat else ""
    if not (np.isfinite(low) and np.isfinite(high)):
        note = f"percentile; bootstrap-t unbounded{spread}"
    elif bounds is not None and (low < bounds[0] or high > bounds[1]):
        side = "lower" if low < bounds[0] else "upper"
        note = f"percentile; bootstrap-t {side} bound out of range{spread}"
    else:
        return low, high, ""
    p_low, p_high = np.quantile(m, [0.025, 0.975], method="inverted_cdf")
    return float(p_low), float(p_high), note


EQUAL_WITHIN = 1e-12  # values this close are one value: differences of correlations computed two ways
# the fewest clusters whose 95% interval holds: by simulation bootstrap-t covers 0.93-0.95 from
# n = 4 and 0.70-0.77 at n = 3 (tests/test_evaluate.py::test_interval_coverage_from_the_fewest_clusters)
MIN_CLUSTERS = 4


def value_order(*columns) -> np.ndarray:
    """An order of clusters by their values alone (to 9 decimals; the first column first, ties
    by the next): resamples drawn over clusters in it are the same for the same data in any row
    order and under any ids (drawn in file order, bounds moved up to 0.03 at 6 groups)."""
    return np.lexsort(tuple(np.round(np.asarray(c, float), 9) for c in reversed(columns)))


def bootstrap_mean(values, n_resamples: int = 2000, seed: int = 0, clusters=None, unit: str = "groups",
                   bounds: tuple[float, float] | None = None) -> Interval:
    """95% studentized (bootstrap-t) interval of the mean of ``values`` (NaNs dropped).

    Why bootstrap-t: at n = 10 a percentile bootstrap covers about 0.89 (normal data) and
    0.85 (skewed) for a nominal 0.95; bootstrap-t covers 0.95 and 0.93-0.94 (see
    tests/test_evaluate.py::test_interval_coverage_at_n_10). With ``clusters`` whole clusters
    are resampled (pairs that share a prompt move together) and the mean is the ratio
    sum / count over the resampled clusters. ``bounds`` is the statistic's range: where the
    bootstrap-t cannot be formed inside it (a bound infinite because many resamples have no
    spread, or beyond the range) the interval is the percentile one and its ``note`` says so
    (:func:`ratio_interval`); no bound is clipped. A degenerate outcome (every value equal, or
    fewer than :data:`MIN_CLUSTERS` clusters, where no interval holds) gets a ``note`` and NaN
    bounds instead of an interval."""
    v = np.asarray(values, float)
    keep = np.isfinite(v)
    labels = np.asarray(clusters)[keep] if clusters is not None else np.arange(keep.sum())
    v = v[keep]
    n = len(v)
    _, idx = np.unique(labels, return_inverse=True)
    sums, counts = np.bincount(idx, weights=v), np.bincount(idx).astype(float)
    order = value_order(sums, counts)
    sums, counts = sums[order], counts[order]
    n_clusters = len(sums) if clusters is not None else None
    est = round(float(v.mean()), 12) + 0.0 if n else float("nan")  # -1e-17 printed "-0.000" (a user's finding)
    if len(sums) < MIN_CLUSTERS:  # a "95%" interval at n = 3 covered 0.74 (a user saw one)
        return Interval(est, float("nan"), float("nan"), n, unit, n_clusters,
                        f"too few {unit} for an interval that holds, n = {n}"
                        + (f" in {len(sums)} clusters (needs {MIN_CLUSTERS} clusters)" if clusters is not None
                           else f" (needs {MIN_CLUSTERS})"))
    if np.ptp(v) <= EQUAL_WITHIN:  # equal but for rounding (a user's finding: [-7e-17, 1e-16] printed as an interval)
        return Interval(est, float("nan"), float("nan"), n, unit, n_clusters, f"all {unit} equal {est:g}, n = {n}")
    low, high, note = ratio_interval(sums, counts, est, float(ratio_se(sums, counts, est)), n_resamples, seed, bounds)
    low, high = (round(x, 12) + 0.0 for x in (low, high))  # a bound of -1.1e-16 printed "-0.000"
    return Interval(est, low, high, n, unit, n_clusters, note)


def paired_difference(a: GroupCorrelation, b: GroupCorrelation, n_resamples: int = 2000, seed: int = 0) -> Interval:
    """Bootstrap over groups of mean(a_g - b_g), on groups valid for both. A correlation is at
    most 1, so on these groups the difference is at most 1 - mean(b) (at least -1 - mean(b)); a
    bootstrap-t bound past that stays (falling back to the percentile interval there cut coverage
    to 0.79-0.85 at 4-6 groups, by a second reader's simulation) and its note says how far a
    correlation reaches: a user read "+0.131 [-0.051, +1.116] n=6" as PRISM near 2."""
    keys = [k for k in a.per_group if np.isfinite(a.per_group[k]) and np.isfinite(b.per_group.get(k, np.nan))]
    d = np.array([a.per_group[k] - b.per_group[k] for k in keys])
    iv = bootstrap_mean(d, n_resamples, seed, bounds=(-2.0, 2.0))
    if keys and np.isfinite(iv.low) and not iv.note:
        base = float(np.mean([b.per_group[k] for k in keys]))
        if iv.high > 1.0 - base or iv.low < -1.0 - base:
            # a correlation of 1 (or -1) on every group: the cell was long, and a user read past it
            edge, most = (1.0 - base, "most") if iv.high > 1.0 - base else (-1.0 - base, "least")
            iv.note = f"bootstrap-t; {edge:+.3f} is the {most} possible here"
            iv.edge = edge
    return iv
