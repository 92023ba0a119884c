"""Feature builder: answered requests (plan ⋈ responses) -> the wide PRISM table, one row per item.

Columns pivot on the plan's typed columns (attribute, direction, strength; runs are
averaged): ``baseline`` (the Vanilla score s0) and one column per collected probe, holding
the probe's score minus s0:

* ``<attribute>:more`` / ``<attribute>:less`` when the plan has one strength per attribute;
* ``<attribute>@<strength>:more`` / ``...:less`` when it has several (each strength its own
  pair, so every collected request is used);
* ``neutral:<i>`` for neutral controls and ``<family>:<name>`` for one-sided units (one
  column each; ``FeatureTable.families`` says which family a column belongs to).

``FeatureTable.X`` is the baseline and every column but the neutral controls; a study's
design selects fewer (:mod:`judgecal.studies.design`) without rebuilding the table.

The score read is ``expected_score`` where the engine gave one (continuous: fewer ties and
fewer zero deltas), else the parsed ``score``. What happens to answers without a usable
score (a refusal, several numbers, an empty answer: their parse status says which) is the
``[fit] missing`` policy: ``impute`` leaves out items without a usable baseline and counts a
missing probe score as no change (0); ``drop`` leaves out every item missing any score. Above
``[fit] max_missing`` (a share of the requests) the table is refused, whatever the policy.
``FeatureTable.missing`` states the policy and the counts for the results log.
The other reading of the baseline (the parsed score when ``expected`` is used, and the
reverse) is kept as ``baseline_other`` so that Vanilla is reported both ways (the paper's is
the parsed score); where that reading is missing the item takes its group's mean of it (no
ranking information), counted in ``other_filled``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd
import pyarrow as pa

from judgecal.errors import InputError
from judgecal.probes.bank import BASELINE, CRITERION, NEUTRAL, NOT_FEATURE_FAMILIES, PROPERTY
from judgecal.scale import onto, slope
from judgecal.schemas import PARSE_USABLE

SCORE_FIELDS = ("expected", "parsed")
MISSING_POLICIES = {
    "impute": "items without a usable baseline left out; a probe without a usable score counted as no change (0)",
    "drop": "items missing any usable score left out",
}


@dataclass
class FeatureTable:
    frame: pd.DataFrame
    probe_columns: list[str]
    dropped_items: int  # no usable baseline score
    filled_deltas: int  # probe score missing, delta set to 0
    other_score: str = "parsed"  # what ``baseline_other`` holds
    other_filled: int = 0  # items whose other reading was missing
    families: dict[str, str] = field(default_factory=dict)  # column -> property | context | ... | neutral
    missing: dict = field(default_factory=dict)  # the missing-score policy and its counts (missing_summary)
    reading: dict = field(default_factory=dict)  # what a score is and what repeated runs changed (score_reading)

    @property
    def attributes(self) -> list[str]:
        return list(dict.fromkeys(c.rsplit(":", 1)[0] for c in self.probe_columns if c.endswith((":more", ":less"))))

    @property
    def feature_columns(self) -> list[str]:
        """Every probe column that can be a PRISM feature: all but the neutral controls, the
        rubric criteria (the baselines' requests) and the diagnostics' joint probes."""
        return [c for c in self.probe_columns if self.families.get(c) not in NOT_FEATURE_FAMILIES]

    @property
    def criteria(self) -> list[str]:
        """The rubric criteria's columns: each holds the criterion's score minus the baseline."""
        return [c for c in self.probe_columns if self.families.get(c) == CRITERION]

    @property
    def controls(self) -> list[str]:
        return [c for c in self.probe_columns if self.families.get(c) == NEUTRAL]

    @property
    def X(self) -> pd.DataFrame:
        return self.frame[["baseline", *self.feature_columns]]

    def select(self, columns: list[str], groups=None) -> "FeatureTable":
        """Only ``columns`` as probe columns (a design), and only the items of ``groups`` when given."""
        columns = [*columns, *self.criteria]  # the baselines' columns travel with every design
        keep = ["group_id", "target", "baseline", "baseline_other", *columns]
        frame = self.frame[[c for c in keep if c in self.frame.columns]]
        if groups is not None:
            frame = frame[frame["group_id"].astype(str).isin(set(map(str, groups)))]
        return FeatureTable(frame, columns, self.dropped_items, self.filled_deltas, self.other_score,
                            self.other_filled, {c: self.families[c] for c in columns if c in self.families},
                            self.missing, self.reading)


def family_of(probe_id: str, direction, family=None) -> str | None:
    """A probe's family; plans written before families carry none, so it is derived."""
    if family:
        return family
    if probe_id == BASELINE:
        return None
    if direction in ("more", "less"):
        return PROPERTY
    return NEUTRAL if direction == "neutral" else probe_id.split(":", 1)[0]  # criterion:x, role:x, joint:x, ...


def feature_name(attribute, direction, strength, probe_id: str, several_strengths: bool) -> str:
    if direction in ("more", "less") and attribute:
        return f"{attribute}@{strength}:{direction}" if several_strengths else f"{attribute}:{direction}"
    return probe_id


def missing_summary(r: pd.DataFrame, policy: str, max_missing: float, rule: str | None = None,
                    setting: str = "[fit].max_missing") -> dict:
    """How many requests have no usable score (``value`` NaN), why (parse status), and the
    policy applied (``rule``: what it does, by default PRISM's :data:`MISSING_POLICIES`); above
    ``max_missing`` one line naming the ``setting`` refuses the table."""
    without = r[r["value"].isna()]
    by_status = {str(k): int(v) for k, v in without["parse_status"].value_counts().items()}
    out = {"policy": policy, "rule": rule or MISSING_POLICIES[policy], "max_missing": max_missing,
           "requests": len(r), "without_score": len(without), "by_status": by_status, "setting": setting}
    if len(r) and len(without) > max_missing * len(r):
        why = ", ".join(f"{k} {v}" for k, v in by_status.items())
        raise InputError("responses", f"{len(without)} of {len(r)} judge answers ({len(without) / len(r):.1%}) have "
                         f"no usable score ({why}), above {setting} = {max_missing:g}; look at their "
                         "raw_text, or raise max_missing to use the rest")
    return out


def build_features(answered: pa.Table, items: pa.Table, score_field: str = "expected", missing: str = "impute",
                   max_missing: float = 1.0) -> FeatureTable:
    if score_field not in SCORE_FIELDS:
        raise InputError("[fit].score_field", f"unknown value {score_field!r} (use {', '.join(SCORE_FIELDS)})")
    if missing not in MISSING_POLICIES:
        raise InputError("[fit].missing", f"unknown policy {missing!r} (use {' or '.join(MISSING_POLICIES)})")
    cols = ["item_id", "probe_id", "attribute", "direction", "strength", "score", "expected_score", "parse_status"]
    r = answered.select(cols + (["family"] if "family" in answered.column_names else [])).to_pandas()
    value = r["score"].astype(float)
    if score_field == "expected":
        value = r["expected_score"].astype(float).where(r["expected_score"].notna(), value)
    r["value"] = value.where(r["parse_status"].isin(PARSE_USABLE) | (score_field == "expected"))
    r.loc[r["parse_status"] == "error", "value"] = np.nan
    summary = missing_summary(r, missing, max_missing)
    # the expected reading keeps a distribution's score where the text gave none (say, a 9 on
    # 1-5): counted, so the footer's "0 have no usable score" beside out_of_scale 7 reads right
    kept = r[r["value"].notna() & ~r["parse_status"].isin(PARSE_USABLE)]["parse_status"].value_counts()
    summary["expected_kept"] = {str(k): int(v) for k, v in kept.items()}
    parsed = r["score"].astype(float).where(r["parse_status"].isin(PARSE_USABLE))
    r["other"] = parsed if score_field == "expected" else r["expected_score"].astype(float)
    several = r.dropna(subset=["attribute"]).groupby("attribute")["strength"].nunique().gt(1).any()
    probes = r.drop_duplicates("probe_id")
    names = {p.probe_id: feature_name(p.attribute, p.direction, p.strength, p.probe_id, bool(several))
             for p in probes.itertuples() if p.probe_id != BASELINE}
    families = {names[p.probe_id]: family_of(p.probe_id, p.direction, getattr(p, "family", None))
                for p in probes.itertuples() if p.probe_id != BASELINE}
    means = r.groupby(["item_id", "probe_id"])["value"].mean().unstack("probe_id")
    if BASELINE not in means.columns:
        raise InputError("responses", "no baseline responses in the plan")
    meta = items.select(["item_id", "group_id", "target"]).to_pandas().set_index("item_id")
    meta = meta[meta.index.isin(means.index)]
    s0 = means[BASELINE].reindex(meta.index)
    keep = s0.notna()
    if missing == "drop":
        keep &= means.reindex(meta.index).notna().all(axis=1)
    frame = meta[keep].copy()
    frame["baseline"] = s0[keep]
    other = r[r["probe_id"] == BASELINE].groupby("item_id")["other"].mean().reindex(frame.index)
    other_filled = int(other.isna().sum())
    frame["baseline_other"] = other.fillna(other.groupby(frame["group_id"]).transform("mean"))
    frame["baseline_other"] = frame["baseline_other"].fillna(0.0)  # a group with none at all: constant
    filled, deltas = 0, {}
    for pid, name in names.items():
        col = means[pid].reindex(frame.index)
        filled += int(col.isna().sum())
        deltas[name] = (col - frame["baseline"]).fillna(0.0)
    frame = pd.concat([frame, pd.DataFrame(deltas, index=frame.index)], axis=1)  # one concat: 10^2 columns
    other_name = "parsed" if score_field == "expected" else "expected"
    summary |= {"items_left_out": int((~keep).sum()), "deltas_filled": filled}
    return FeatureTable(frame, list(names.values()), int((~keep).sum()), filled, other_name, other_filled, families,
                        summary, score_reading(r[r["item_id"].isin(frame.index)], score_field))


def on_target_scale(feats: FeatureTable, judge: tuple[float, float], target: tuple[float, float]) -> FeatureTable:
    """The table with the judge's scores read linearly onto the target's scale (a 1-5 judge
    of a 0-10 target: t = 0 + 2.5 (s - 1)): the baselines mapped, every probe column (a
    difference of two scores) times the slope. PRISM's baseline enters with slope 1, so on the
    judge's own scale its fit depended on the scales' ratio (a user's finding); rank
    correlations of the baselines are unchanged. The same scales: the table itself."""
    if tuple(judge) == tuple(target):
        return feats
    f = feats.frame.copy()
    for c in ("baseline", "baseline_other"):
        if c in f.columns:
            f[c] = onto(f[c], judge, target)
    f[feats.probe_columns] = f[feats.probe_columns] * slope(judge, target)
    return FeatureTable(f, feats.probe_columns, feats.dropped_items, feats.filled_deltas, feats.other_score,
                        feats.other_filled, feats.families, feats.missing, feats.reading)


def score_reading(r: pd.DataFrame, score_field: str) -> dict:
    """The reading the scores are (``score_field``, and the share of them that were expected
    scores) and, over the fitted items' (item, probe) cells answered in two or more runs, how many cells'
    runs differed: an engine that reads the expected score before sampling anything (the
    llama.cpp judge on a one-token scale) gives the same one in every run, so runs at a
    temperature add nothing to that reading, and the report says so."""
    used = r.dropna(subset=["value"])
    by_cell = used.groupby(["item_id", "probe_id"])["value"]
    runs, spread = by_cell.count(), by_cell.max() - by_cell.min()
    expected = used["expected_score"].notna() if score_field == "expected" else pd.Series(False, index=used.index)
    return {"score_field": score_field, "expected_share": float(expected.mean()) if len(used) else 0.0,
            "cells_with_runs": int((runs > 1).sum()), "cells_runs_differ": int(((runs > 1) & (spread > 1e-9)).sum())}
