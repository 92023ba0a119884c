"""The render stage: planned request rows -> rendered rows (``schemas.RENDERED``).

A renderer is a picklable object with ``subset(item_ids)`` and
``render_table(rows, with_meta) -> RENDERED table``. A renderer whose prompts are naturally
per row (URW's verdicts, criteria) subclasses :class:`RowRenderer` and writes only
``render(rows: list[dict]) -> list[Rendered]``; PRISM's renders columns (probes/render.py).
Rendering runs as its own Ray Data map before the engine stage, so the engine actors never
hold the items table.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

import pyarrow as pa

from judgecal.ids import stable_hash
from judgecal.scale import ScoreScale
from judgecal.schemas import RENDERED

SCORE_MAX_TOKENS = 8  # a score is one number; verdicts and ratings ask for no more
PLAN_KEYS = ("request_id", "item_id", "group_id", "probe_id", "run", "attempt")


@dataclass
class Rendered:
    system: str
    user: str
    answer_prefix: str = ""
    mode: str = "score"
    scale: ScoreScale | None = None
    temperature: float = 0.0
    seed: int = 0
    max_tokens: int = SCORE_MAX_TOKENS
    meta: dict = field(default_factory=dict)


def prompt_sha(system: str, user: str, answer_prefix: str, temperature: float, max_tokens: int) -> str:
    """The fingerprint of a rendered prompt stored with its response (the text is not)."""
    return stable_hash(system, user, answer_prefix, temperature, max_tokens)


class RowRenderer:
    """Base of renderers that render one row at a time."""

    def render(self, rows: list[dict]) -> list[Rendered]:
        raise NotImplementedError

    def render_table(self, rows: pa.Table, with_meta: bool = False) -> pa.Table:
        return _rows_to_table(self, rows, with_meta)


def render_table(renderer, rows: pa.Table, with_meta: bool = False) -> pa.Table:
    return renderer.render_table(rows, with_meta)


def _rows_to_table(renderer: RowRenderer, rows: pa.Table, with_meta: bool) -> pa.Table:
    plan = rows.to_pylist()
    outs = renderer.render(plan)
    data = {k: rows[k] for k in PLAN_KEYS}
    data["mode"] = [o.mode for o in outs]
    data["scale_lo"] = [o.scale.lo if o.scale else 0 for o in outs]
    data["scale_hi"] = [o.scale.hi if o.scale else 0 for o in outs]
    for f in ("system", "answer_prefix", "temperature", "seed", "max_tokens"):
        data[f] = [getattr(o, f) for o in outs]
    data["user"] = pa.array([o.user for o in outs], pa.string()).dictionary_encode()
    data["prompt_sha"] = [prompt_sha(o.system, o.user, o.answer_prefix, o.temperature, o.max_tokens) for o in outs]
    data["meta"] = [json.dumps({**r, **o.meta}, default=str) for r, o in zip(plan, outs)] if with_meta \
        else [None] * rows.num_rows
    return pa.Table.from_pydict(data, schema=RENDERED)


def judge_prompts(renderer, plan: pa.Table, with_meta: bool = False) -> list:
    """The prompts an engine receives for ``plan``, rendered in process (benchmarks, tests,
    rewards): the same render stage and row conversion as a collection."""
    from judgecal.engines.actor import prompts_from_table

    rows = plan.append_column("attempt", pa.array([1] * plan.num_rows, pa.int32())) \
        if "attempt" not in plan.column_names else plan
    return prompts_from_table(render_table(renderer, rows, with_meta))
