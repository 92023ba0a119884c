"""The diagnostic protocol, its registry, and the long table every diagnostic reads.

A diagnostic declares what the plan must hold (:class:`PlanNeeds`: repeats, neutral clauses,
joint probes), which the PRISM study merges into its pool before it plans, so diagnostic
requests are planned, collected, resumed and stored with the study's own; ``run`` turns the
answered requests into one :class:`judgecal.report.sections.Section`. A diagnostic whose
requests are not probes of one item (several candidates in one prompt, another score scale)
returns them from ``plans`` as :class:`DiagnosticPlan` s: each is its own plan file and
response store in the workspace, collected after the study's own through the same pipeline
(resumable, retried, progress), and read back by ``ctx.answered_plan(name)``. Diagnostic requests are
never PRISM features (their families are ``bank.NOT_FEATURE_FAMILIES``), but repeats are
runs, and PRISM averages the runs it collects.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

import numpy as np
import pandas as pd
import pyarrow as pa

from judgecal.diagnostics.bootstrap import CORRELATION, GroupBootstrap
from judgecal.probes.bank import BASELINE
from judgecal.registry import Registry
from judgecal.schemas import PARSE_USABLE

if TYPE_CHECKING:
    from judgecal.config import StudyConfig
    from judgecal.report.sections import Section


@dataclass(frozen=True)
class PlanNeeds:
    runs: int = 1  # at least this many runs of every probe (repeats)
    neutral: bool = False  # the bank's neutral clauses
    joint_pairs: int = 0  # joint probes over this many attribute pairs
    injection: bool = False  # instructions to the judge inside the content
    own_plans: tuple = ()  # what sizes the diagnostic's own plans (recorded in the plan spec)

    def merge(self, other: "PlanNeeds") -> "PlanNeeds":
        return PlanNeeds(max(self.runs, other.runs), self.neutral or other.neutral,
                         max(self.joint_pairs, other.joint_pairs), self.injection or other.injection,
                         self.own_plans + other.own_plans)


@dataclass(frozen=True)
class DiagnosticPlan:
    """Requests a diagnostic collects beside the study's own, in a plan and store of its own.
    ``table``'s rows carry at least request_id, item_id, group_id, probe_id and run (the keys
    a collect reads); ``renderer`` is a render-stage object (``subset``, ``render_table``)."""

    name: str  # plan ``<name>.parquet``, responses ``<name>_responses/`` in the workspace
    table: "pa.Table"
    renderer: object
    prompt_chars: int  # of all its prompts, for ``judgecal show``'s estimate
    completion_tokens: int  # the most tokens all its answers may take
    note: str  # what the requests are, e.g. "12 documents x 4 orders x 1 run"

    @property
    def plan_file(self) -> str:
        return own_plan_files(self.name)[1]

    @property
    def store(self) -> str:
        return own_plan_files(self.name)[0]


def own_plan_files(name: str) -> tuple[str, str]:
    """(response store, plan file) of a diagnostic's own plan in the workspace."""
    return f"{name}_responses", f"{name}.parquet"


@dataclass
class DiagnosticContext:
    cfg: "StudyConfig"
    answered: "pa.Table"  # plan ⋈ responses, every request of the study
    long: pd.DataFrame = field(default=None)  # :func:`long_responses`
    read_plan: object = None  # name -> answered table of a :class:`DiagnosticPlan` (the runner's)
    items: "pa.Table" = None  # the study's items (with ``target``), for diagnostics that score agreement
    read_texts: object = None  # request ids -> {id: raw_text}; default: the study's response store

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

    def answered_plan(self, name: str) -> "pa.Table":
        """A diagnostic's own plan ⋈ its responses (refused while any request is unanswered)."""
        if self.read_plan is None:
            raise RuntimeError(f"no reader for diagnostic plan {name!r}")
        return self.read_plan(name)

    def answer_texts(self, request_ids) -> dict[str, str]:
        """The judge's text of these answered requests (``answered`` carries no text: read here,
        for the few a diagnostic asks about); {} where it cannot be read (no request ids, no store)."""
        import pyarrow.compute as pc

        ids = pa.array([str(i) for i in request_ids], pa.string())
        if not len(ids):
            return {}
        if "raw_text" in self.answered.column_names:
            t = self.answered.select(["request_id", "raw_text"])
            t = t.filter(pc.is_in(t["request_id"].cast(pa.string()), value_set=ids))
        elif self.read_texts is not None:
            return self.read_texts(ids.to_pylist())
        else:  # the study's own store
            from judgecal.methods.prism import STORE
            from judgecal.pipeline.answered import best_texts
            from judgecal.pipeline.store import PartStore
            from judgecal.workspace import Workspace

            t = best_texts(PartStore(Workspace(self.cfg.output).child(STORE)), ids)  # no store: no rows
        return dict(zip(t["request_id"].cast(pa.string()).to_pylist(), t["raw_text"].to_pylist()))

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

    # optional: def plans(self, cfg, items) -> list[DiagnosticPlan]: requests of its own


BUILTIN_DIAGNOSTICS = ("judgecal.diagnostics.reliability", "judgecal.diagnostics.injection", "judgecal.diagnostics.order",
                       "judgecal.diagnostics.resolution")
DIAGNOSTICS = Registry("diagnostic", BUILTIN_DIAGNOSTICS, "judgecal.diagnostics", "[diagnostics].run")


def register(diagnostic: Diagnostic) -> Diagnostic:
    return DIAGNOSTICS.register(diagnostic)


def plan_needs(cfg: "StudyConfig") -> PlanNeeds:
    """What the study's diagnostics add to its pool."""
    needs = PlanNeeds()
    for name in cfg.diagnostics.run:
        needs = needs.merge(DIAGNOSTICS.lookup(name).needs(cfg))
    return needs


def diagnostic_plans(cfg: "StudyConfig", items: "pa.Table") -> list[DiagnosticPlan]:
    """The requests the study's diagnostics collect in plans of their own, in ``run`` order."""
    out = []
    for name in cfg.diagnostics.run:
        d = DIAGNOSTICS.lookup(name)
        out += d.plans(cfg, items) if hasattr(d, "plans") else []
    return out


def long_responses(answered: "pa.Table", reading: str) -> pd.DataFrame:
    """One row per answered request: its keys, ``value`` (the reading; NaN when unusable) and
    ``delta`` (value minus the same item's baseline in the same run)."""
    cols = ["item_id", "group_id", "probe_id", "attribute", "direction", "strength", "run", "score",
            "expected_score", "parse_status"]
    df = answered.select(cols + [c for c in ("family", "request_id") if c in answered.column_names]).to_pandas()
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


def within_document_spearman(scores: pd.Series, target: dict, group_of: dict, gb: "GroupBootstrap"):
    """Mean over documents of the within-document Spearman of ``scores`` (indexed by item id)
    with the human target: the study's uncalibrated-agreement rule (``within_group``)."""
    from judgecal.evaluate.metrics import within_group

    scores = scores.dropna()
    per = within_group(scores.to_numpy(float), [target[i] for i in scores.index],
                       [group_of[i] for i in scores.index]).per_group
    return gb.mean_metric(np.array([per.get(g, np.nan) for g in gb.ids], float),
                          "where the target ties or fewer than 2 candidates have a score", CORRELATION)


