"""URW's request plan (response x criterion x template, plus samples) and its renderer."""

from __future__ import annotations

import functools

import pyarrow as pa
import pyarrow.compute as pc

from judgecal.ids import key128, stable_hash
from judgecal.pipeline.render import Rendered, RowRenderer
from judgecal.probes.plan import probe_key, request_ids
from judgecal.rubrics.templates import ANSWER_PREFIX, TemplateSet
from judgecal.scale import ScoreScale
from judgecal.schemas import VERIFY


def build_verify_plan(rubric: pa.Table, templates: TemplateSet, judge: str, samples: int = 0,
                      sample_temperature: float = 0.7) -> pa.Table:
    """Each active template at temperature 0, then ``samples`` draws of the base template at
    ``sample_temperature`` (the Sampling Ensemble baseline). Rows of one response stay together.
    Request ids are :func:`judgecal.probes.plan.request_id`'s, combined for all rows at once
    (one by one, 451,584 requests took 36 s, said by no line: a user's finding)."""
    cols: dict[str, list] = {f.name: [] for f in VERIFY}
    version = templates.version
    rubric = rubric.sort_by([("group_id", "ascending"), ("item_id", "ascending")])
    item_keys, probe_keys, runs = [], [], []
    probe_key_of = functools.lru_cache(maxsize=None)(probe_key)  # criterion ids repeat over responses
    for r in rubric.select(["item_id", "group_id", "prompt", "response", "criterion_id", "criterion"]).to_pylist():
        item = key128(judge, r["item_id"], stable_hash(r["prompt"], r["response"], r["criterion"]))
        asks = [(t, 0, 0.0, f"{r['criterion_id']}@t{t}") for t in templates.active]
        asks += [(templates.base, s, sample_temperature, f"{r['criterion_id']}@s{s}") for s in range(samples)]
        for t, run, temp, probe in asks:
            item_keys.append(item)
            probe_keys.append(probe_key_of(f"{version}:{temp:g}", probe))  # the temperature is in the fingerprint
            runs.append(run)
            for k, v in (("item_id", r["item_id"]), ("group_id", r["group_id"]), ("probe_id", probe),
                         ("criterion_id", r["criterion_id"]), ("template", t), ("run", run), ("temperature", temp)):
                cols[k].append(v)
    cols["request_id"] = request_ids(item_keys, probe_keys, runs, 0)
    return pa.Table.from_pydict(cols, schema=VERIFY)


class VerifierRenderer(RowRenderer):
    """Renders verify requests: the response's text and criterion in one of the templates."""

    scale = ScoreScale.binary()

    def __init__(self, rubric: pa.Table, templates: TemplateSet):
        self.rubric = rubric.select(["item_id", "prompt", "response", "criterion_id", "criterion"])  # no labels
        self.templates = templates
        self._by_key = None

    def subset(self, item_ids) -> "VerifierRenderer":
        return VerifierRenderer(self.rubric.filter(pc.is_in(self.rubric["item_id"], value_set=pa.array(item_ids))),
                                self.templates)

    def render(self, rows: list[dict]) -> list[Rendered]:
        if self._by_key is None:
            self._by_key = {(r["item_id"], r["criterion_id"]): r for r in self.rubric.to_pylist()}
        out = []
        for r in rows:
            it = self._by_key[(r["item_id"], r["criterion_id"])]
            system, user = self.templates.render(r["template"], it["prompt"], it["response"], it["criterion"])
            out.append(Rendered(system, user, ANSWER_PREFIX, "score", self.scale, r["temperature"], r["run"],
                                meta={"criterion": it["criterion"], "response": it["response"]}))
        return out
