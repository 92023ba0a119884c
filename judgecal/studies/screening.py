"""Screening units against neutral controls.

A unit moves the judge's score when asked to; a neutral clause ("read carefully") should not,
yet any rewording moves a small judge a little. Per unit the statistic is

    ratio = RMS of the unit's score changes / RMS of the neutral clauses' score changes

over the same items (a property's two columns, a one-sided unit's one, every neutral
clause). Its 95% interval resamples documents (groups) with replacement, so items of one
document move together; it is a percentile interval of the ratio. Checked by simulation
(tests/test_studies.py): under the null of no difference from the controls a lower bound
above 1 occurred in 4.0% of 300 draws at 14 groups (nominal 2.5%; BCa gave 4.3%), and in
1000 draws 9.3% at 4 groups, 5.8% at 6, 4.2% at 8, 3.6% at 10, 5.2% at 12, 3.3% at 14 (a
second reader's sweep): hence at least :data:`MIN_GROUPS` exploration groups. A unit passes
when the rule's value (the lower bound, or the estimate) exceeds the threshold.

The ratio counts every change of the score, a shift of all of a group's scores alike too (a
clause that makes the judge more lenient), which a correction ranked within groups cannot
use: ``within_share`` says how much of a unit's mean square varies within its groups.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from judgecal.errors import InputError

MIN_GROUPS = 8  # below it a null unit passed in 6-9% of draws against a nominal 2.5% (above)
FALSE_PASS_RATE = 0.05  # about what a null unit passed at MIN_GROUPS-14 groups (3.3-5.2%, above)


@dataclass
class ScreenResult:
    units: list[str]
    ratio: np.ndarray
    low: np.ndarray
    high: np.ndarray
    passed: np.ndarray  # bool per unit
    groups: int
    items: int
    control_rms: float
    within_share: np.ndarray  # per unit: the share of its mean square that varies within groups


def _group_sums(values: np.ndarray, group_ix: np.ndarray, n_groups: int) -> tuple[np.ndarray, np.ndarray]:
    """Per group, the sum of squares of ``values`` (items x columns) and how many entries."""
    ss = np.bincount(group_ix, weights=(values**2).sum(1), minlength=n_groups)
    cnt = np.bincount(group_ix, minlength=n_groups) * values.shape[1]
    return ss, cnt.astype(float)


def within_share(values: np.ndarray, group_ix: np.ndarray, n_groups: int) -> float:
    """The share of ``values``' (items x columns) mean square left after each group's mean is
    taken out: what varies within groups. With one item per group, what varies around the mean
    of all items (evaluated over items). NaN where the values are all 0."""
    total = float((values**2).sum())
    counts = np.bincount(group_ix, minlength=n_groups)
    if counts.max() <= 1:  # one item per group: ranked over all items
        centred = values - values.mean(0)
    else:
        means = np.stack([np.bincount(group_ix, weights=values[:, k], minlength=n_groups) / np.maximum(counts, 1)
                          for k in range(values.shape[1])], axis=1)
        centred = values - means[group_ix]
    return float((centred**2).sum()) / total if total > 0 else float("nan")


def screen_units(frame, unit_columns: dict[str, list[str]], controls: list[str], rule: str = "lower_bound",
                 threshold: float = 1.0, n_resamples: int = 2000, seed: int = 0) -> ScreenResult:
    """RMS ratio of every unit against the pooled neutral controls, with a document-bootstrap
    interval; ``frame`` holds the items to screen on (the exploration groups only)."""
    _, group_ix = np.unique(frame["group_id"].to_numpy(), return_inverse=True)
    n_groups = int(group_ix.max()) + 1
    ctrl_ss, ctrl_cnt = _group_sums(frame[controls].to_numpy(float), group_ix, n_groups)
    names = list(unit_columns)
    ss = np.zeros((len(names), n_groups))
    cnt = np.zeros((len(names), n_groups))
    for j, u in enumerate(names):
        ss[j], cnt[j] = _group_sums(frame[unit_columns[u]].to_numpy(float), group_ix, n_groups)
    rng = np.random.default_rng(seed)
    w = rng.multinomial(n_groups, np.full(n_groups, 1 / n_groups), size=n_resamples).astype(float)  # (B, G)

    def ratio(weights):
        ctrl = (weights @ ctrl_ss) / (weights @ ctrl_cnt)
        unit = (weights @ ss.T) / (weights @ cnt.T)
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.sqrt(unit / ctrl[..., None])

    est = ratio(np.ones(n_groups))
    boot = ratio(w)  # (B, units)
    # order statistics, no interpolation: with silent controls a ratio is +inf, never inf - inf
    low, high = np.nanpercentile(boot, [2.5, 97.5], axis=0, method="inverted_cdf")
    value = low if rule == "lower_bound" else est
    shares = np.array([within_share(frame[unit_columns[u]].to_numpy(float), group_ix, n_groups) for u in names])
    return ScreenResult(names, est, low, high, value > threshold, n_groups, len(frame),
                        float(np.sqrt(ctrl_ss.sum() / ctrl_cnt.sum())), shares)


def check_screen_groups(n_explore: int) -> None:
    """Screening passes units by a bootstrap interval over the exploration groups: refused
    below the fewest groups whose interval holds (at 4 a null unit passed in 9.3% of draws)."""
    if n_explore < MIN_GROUPS:
        raise InputError("[design].screen", f"screening bootstraps over the {n_explore} exploration groups and needs "
                         f"{MIN_GROUPS} for an interval that holds; add groups, lower [design].confirmation or set "
                         "screen = false")
