"""URW's template-count sweep: pairwise accuracy against N, the number of paraphrase
templates whose votes make the soft score, over every subset of the active templates.

For each subset T the soft score is the mean parsed vote over T, URW is calibrated on the
calibration criteria with it and scores the evaluation responses; each pair's outcome (1,
a half on a tie, 0) is then averaged over all subsets of one size. The interval at N is a
cluster bootstrap over prompts of those per-pair averages (the same units and resampling as
the main URW table), so it describes this pair sample, with n pairs in c prompts beside it;
the min and max columns show how much the choice of templates moves accuracy at that N.
"""

from __future__ import annotations

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


def _soft(votes: pd.DataFrame, subset) -> pd.Series:
    return votes[list(subset)].mean(axis=1, skipna=True)


def template_sweep(votes: pd.DataFrame, cal_keys: pd.DataFrame, ev_keys: pd.DataFrame, pairs: pd.DataFrame,
                   n_resamples: int, seed: int) -> Section:
    """``cal_keys``: calibration (item_id, criterion_id, label); ``ev_keys``: evaluation
    (item_id, criterion_id); ``pairs``: item_a, item_b, preferred, group_id."""
    active = list(votes.columns)
    cal_ix = pd.MultiIndex.from_frame(cal_keys[["item_id", "criterion_id"]])
    ev_ix = pd.MultiIndex.from_frame(ev_keys[["item_id", "criterion_id"]])
    labels = cal_keys["label"].to_numpy(float)
    clusters = prompt_clusters(pairs["group_id"])
    by_size: dict[int, list[np.ndarray]] = {}
    accs: dict[int, list[float]] = {}
    for k in range(1, len(active) + 1):
        for subset in combinations(active, k):
            soft = _soft(votes, subset)
            c = soft.reindex(cal_ix).to_numpy()
            ok = np.isfinite(c)
            if not ok.any():  # no template of this subset ever parsed on calibration: no URW to fit
                continue
            urw = URW().fit(c[ok], labels[ok])
            e = soft.reindex(ev_ix)
            keep = np.isfinite(e.to_numpy())
            keys, scores = urw.score(e.to_numpy()[keep], ev_keys["item_id"].to_numpy()[keep])
            s = pd.Series(scores, index=keys, dtype=float)
            out = pair_outcomes(s.reindex(pairs["item_a"]).to_numpy(), s.reindex(pairs["item_b"]).to_numpy(),
                                pairs["preferred"].to_numpy())
            by_size.setdefault(k, []).append(out)
            accs.setdefault(k, []).append(float(out.mean()))
    rows = []
    for k, outs in by_size.items():
        iv = accuracy(np.mean(outs, axis=0), clusters, n_resamples, seed)
        rows.append([k, len(outs), Metric(iv.estimate, iv.low, iv.high, iv.n, iv.note), min(accs[k]), max(accs[k])])
    n_prompts = len(set(clusters))
    return Section(
        "template_count", "URW accuracy against the number of templates N (every template subset)",
        ["N", "subsets", "accuracy, mean over subsets [95% CI]", "min subset", "max subset"], rows,
        f"per N, each pair's outcome averaged over the subsets of that size, then a cluster bootstrap over "
        f"{n_prompts} prompts ({len(pairs)} pairs); URW recalibrated on each subset's soft scores; templates: "
        f"{', '.join(map(str, active))}",
        {"accuracy_by_subset_size": {str(k): v for k, v in accs.items()}, "templates": active})
