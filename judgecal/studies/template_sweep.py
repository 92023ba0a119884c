"""URW's template-count sweep: pairwise accuracy against N, the number of paraphrase
templates whose votes make the soft score, over every subset of the active templates.

For each subset T the soft score is the mean parsed vote over T, URW is calibrated on the
calibration criteria with it and scores the evaluation responses; each pair's outcome (1,
a half on a tie, 0) is then averaged over all subsets of one size. The interval at N is a
cluster bootstrap over prompts of those per-pair averages (the same units and resampling as
the main URW table), so it describes this pair sample, with n pairs in c prompts beside it;
the min and max columns show how much the choice of templates moves accuracy at that N.
The subsets of one size are one chunk of work, solved here or as Ray Tune trials
(``[tune] mode``, :mod:`judgecal.studies.tune`) by the same function.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from itertools import combinations

import numpy as np
import pandas as pd

from judgecal.calibrate.urw import URW
from judgecal.evaluate.pairwise import accuracy, pair_outcomes, prompt_clusters
from judgecal.report.sections import Metric, Section


def template_votes(answered, active: tuple[str, ...]) -> pd.DataFrame:
    """(item, criterion) x template greedy votes (NaN: no parsed answer)."""
    from judgecal.rubrics.votes import votes

    df = votes(answered)
    df = df[(df["temperature"] == 0) & df["template"].isin(active)]
    return df.pivot_table(index=["item_id", "criterion_id"], columns="template", values="vote",
                          aggfunc="mean", dropna=False).reindex(columns=list(active))


@dataclass
class SweepData:
    """A sweep's shared arrays (integer codes, so :func:`judgecal.studies.tune.grid_digest`
    reads them by their bytes). Index -1 in a row or item code points at an all-NaN row."""
    votes: np.ndarray  # (keys + 1, templates) greedy votes; the last row NaN
    cal_rows: np.ndarray  # calibration criteria -> row of ``votes``
    labels: np.ndarray
    ev_rows: np.ndarray  # evaluation criteria -> row of ``votes``
    ev_items: np.ndarray  # evaluation criteria -> item code
    pair_a: np.ndarray  # pairs -> item code of a, b (-1: an item with no criteria)
    pair_b: np.ndarray
    preferred: np.ndarray  # "a" | "b" as 1 | 0


def sweep_data(votes: pd.DataFrame, cal_keys: pd.DataFrame, ev_keys: pd.DataFrame, pairs: pd.DataFrame) -> SweepData:
    rows = pd.Series(np.arange(len(votes)), index=votes.index)

    def row_of(keys):
        return rows.reindex(pd.MultiIndex.from_frame(keys[["item_id", "criterion_id"]])).fillna(-1).to_numpy(np.int64)

    items = pd.Index(pd.unique(ev_keys["item_id"]))
    return SweepData(np.vstack([votes.to_numpy(float), np.full((1, votes.shape[1]), np.nan)]),
                     row_of(cal_keys), cal_keys["label"].to_numpy(float), row_of(ev_keys),
                     items.get_indexer(ev_keys["item_id"]).astype(np.int64),
                     items.get_indexer(pairs["item_a"]).astype(np.int64), items.get_indexer(pairs["item_b"]).astype(np.int64),
                     (pairs["preferred"].to_numpy() == "a").astype(np.int8))


def solve_sweep(d: SweepData, subsets: list[tuple[int, ...]]) -> dict:
    """Per template subset (column indices): URW calibrated on the subset's soft scores, each
    pair's outcome (B, pairs); ``fitted`` False where no template of the subset parsed on any
    calibration criterion (no URW to fit; its outcomes are NaN)."""
    n_items = int(d.ev_items.max()) + 1 if len(d.ev_items) else 0
    outcomes = np.full((len(subsets), len(d.pair_a)), np.nan)
    fitted = np.zeros(len(subsets), bool)
    preferred = np.where(d.preferred == 1, "a", "b")
    for b, subset in enumerate(subsets):
        with warnings.catch_warnings():  # a criterion no template of the subset parsed: NaN, as skipna
            warnings.simplefilter("ignore", RuntimeWarning)
            soft = np.nanmean(d.votes[:, list(subset)], axis=1)
        c = soft[d.cal_rows]
        ok = np.isfinite(c)
        if not ok.any():
            continue
        urw = URW().fit(c[ok], d.labels[ok])
        e = soft[d.ev_rows]
        keep = np.isfinite(e)
        keys, scores = urw.response_scores(e[keep], d.ev_items[keep])
        per_item = np.full(n_items + 1, np.nan)  # the last: items with no criteria
        per_item[np.asarray(keys, np.int64)] = scores
        outcomes[b] = pair_outcomes(per_item[d.pair_a], per_item[d.pair_b], preferred)
        fitted[b] = True
    return {"outcomes": outcomes, "fitted": fitted}


def template_sweep(votes: pd.DataFrame, cal_keys: pd.DataFrame, ev_keys: pd.DataFrame, pairs: pd.DataFrame,
                   n_resamples: int, seed: int, runner=None) -> Section:
    """``cal_keys``: calibration (item_id, criterion_id, label); ``ev_keys``: evaluation
    (item_id, criterion_id); ``pairs``: item_a, item_b, preferred, group_id. ``runner``:
    :func:`judgecal.studies.tune.grid_runner`'s (None: solved in this process)."""
    active = list(votes.columns)
    data = sweep_data(votes, cal_keys, ev_keys, pairs)
    work = [(k, list(combinations(range(len(active)), k))) for k in range(1, len(active) + 1)]
    solved = runner(data, work, solve_sweep) if runner is not None else [solve_sweep(data, subs) for _, subs in work]
    clusters = prompt_clusters(pairs["group_id"])
    rows, accs = [], {}
    for (k, _), out in zip(work, solved):
        outs = out["outcomes"][out["fitted"]]
        if not len(outs):
            continue
        accs[k] = [float(o.mean()) for o in outs]
        iv = accuracy(outs.mean(axis=0), clusters, n_resamples, seed)
        rows.append([k, len(outs), Metric.of(iv), min(accs[k]), max(accs[k])])
    n_prompts = len(set(clusters))
    return Section(
        "template_count", "URW accuracy against the number of templates N (every template subset)",
        ["N", "subsets", "accuracy, mean over subsets [95% CI]", "min subset", "max subset"], rows,
        f"per N, each pair's outcome averaged over the subsets of that size, then a cluster bootstrap over "
        f"{n_prompts} prompts ({len(pairs)} pairs): the interval is how much this pair sample could move the "
        "mean, not the spread over subsets (min and max subset show that); URW recalibrated on each subset's "
        "soft scores; templates: "
        f"{', '.join(map(str, active))}",
        {"accuracy_by_subset_size": {str(k): v for k, v in accs.items()}, "templates": active})
