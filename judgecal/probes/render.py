"""Renders PRISM requests into judge prompts (the render stage; see pipeline/render.py).

Columnar: a prompt is its item's head (template, source, content) followed by its probe's
clause, so the head is rendered once per item, the tail once per probe, and the rows are
joined in Arrow (``binary_join_element_wise``), as is each prompt's hash per (item, probe).
Human targets are not kept: nothing rendered can carry them to an engine.
"""

from __future__ import annotations

import json

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from judgecal.pipeline.render import PLAN_KEYS, SCORE_MAX_TOKENS, prompt_sha
from judgecal.probes.bank import Probe
from judgecal.probes.templates import PromptTemplate, file_templates, register_templates, template_for
from judgecal.scale import ScoreScale
from judgecal.schemas import RENDERED


class ProbeRenderer:
    def __init__(self, items: pa.Table, probes: list[Probe], scale: ScoreScale):
        self.items = items.select(["item_id", "task", "source", "content"])
        self.probes = {p.probe_id: p for p in probes}
        self.scale = scale
        self.files = file_templates()  # a user's template files travel to the Ray workers with the renderer

    def subset(self, item_ids) -> "ProbeRenderer":
        out = ProbeRenderer.__new__(ProbeRenderer)
        out.items = self.items.filter(pc.is_in(self.items["item_id"], value_set=pa.array(item_ids)))
        out.probes, out.scale, out.files = self.probes, self.scale, self.files
        return out

    def render_table(self, rows: pa.Table, with_meta: bool = False) -> pa.Table:
        n = rows.num_rows
        item_ix = pc.index_in(rows["item_id"], value_set=self.items["item_id"]).to_numpy(zero_copy_only=False)
        probe_ids = list(self.probes)
        probe_ix = pc.index_in(rows["probe_id"], value_set=pa.array(probe_ids, pa.string())).to_numpy(
            zero_copy_only=False)
        if np.isnan(item_ix.astype(float)).any() or np.isnan(probe_ix.astype(float)).any():
            raise KeyError("a planned request names an item or probe this renderer does not have")
        # Only the items and probes this block uses are rendered.
        used_items, item_inv = np.unique(item_ix, return_inverse=True)
        used_probes, probe_inv = np.unique(probe_ix, return_inverse=True)
        rows_items = self.items.take(pa.array(used_items)).to_pylist()
        register_templates(getattr(self, "files", {}))
        tmpls: list[PromptTemplate] = [template_for(r["task"]) for r in rows_items]
        heads = [t.render_head(r["source"], r["content"], self.scale) for t, r in zip(tmpls, rows_items)]
        clauses = [self.probes[probe_ids[j]].clause for j in used_probes]
        tails = [PromptTemplate.clause_text(c) for c in clauses]
        # One prompt per (item, probe), shared by its runs: the user column is a dictionary.
        pair, pair_inv = np.unique(item_inv * len(used_probes) + probe_inv, return_inverse=True)
        i_of, p_of = pair // len(used_probes), pair % len(used_probes)
        injects = [self.probes[probe_ids[j]].inject for j in used_probes]
        prompts = [heads[i] + tails[j] if not injects[j] else  # the injection is inside the content
                   tmpls[i].render_head(rows_items[i]["source"], PromptTemplate.injected(rows_items[i]["content"],
                                                                                          injects[j]), self.scale) + tails[j]
                   for i, j in zip(i_of, p_of)]
        user = pa.DictionaryArray.from_arrays(pa.array(pair_inv, pa.int32()), pa.array(prompts, pa.string()))
        system = pa.array([t.system for t in tmpls]).take(pa.array(item_inv))
        prefix = pa.array([t.answer_prefix for t in tmpls]).take(pa.array(item_inv))
        # sampling settings are plan columns (absent in plans written before them: greedy)
        temperature = (rows["temperature"].fill_null(0.0).to_numpy(zero_copy_only=False)
                       if "temperature" in rows.column_names else np.zeros(n))
        seed = rows["seed"].fill_null(0).to_numpy(zero_copy_only=False) if "seed" in rows.column_names \
            else np.zeros(n, np.int64)
        first = np.zeros(len(pair), np.int64)
        first[pair_inv[::-1]] = np.arange(n)[::-1]  # each (item, probe)'s first row: its temperature
        shas = pa.array([prompt_sha(tmpls[i].system, u, tmpls[i].answer_prefix, float(temperature[f]), SCORE_MAX_TOKENS)
                         for i, u, f in zip(i_of, prompts, first)])
        data = {k: rows[k] for k in PLAN_KEYS}
        data |= {"mode": pa.array(["score"] * n), "scale_lo": np.full(n, self.scale.lo, np.int32),
                 "scale_hi": np.full(n, self.scale.hi, np.int32), "system": system, "user": user,
                 "answer_prefix": prefix, "temperature": temperature, "seed": seed,
                 "max_tokens": np.full(n, SCORE_MAX_TOKENS, np.int32), "prompt_sha": shas.take(pa.array(pair_inv)),
                 "meta": pa.array(self._meta(rows, item_ix) if with_meta else [None] * n, pa.string())}
        return pa.Table.from_pydict(data, schema=RENDERED)

    def _meta(self, rows: pa.Table, item_ix) -> list[str]:
        """Request keys and the judged text, for simulated judges (which read features of it)."""
        content = self.items["content"].take(pa.array(item_ix)).to_pylist()
        keys = rows.select(["item_id", "run", "probe_id", "attribute", "direction"]).to_pylist()
        return [json.dumps({**k, "content": c}) for k, c in zip(keys, content)]
