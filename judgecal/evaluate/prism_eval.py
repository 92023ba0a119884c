"""Held-out evaluation of Vanilla, PRISM and alpha-PRISM on one feature table.

Cross-fitting is repeated over ``fold_seeds`` shuffled fold assignments (one figure from one
split moves with the split: the demo's gain ranged from -0.05 to +0.11 over 30 splits). Each
group's correlation is averaged over the seeds, and the bootstrap interval is over groups of
those averages; beside it the table shows the spread of the per-seed means. Per fold the
chosen penalty is kept, with whether it sits on an edge of the grid (top: the strongest
penalty, next to no correction; bottom: the weakest)."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd
from scipy import stats
from sklearn.base import clone

from judgecal.calibrate.features import FeatureTable
from judgecal.calibrate.prism import DEFAULT_GAMMAS, PRISM
from judgecal.evaluate.crossfit import crossfit_predict
from judgecal.evaluate.metrics import (GroupCorrelation, Interval, bootstrap_mean, paired_difference, rankable,
                                       within_group)
from judgecal.evaluate.pooled import pooled_difference, pooled_interval, pooled_spearman

BASELINE = "Vanilla"


@dataclass
class SeedSpread:
    """A figure's per-fold-seed values: what it does when only the fold assignment changes."""

    values: list[float]

    def to_dict(self, prefix: str) -> dict:
        v = np.asarray(self.values, float)
        return {f"{prefix}_seed_mean": float(v.mean()), f"{prefix}_seed_sd": float(v.std(ddof=1)) if len(v) > 1 else 0.0,
                f"{prefix}_seed_min": float(v.min()), f"{prefix}_seed_max": float(v.max())}


@dataclass
class MethodResult:
    method: str
    spearman: Interval  # over groups of the seed-averaged per-group correlations
    kendall: float
    diff_vs_vanilla: Interval | None  # paired over groups; None for the baselines
    groups_left_out: int
    spearman_seeds: SeedSpread
    diff_seeds: SeedSpread | None = None
    gammas: list[list[float]] = field(default_factory=list)  # per fold seed, per outer fold
    grid: tuple[float, float] | None = None  # the penalty grid's (bottom, top)

    def gamma_edges(self) -> dict:
        flat = [g for seed in self.gammas for g in seed]
        if not flat or self.grid is None or self.grid[0] == self.grid[1]:  # one value: no edge to sit on
            return {"fits": len(flat), "top": 0, "bottom": 0, **({"one_value": True} if self.grid else {})}
        return {"fits": len(flat), "top": sum(g >= self.grid[1] for g in flat),
                "bottom": sum(g <= self.grid[0] for g in flat)}

    def to_dict(self) -> dict:
        sp = self.spearman
        d = {
            "method": self.method,
            "spearman": sp.estimate,
            "spearman_low": sp.low,
            "spearman_high": sp.high,
            "spearman_note": sp.note,
            "kendall": self.kendall,
            "groups": sp.n,
            "unit": sp.unit,
            "groups_left_out": self.groups_left_out,
            "fold_seeds": len(self.spearman_seeds.values),
            **self.spearman_seeds.to_dict("spearman"),
            "gammas": self.gammas,
            "gamma_edges": self.gamma_edges(),
        }
        if self.diff_vs_vanilla is not None:
            dv = self.diff_vs_vanilla
            d |= {"diff": dv.estimate, "diff_low": dv.low, "diff_high": dv.high, "diff_note": dv.note,
                  **({"diff_edge": dv.edge} if dv.edge is not None else {}),
                  **self.diff_seeds.to_dict("diff")}
        return d


def default_estimators(gammas=DEFAULT_GAMMAS, representation: str = "paired", inner_cv: int = 5,
                       fit_intercept: bool = True) -> dict[str, PRISM]:
    common = dict(gammas=gammas, representation=representation, cv=inner_cv, fit_intercept=fit_intercept)
    return {"PRISM": PRISM(learn_baseline=False, **common), "alpha-PRISM": PRISM(learn_baseline=True, **common)}


def _seed_average(per_seed: list[GroupCorrelation]) -> GroupCorrelation:
    keys = per_seed[0].per_group
    avg = {k: float(np.mean([s.per_group[k] for s in per_seed])) for k in keys}
    return GroupCorrelation(avg, per_seed[0].left_out)


