"""Held-out evaluation of Vanilla, PRISM and alpha-PRISM on one feature table."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from judgecal.calibrate.features import FeatureTable
from judgecal.calibrate.prism import DEFAULT_GAMMAS, PRISM
from judgecal.evaluate.crossfit import crossfit_predict
from judgecal.evaluate.metrics import Interval, bootstrap_mean, paired_difference, within_group


@dataclass
class MethodResult:
    method: str
    spearman: Interval
    kendall: float
    diff_vs_vanilla: Interval | None  # paired over groups; None for Vanilla itself
    groups_left_out: int
    gammas: list[float] = field(default_factory=list)  # chosen per outer fold

    def to_dict(self) -> dict:
        d = {
            "method": self.method,
            "spearman": self.spearman.estimate,
            "spearman_low": self.spearman.low,
            "spearman_high": self.spearman.high,
            "kendall": self.kendall,
            "groups": self.spearman.n,
            "groups_left_out": self.groups_left_out,
            "gammas": self.gammas,
        }
        if self.diff_vs_vanilla is not None:
            d |= {"diff": self.diff_vs_vanilla.estimate, "diff_low": self.diff_vs_vanilla.low,
                  "diff_high": self.diff_vs_vanilla.high}
        return d


METHODS = {
    "PRISM": dict(learn_baseline=False),
    "alpha-PRISM": dict(learn_baseline=True),
}


def evaluate_prism(
    features: FeatureTable,
    gammas=DEFAULT_GAMMAS,
    representation: str = "paired",
    n_splits: int = 5,
    inner_cv: int = 5,
    n_resamples: int = 2000,
    seed: int = 0,
) -> tuple[list[MethodResult], dict[str, np.ndarray]]:
    """Per-method results and the out-of-group predictions (``Vanilla`` is the baseline s0)."""
    f = features.frame
    X, y, groups = features.X, f["target"].to_numpy(float), f["group_id"].to_numpy()
    preds = {"Vanilla": f["baseline"].to_numpy(float)}
    chosen = {"Vanilla": []}
    for name, kw in METHODS.items():
        def make(kw=kw):
            return PRISM(gammas=gammas, representation=representation, cv=inner_cv, **kw)

        preds[name], fitted = crossfit_predict(make, X, y, groups, n_splits)
        chosen[name] = [e.gamma_ for e in fitted]
    vanilla = within_group(preds["Vanilla"], y, groups)
    results = []
    for name, p in preds.items():
        sp = within_group(p, y, groups)
        kd = within_group(p, y, groups, "kendall")
        diff = None if name == "Vanilla" else paired_difference(sp, vanilla, n_resamples, seed)
        results.append(MethodResult(name, bootstrap_mean(sp.values, n_resamples, seed), kd.mean, diff,
                                    sp.left_out, chosen[name]))
    return results, preds
