"""Score resolution (PRISM §D.6): does a finer scale let the judge tell more apart?

The same judge, items and probes are asked on each scale of ``[diagnostics] scales`` (the
study's own scale is read from the study's requests; the others are a plan of their own: the
baseline and the pool's property probes at its first strength, the first run). Reported per
scale, each a mean over documents with a document-bootstrap 95% interval:

* tied pairs: the share of a document's candidate pairs whose baseline scores are equal (a
  tie says nothing about which is better);
* zero probe responses: the share of property probes whose score equals the baseline's
  (a probe that cannot move the score is no feature);
* uncalibrated agreement: within-document Spearman of the baseline with the human target.

All read the parsed score (the judge's own number; an expected score is continuous and
would never tie), so the rows compare what each scale's answers can resolve.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa

from judgecal.diagnostics.base import (
    DiagnosticContext,
    DiagnosticPlan,
    PlanNeeds,
    long_responses,
    register,
    within_document_spearman,
)
from judgecal.diagnostics.bootstrap import SHARE, GroupBootstrap
from judgecal.probes.bank import BASELINE, PROPERTY
from judgecal.report.sections import Section
from judgecal.scale import ScoreScale

PLAN_NAME = "scales"


def resolution_probes(cfg):
    """The baseline and the pool's property probes at its first strength."""
    from judgecal.methods.prism import pool_probes

    _, probes = pool_probes(cfg)
    strength = cfg.pool.strengths[0]
    return [p for p in probes if p.probe_id == BASELINE or (p.family == PROPERTY and p.strength == strength)]


def other_scales(cfg) -> list[ScoreScale]:
    return [s for s in map(ScoreScale.parse, cfg.diagnostics.scales) if s != cfg.scale]


class ScaleRenderer:
    """Renders a plan whose rows carry a ``scale`` column: each scale's rows as the study's
    probe renderer would on that scale, back in the plan's row order."""

    def __init__(self, items: pa.Table, probes, scales: list[ScoreScale]):
        from judgecal.probes import ProbeRenderer

        self.by_scale = {str(s): ProbeRenderer(items, probes, s) for s in scales}
        self.items, self.probes = items, probes

    def subset(self, item_ids) -> "ScaleRenderer":
        out = ScaleRenderer.__new__(ScaleRenderer)
        out.by_scale = {k: r.subset(item_ids) for k, r in self.by_scale.items()}
        out.items, out.probes = self.items, self.probes
        return out

    def render_table(self, rows: pa.Table, with_meta: bool = False) -> pa.Table:
        scale = np.asarray(rows["scale"].to_pylist())
        parts, index = [], []
        for name, renderer in self.by_scale.items():
            ix = np.nonzero(scale == name)[0]
            if len(ix):
                parts.append(renderer.render_table(rows.take(pa.array(ix)), with_meta))
                index.append(ix)
        back = np.argsort(np.concatenate(index), kind="stable")
        return pa.concat_tables(parts).take(pa.array(back))

    def longest_prompts(self):
        from judgecal.methods.prism import longest_prompts

        for name in self.by_scale:
            yield from longest_prompts(self.items, self.probes, ScoreScale.parse(name))


