import numpy as np
import pandas as pd
from scipy import stats

from judgecal.evaluate import bootstrap_mean, crossfit_predict, paired_difference, within_group


def test_within_group_matches_scipy_and_averages_one_set_of_groups():
    rng = np.random.default_rng(1)
    groups = np.repeat(["a", "b", "c", "d"], 6)
    target = rng.normal(size=24)
    target[18:] = 3.0  # group d: the human target ties throughout, nothing to rank
    pred = target + rng.normal(size=24)
    pred[12:18] = 2.0  # group c: a constant prediction, no ranking information
    wg = within_group(pred, target, groups)
    assert wg.left_out == 1 and np.isnan(wg.per_group["d"])
    assert wg.per_group["c"] == 0.0  # scored 0, not left out
    assert wg.per_group["a"] == stats.spearmanr(pred[:6], target[:6]).statistic
    assert wg.mean == np.mean([wg.per_group["a"], wg.per_group["b"], 0.0])
    kd = within_group(pred, target, groups, "kendall")
    assert kd.per_group["b"] == stats.kendalltau(pred[6:12], target[6:12]).statistic
    # every method of a table averages the same groups, so the difference of the means is
    # the mean of the paired differences
    other = within_group(target + rng.normal(size=24), target, groups)
    assert np.isclose(other.mean - wg.mean, np.nanmean(other.values - wg.values))


def test_bootstrap_interval_brackets_the_mean_and_pairs_by_group():
    rng = np.random.default_rng(2)
    v = rng.normal(0.3, 0.2, 60)
    iv = bootstrap_mean(v, n_resamples=1000)
    assert iv.low < v.mean() < iv.high and iv.excludes_zero() and iv.n == 60
    groups = np.repeat(np.arange(30), 5)
    target = rng.normal(size=150)
    good, bad = target + rng.normal(0, 0.2, 150), target + rng.normal(0, 2.0, 150)
    d = paired_difference(within_group(good, target, groups), within_group(bad, target, groups), 1000)
    assert d.estimate > 0 and d.excludes_zero()


class GroupSpy:
    """An estimator that remembers the groups it was fitted on."""

    def fit(self, X, y, groups):
        self.seen = set(groups)
        return self

    def predict(self, X):
        return np.full(len(X), float(len(self.seen)))


def test_crossfit_never_predicts_a_group_it_trained_on():
    groups = np.repeat(np.arange(10), 4)
    X = pd.DataFrame({"g": groups})
    pred, fitted = crossfit_predict(GroupSpy, X, np.zeros(40), groups, n_splits=5)
    assert len(fitted) == 5 and np.all(pred == 8)
    for est in fitted:
        assert len(est.seen) == 8
    tested = [set(range(10)) - e.seen for e in fitted]
    assert set().union(*tested) == set(range(10))
