"""Feature builder: responses -> the wide PRISM table, one row per item.

Columns: ``item_id`` (index), ``group_id``, ``target``, ``baseline`` (the Vanilla score s0,
mean over runs) and, per attribute a, ``a:more`` / ``a:less`` = mean probe score minus s0.
The score read is ``expected_score`` where the engine gave one (continuous: fewer ties and
fewer zero deltas), else the parsed ``score``. Items without a usable baseline are left
out; a missing probe score counts as no change (0). Both are counted in ``FeatureTable``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
import pyarrow as pa

from judgecal.errors import InputError
from judgecal.probes.bank import BASELINE

SCORE_FIELDS = ("expected", "parsed")


@dataclass
class FeatureTable:
    frame: pd.DataFrame
    attributes: list[str]
    dropped_items: int  # no usable baseline score
    filled_deltas: int  # probe score missing, delta set to 0

    @property
    def delta_columns(self) -> list[str]:
        return [f"{a}:{d}" for a in self.attributes for d in ("more", "less")]

    @property
    def X(self) -> pd.DataFrame:
        return self.frame[["baseline", *self.delta_columns]]


def build_features(
    responses: pa.Table,
    items: pa.Table,
    attributes: list[str],
    strength: str = "standard",
    score_field: str = "expected",
) -> FeatureTable:
    if score_field not in SCORE_FIELDS:
        raise InputError("features.score_field", f"unknown value {score_field!r} (use {', '.join(SCORE_FIELDS)})")
    r = responses.select(["item_id", "probe_id", "score", "expected_score", "parse_status"]).to_pandas()
    value = r["score"].astype(float)
    if score_field == "expected":
        value = r["expected_score"].astype(float).where(r["expected_score"].notna(), value)
    r["value"] = value.where(r["parse_status"] != "error")
    means = r.groupby(["item_id", "probe_id"])["value"].mean().unstack("probe_id")
    meta = items.select(["item_id", "group_id", "target"]).to_pandas().set_index("item_id")
    meta = meta[meta.index.isin(means.index)]
    if BASELINE not in means.columns:
        raise InputError("responses", "no baseline responses")
    s0 = means[BASELINE].reindex(meta.index)
    keep = s0.notna()
    frame = meta[keep].copy()
    frame["baseline"] = s0[keep]
    filled = 0
    for a in attributes:
        for d in ("more", "less"):
            pid = f"{a}:{d}:{strength}"
            col = means[pid].reindex(frame.index) if pid in means.columns else pd.Series(np.nan, index=frame.index)
            filled += int(col.isna().sum())
            frame[f"{a}:{d}"] = (col - frame["baseline"]).fillna(0.0)
    return FeatureTable(frame, list(attributes), int((~keep).sum()), filled)
