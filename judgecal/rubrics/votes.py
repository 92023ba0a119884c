"""Soft scores per (response, criterion) from answered verify requests (plan ⋈ responses).

Columns of the result: ``v_tmpl`` (mean vote over the active templates at T = 0), ``v_base``
(the base template's vote), ``v_two`` (mean over the first two active templates),
``v_samp`` (mean vote of the T = 0.7 samples), ``n_tmpl`` and ``n_samp`` (answers that parsed,
over the active templates and over the samples: the N of each mean), ``n_unparsed``.
Unparsed or failed answers are left out of each mean and counted. A mean with no parsed
answer is NaN, never a stand-in vote: the caller drops that criterion for every method that
reads the column, and counts it (``usable``).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa

from judgecal.rubrics.templates import TemplateSet
from judgecal.schemas import PARSE_USABLE


def votes(answered: pa.Table) -> pd.DataFrame:
    """One row per answered verify request: its keys, template, temperature and ``vote``
    (the parsed 0/1, NaN where the answer did not parse)."""
    df = answered.select(["item_id", "criterion_id", "template", "temperature", "score", "parse_status"]).to_pandas()
    df["vote"] = df["score"].where(df["parse_status"].isin(PARSE_USABLE))
    return df


def soft_scores(answered: pa.Table, templates: TemplateSet, each: pd.DataFrame | None = None) -> pd.DataFrame:
    """``each``: :func:`votes` of ``answered`` when the caller has it already."""
    df = votes(answered) if each is None else each
    greedy, sampled = df[df["temperature"] == 0], df[df["temperature"] > 0]
    key = ["item_id", "criterion_id"]
    base, two = templates.active[0], templates.active[:2]
    out = pd.DataFrame({
        "v_tmpl": greedy.groupby(key)["vote"].mean(),
        "v_base": greedy[greedy["template"] == base].groupby(key)["vote"].mean(),
        "v_two": greedy[greedy["template"].isin(two)].groupby(key)["vote"].mean(),
        "n_tmpl": greedy.groupby(key)["vote"].count(),
        "n_unparsed": df.groupby(key)["vote"].apply(lambda s: int(s.isna().sum())),
    })
    samp = sampled.groupby(key)["vote"] if len(sampled) else None
    out["v_samp"] = samp.mean().reindex(out.index) if samp is not None else np.nan
    out["n_samp"] = samp.count().reindex(out.index).fillna(0) if samp is not None else 0
    out[["n_tmpl", "n_samp"]] = out[["n_tmpl", "n_samp"]].fillna(0).astype(int)
    return out.reset_index()


def usable(votes: pd.DataFrame, *columns: str) -> np.ndarray:
    """Rows whose ``columns`` all hold a vote (a NaN mean had no parsed answer)."""
    return np.logical_and.reduce([np.isfinite(votes[c].to_numpy(float)) for c in columns])


WEAK_SEPARATION = 0.6  # an AUROC at or below it: the votes barely rank met criteria above unmet ones


def verifier_separation(calibration: pd.DataFrame) -> dict | None:
    """How well the verifier's template votes (``v_tmpl``) rank the labelled met criteria above
    the unmet ones: the AUROC (0.5 is chance) and the counts it stands on; None when the labels
    are all one value (``label_warnings`` says so)."""
    from sklearn.metrics import roc_auc_score

    c = calibration[usable(calibration, "v_tmpl")]
    labels = c["label"].astype(int).to_numpy()
    met = int(labels.sum())
    if met in (0, len(labels)):
        return None
    return {"auroc": float(roc_auc_score(labels, c["v_tmpl"].to_numpy())), "met": met, "not_met": len(labels) - met}


def weak_verifier_lines(separation: dict | None) -> list[str]:
    """A line when the verifier's votes do not tell met from unmet calibration criteria: every
    weight and reward built on them is then noise (a user's finding: a reward of 1.0 for
    right and wrong answers alike, fitted and loaded without a word)."""
    if not isinstance(separation, dict) or not isinstance(separation.get("auroc"), (int, float)) \
            or separation["auroc"] > WEAK_SEPARATION:  # none recorded (or a calibration.json edited by hand)
        return []
    return [f"the verifier's votes rank met above unmet calibration criteria in {separation['auroc']:.2f} of such "
            f"pairs (AUROC, 0.5 is chance; {separation['met']} met, {separation['not_met']} not met): URW's scores, "
            "and rewards from this calibration, carry little or no signal; use a stronger verifier"]


def one_label_lines(met: int, unmet: int) -> list[str]:
    """A line when every calibration label is one value: the p-values then come from criteria
    of one kind only. Said at fit and under the report's table, which had shown a coverage
    breach with no word of it (a user's finding)."""
    if bool(met) == bool(unmet):
        return []
    v, n = (1, met) if met else (0, unmet)
    return [f"every calibration label is {v} ({'met' if v else 'not met'}, {n} criteria): the weights are "
            f"calibrated on {'met' if v else 'unmet'} criteria only; add labelled {'unmet' if v else 'met'} ones"]
