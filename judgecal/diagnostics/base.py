"""The diagnostic protocol, its registry, and the long table every diagnostic reads.

A diagnostic declares what the plan must hold (:class:`PlanNeeds`: repeats, neutral clauses,
joint probes), which the PRISM study merges into its pool before it plans, so diagnostic
requests are planned, collected, resumed and stored with the study's own; ``run`` turns the
answered requests into one :class:`judgecal.report.sections.Section`. Diagnostic requests are
never PRISM features (their families are ``bank.NOT_FEATURE_FAMILIES``), but repeats are
runs, and PRISM averages the runs it collects.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

import numpy as np
import pandas as pd

from judgecal.probes.bank import BASELINE
from judgecal.registry import Registry
from judgecal.schemas import PARSE_USABLE

if TYPE_CHECKING:
    import pyarrow as pa

    from judgecal.config import StudyConfig
    from judgecal.report.sections import Section


@dataclass(frozen=True)
class PlanNeeds:
    runs: int = 1  # at least this many runs of every probe (repeats)
    neutral: bool = False  # the bank's neutral clauses
    joint_pairs: int = 0  # joint probes over this many attribute pairs
    injection: bool = False  # instructions to the judge inside the content

    def merge(self, other: "PlanNeeds") -> "PlanNeeds":
        return PlanNeeds(max(self.runs, other.runs), self.neutral or other.neutral,
                         max(self.joint_pairs, other.joint_pairs), self.injection or other.injection)


@dataclass
class DiagnosticContext:
    cfg: "StudyConfig"
    answered: "pa.Table"  # plan ⋈ responses, every request of the study
    long: pd.DataFrame = field(default=None)  # :func:`long_responses`

    def __post_init__(self):
        if self.long is None:
            self.long = long_responses(self.answered, self.reading)

    @property
    def reading(self) -> str:
        """The score a diagnostic reads (``[diagnostics] reading``); ``auto``: the sample when
        the study samples (a logprob judge's expected score is the same in every run by
        construction), else the fit's reading."""
        if self.cfg.diagnostics.reading != "auto":
            return self.cfg.diagnostics.reading
        return "parsed" if self.cfg.pool.temperature > 0 else self.cfg.fit.score_field

    @property
    def repeat_mode(self) -> str:
        p = self.cfg.pool
        if p.temperature > 0:
            return f"sampled at temperature {p.temperature:g}, seed {p.seed} + run"
        return "greedy (temperature 0): repeats differ only where the engine is not deterministic"


class Diagnostic(Protocol):
    name: str
    title: str

    def needs(self, cfg: "StudyConfig") -> PlanNeeds:
        """The plan rows it reads."""

    def run(self, ctx: DiagnosticContext) -> list["Section"]:
        """Its sections of the results log."""


BUILTIN_DIAGNOSTICS = ("judgecal.diagnostics.reliability", "judgecal.diagnostics.injection")
DIAGNOSTICS = Registry("diagnostic", BUILTIN_DIAGNOSTICS, "judgecal.diagnostics", "[diagnostics].run")


def register(diagnostic: Diagnostic) -> Diagnostic:
    return DIAGNOSTICS.register(diagnostic)


def plan_needs(cfg: "StudyConfig") -> PlanNeeds:
    """What the study's diagnostics add to its pool."""
    needs = PlanNeeds()
    for name in cfg.diagnostics.run:
        needs = needs.merge(DIAGNOSTICS.lookup(name).needs(cfg))
    return needs


def long_responses(answered: "pa.Table", reading: str) -> pd.DataFrame:
    """One row per answered request: its keys, ``value`` (the reading; NaN when unusable) and
    ``delta`` (value minus the same item's baseline in the same run)."""
    cols = ["item_id", "group_id", "probe_id", "attribute", "direction", "strength", "run", "score",
            "expected_score", "parse_status"]
    df = answered.select(cols + (["family"] if "family" in answered.column_names else [])).to_pandas()
    usable = df["parse_status"].isin(PARSE_USABLE)
    parsed = df["score"].astype(float).where(usable)
    if reading == "expected":  # the fit's rule (calibrate.features): the expected score whenever there is one
        df["value"] = df["expected_score"].astype(float).where(df["expected_score"].notna(), parsed)
        df.loc[df["parse_status"] == "error", "value"] = np.nan
    else:
        df["value"] = parsed
    base = df[df["probe_id"] == BASELINE].groupby(["item_id", "run"])["value"].mean()
    df["delta"] = df["value"] - base.reindex(pd.MultiIndex.from_frame(df[["item_id", "run"]])).to_numpy()
    if "family" not in df:
        from judgecal.calibrate.features import family_of

        df["family"] = [family_of(p, d) for p, d in zip(df["probe_id"], df["direction"])]
    return df


class GroupBootstrap:
    """Statistics built from per-document sums, with a percentile bootstrap over documents
    (items of one document resampled together), as screening does."""

    def __init__(self, groups, n_resamples: int, seed: int):
        self.ids, self.ix = np.unique(np.asarray(groups).astype(str), return_inverse=True)
        g = len(self.ids)
        rng = np.random.default_rng(seed)
        self.weights = np.vstack([np.ones(g), rng.multinomial(g, np.full(g, 1 / g), size=n_resamples)]).astype(float)

    def sums(self, group_ix: np.ndarray, values: np.ndarray) -> np.ndarray:
        """(resamples + 1,) weighted totals of ``values`` by the rows' document index (NaN skipped)."""
        ok = np.isfinite(values)
        per_group = np.bincount(group_ix[ok], weights=values[ok], minlength=len(self.ids))
        return self.weights @ per_group

    def interval(self, stat: np.ndarray) -> tuple[float, float, float, str]:
        """Estimate (the unresampled row), the 95% percentile interval of ``stat`` and a note.
        An infinite resample (a zero denominator) stays in (order statistics, no
        interpolation); an undefined one (0/0) is left out and counted in the note."""
        boot = stat[1:]
        undefined = int(np.isnan(boot).sum())
        boot = boot[~np.isnan(boot)]
        if not len(boot):
            return float(stat[0]), float("nan"), float("nan"), "undefined in every resample"
        low, high = np.percentile(boot, [2.5, 97.5], method="inverted_cdf")
        note = f"{undefined}/{len(stat) - 1} resamples undefined, left out" if undefined else ""
        return float(stat[0]), float(low), float(high), note

    def metric(self, stat: np.ndarray):
        """:meth:`interval` as a report cell, n = documents."""
        from judgecal.report.sections import Metric

        est, low, high, note = self.interval(stat)
        return Metric(est, low, high, len(self.ids), note)