def evaluate_prism(
    features: FeatureTable,
    gammas=DEFAULT_GAMMAS,
    representation: str = "paired",
    n_splits: int = 5,
    inner_cv: int = 5,
    n_resamples: int = 2000,
    seed: int = 0,
    fold_seeds: int = 10,
    fit_intercept: bool = True,
    estimators: dict | None = None,
    baselines: dict | None = None,
) -> tuple[list[MethodResult], pd.DataFrame]:
    """Per-method results, and the out-of-group predictions as a long table (one row per item
    and fold seed; the baselines repeat across seeds). ``estimators`` ({name: unfitted
    estimator}, each ``sklearn.base.clone``d per fold; default PRISM and alpha-PRISM from the
    other arguments) are the fitted rows, given the whole feature frame (wrap them in
    :class:`judgecal.calibrate.baselines.OnColumns`); ``{}`` gives the baselines alone.
    ``baselines`` ({name: prediction}) are unfitted rows such as G-Eval. ``Vanilla`` is the baseline s0; when
    the feature table also holds the other reading of the baseline score (parsed or
    expected, when it differs) it is reported as a second baseline row."""
    f = features.frame
    y, groups = f["target"].to_numpy(float), f["group_id"].to_numpy()
    extra = baselines or {}
    baselines = {BASELINE: f["baseline"].to_numpy(float)}
    if "baseline_other" in f.columns and not np.allclose(f["baseline_other"], f["baseline"]):
        baselines[f"{BASELINE} ({features.other_score} score)"] = f["baseline_other"].to_numpy(float)
    baselines |= {name: np.asarray(p, float) for name, p in extra.items()}
    X = features.X if estimators is None else f
    if estimators is None:
        estimators = default_estimators(gammas, representation, inner_cv, fit_intercept)
    seeds = [seed + r for r in range(fold_seeds)]
    preds = {name: [] for name in estimators}
    chosen = {name: [] for name in estimators}
    for s in seeds:
        for name, est in estimators.items():
            p, fitted = crossfit_predict(lambda est=est: clone(est), X, y, groups, n_splits, seed=s)
            preds[name].append(p)
            chosen[name].append([getattr(e, "gamma_", float("nan")) for e in fitted])
    grid = (float(np.min(gammas)), float(np.max(gammas)))
    if one_item_per_group(groups):
        return _pooled_results(baselines, extra, preds, chosen, grid, y, n_resamples, seed), \
            _prediction_table(f, baselines, preds, seeds)
    vanilla = within_group(baselines[BASELINE], y, groups)
    results = []
    for name, p in baselines.items():
        sp = within_group(p, y, groups)
        unfitted = name in extra  # G-Eval and the like: compared with Vanilla like a fitted row
        results.append(MethodResult(name, bootstrap_mean(sp.values, n_resamples, seed, bounds=(-1.0, 1.0)),
                                    within_group(p, y, groups, "kendall").mean,
                                    paired_difference(sp, vanilla, n_resamples, seed) if unfitted else None,
                                    sp.left_out, SeedSpread([sp.mean]),
                                    SeedSpread([sp.mean - vanilla.mean]) if unfitted else None))
    for name in estimators:
        per_seed = [within_group(p, y, groups) for p in preds[name]]
        sp = _seed_average(per_seed)
        kendall = float(np.mean([within_group(p, y, groups, "kendall").mean for p in preds[name]]))
        results.append(MethodResult(
            name, bootstrap_mean(sp.values, n_resamples, seed, bounds=(-1.0, 1.0)), kendall,
            paired_difference(sp, vanilla, n_resamples, seed), sp.left_out,
            SeedSpread([s.mean for s in per_seed]), SeedSpread([s.mean - vanilla.mean for s in per_seed]),
            chosen[name], grid))
    return results, _prediction_table(f, baselines, preds, seeds)


def one_item_per_group(groups) -> bool:
    """Every group holds one item (one response per prompt): agreement is over all items."""
    _, counts = np.unique(np.asarray(groups).astype(str), return_counts=True)
    return bool(len(counts)) and counts.max() == 1


def _pooled_results(baselines: dict, extra: dict, preds: dict, chosen: dict, grid, y, n_resamples: int,
                    seed: int) -> list[MethodResult]:
    """The methods table over all items (:mod:`judgecal.evaluate.pooled`): the same rows, n = items."""
    van = baselines[BASELINE]
    r_van = pooled_spearman(van, y)
    results = []
    for name, p in baselines.items():
        r = pooled_spearman(p, y)
        unfitted = name in extra
        results.append(MethodResult(name, pooled_interval([p], y), _pooled_kendall(p, y),
                                    pooled_difference([p], van, y, n_resamples, seed) if unfitted else None, 0,
                                    SeedSpread([r]), SeedSpread([r - r_van]) if unfitted else None))
    for name, ps in preds.items():
        per_seed = [pooled_spearman(p, y) for p in ps]
        results.append(MethodResult(name, pooled_interval(ps, y), float(np.mean([_pooled_kendall(p, y) for p in ps])),
                                    pooled_difference(ps, van, y, n_resamples, seed), 0, SeedSpread(per_seed),
                                    SeedSpread([r - r_van for r in per_seed]), chosen[name], grid))
    return results


def _pooled_kendall(pred, y) -> float:
    pred = rankable(pred)
    return 0.0 if np.ptp(pred) == 0 else float(stats.kendalltau(pred, y).statistic)


def _prediction_table(f: pd.DataFrame, baselines: dict, preds: dict, seeds: list[int]) -> pd.DataFrame:
    frames = []
    for r, s in enumerate(seeds):
        frames.append(pd.DataFrame({"item_id": f.index, "group_id": f["group_id"].to_numpy(),
                                    "target": f["target"].to_numpy(), "fold_seed": s, **baselines,
                                    **{name: p[r] for name, p in preds.items()}}))
    return pd.concat(frames, ignore_index=True)