class Resolution:
    name = "resolution"
    title = "Score resolution"

    def needs(self, cfg) -> PlanNeeds:
        return PlanNeeds(own_plans=((PLAN_NAME, *map(str, other_scales(cfg))),))

    def plans(self, cfg, items) -> list[DiagnosticPlan]:
        from judgecal.methods.base import completion_limit
        from judgecal.probes import build_plan
        from judgecal.probes.templates import PromptTemplate, template_for

        scales, probes = other_scales(cfg), resolution_probes(cfg)
        if not scales:
            return []
        p = cfg.pool
        parts = [build_plan(items, probes, 1, s, cfg.engine.identity, p.temperature, p.seed) for s in scales]
        table = pa.concat_tables([t.append_column("scale", pa.array([str(s)] * t.num_rows)) for s, t in zip(scales, parts)])
        head = sum(len(template_for(r["task"]).render_head(r["source"], r["content"], scales[0]))
                   for r in items.select(["task", "source", "content"]).to_pylist())
        chars = len(scales) * (len(probes) * head + items.num_rows * sum(len(PromptTemplate.clause_text(q.clause))
                                                                           for q in probes))
        note = f"{items.num_rows} items x {len(probes)} probes x scales {', '.join(map(str, scales))}, 1 run"
        # a score answer as the study's own plan bounds it (8 had been guessed: the CPU judge reads 1)
        return [DiagnosticPlan(PLAN_NAME, table, ScaleRenderer(items, probes, scales), chars,
                               table.num_rows * completion_limit(cfg.engine), note)]

    def run(self, ctx: DiagnosticContext) -> list[Section]:
        cfg = ctx.cfg
        keep = {q.probe_id for q in resolution_probes(cfg)}
        own = long_responses(ctx.answered, "parsed")
        by_scale = {str(cfg.scale): own[(own["run"] == 0) & own["probe_id"].isin(keep)]}
        if other_scales(cfg):
            other = ctx.answered_plan(PLAN_NAME)
            scale_col = other["scale"].to_pylist()
            other = long_responses(other, "parsed").assign(scale=scale_col)
            by_scale |= {name: rows.drop(columns="scale") for name, rows in other.groupby("scale", sort=False)}
        items = ctx.items.to_pandas()
        target, group_of = dict(zip(items["item_id"], items["target"])), dict(zip(items["item_id"], items["group_id"]))
        gb = GroupBootstrap(items["group_id"], cfg.diagnostics.bootstrap, cfg.seed)
        order = [str(s) for s in sorted({ScoreScale.parse(n) for n in by_scale}, key=lambda s: s.span)]
        rows = [self._row(name, by_scale[name], gb, target, group_of, name == str(cfg.scale)) for name in order]
        return [Section("resolution", f"{self.title}: the same judge and items on each scale",
                        ["scale", "tied pairs [95% CI]", "zero probe responses [95% CI]",
                         "within-document Spearman [95% CI]", "parsed share"], rows,
                        "parsed scores of the baseline and the property probes at strength "
                        f"{cfg.pool.strengths[0]!r}, first run; tied pairs: share of a document's candidate pairs with "
                        "equal baseline scores; zero probe responses: share of property probes that leave the score "
                        "where the baseline put it; every column a mean over documents, document bootstrap, "
                        "n = documents; (study): the study's own scale, read from its requests; parsed share: "
                        "answers with a value on the scale, 'constrained' ones included (the embedded judge reads "
                        "its most likely value where its text holds none, or another number)")]

    @staticmethod
    def _row(name, df: pd.DataFrame, gb: GroupBootstrap, target, group_of, own: bool) -> list:
        base = df[df["probe_id"] == BASELINE].set_index("item_id")["value"]
        tied = {}  # per document: the share of its candidate pairs with equal baseline scores
        for g, v in base.dropna().groupby(base.dropna().index.map(group_of)):
            counts = v.value_counts().to_numpy()
            if len(v) >= 2:
                tied[g] = float((counts * (counts - 1) / 2).sum()) / (len(v) * (len(v) - 1) / 2)
        probes = df[(df["probe_id"] != BASELINE) & df["delta"].notna()]
        zero = probes.assign(z=(probes["delta"] == 0).astype(float)).groupby("group_id")["z"].mean()
        per = (lambda d: np.array([d.get(g, np.nan) for g in gb.ids], float))
        return [f"{name} (study)" if own else name,
                gb.mean_metric(per(tied), "where fewer than 2 candidates have a baseline score", SHARE),
                gb.mean_metric(per(zero.to_dict()), "where no property probe was answered", SHARE),
                within_document_spearman(base, target, group_of, gb), float(df["value"].notna().mean())]


register(Resolution())
