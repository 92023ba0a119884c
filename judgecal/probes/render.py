"""Renders PRISM requests into judge prompts (the render stage; see pipeline/render.py)."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

from judgecal.pipeline.render import Rendered
from judgecal.probes.bank import Probe
from judgecal.probes.templates import template_for
from judgecal.scale import ScoreScale


class ProbeRenderer:
    """Item text from the items table + the probe's clause, in the item's task template.
    Human targets are not kept: nothing rendered can carry them to an engine."""

    def __init__(self, items: pa.Table, probes: list[Probe], scale: ScoreScale):
        self.items = items.select(["item_id", "task", "source", "content"])
        self.clauses = {p.probe_id: p.clause for p in probes}
        self.scale = scale
        self._by_id = None

    def subset(self, item_ids) -> "ProbeRenderer":
        out = ProbeRenderer.__new__(ProbeRenderer)
        out.items = self.items.filter(pc.is_in(self.items["item_id"], value_set=pa.array(item_ids)))
        out.clauses, out.scale, out._by_id = self.clauses, self.scale, None
        return out

    def render(self, rows: list[dict]) -> list[Rendered]:
        if self._by_id is None:
            self._by_id = {r["item_id"]: r for r in self.items.to_pylist()}
        out = []
        for r in rows:
            it = self._by_id[r["item_id"]]
            tmpl = template_for(it["task"])
            system, user = tmpl.render(it["source"], it["content"], self.clauses[r["probe_id"]], self.scale)
            meta = {"content": it["content"], "attribute": r.get("attribute"), "direction": r.get("direction")}
            out.append(Rendered(system, user, tmpl.answer_prefix, "score", self.scale, meta=meta))
        return out
