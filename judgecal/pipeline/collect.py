"""The judge stage on Ray Data: pending requests -> engine actors -> committed response parts.

Prompts are rendered inside the actors by a renderer (the plan carries keys only): PRISM's
:class:`judgecal.probes.ProbeRenderer`, URW's :class:`judgecal.rubrics.VerifierRenderer`.
A renderer is any picklable object with ``scale``, ``render(rows) -> list[JudgePrompt]`` and
``subset(item_ids)`` (what the actors need of it). Blocks are cut at item boundaries so one
actor sees all probes of an item back to back, which is what prefix reuse needs. The driver commits each result
block as one atomic Parquet part and prints progress; a rerun skips committed ids.
"""

from __future__ import annotations

import hashlib
import sys
import time
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc

from judgecal.engines.base import EngineConfig, JudgeOutput, JudgePrompt
from judgecal.errors import InputError
from judgecal.pipeline.store import PartStore
from judgecal.schemas import RESPONSES


@dataclass
class CollectStats:
    planned: int
    already_done: int
    computed: int
    prompt_tokens: int
    computed_tokens: int
    wall_s: float


class JudgeStage:
    """Ray Data callable class: one engine per actor, built once."""

    def __init__(self, engine_cfg: EngineConfig, renderer):
        self.engine = engine_cfg.build()
        self.renderer = renderer

    def __call__(self, batch: pa.Table) -> pa.Table:
        prompts = self.renderer.render(batch.to_pylist())
        return responses_table(batch, self.engine.identity, prompts, self.engine.score(prompts, self.renderer.scale))


def responses_table(requests: pa.Table, judge: str, prompts: list[JudgePrompt], outs: list[JudgeOutput]) -> pa.Table:
    """The responses rows of answered requests (keys from ``requests``, outputs from ``outs``)."""
    data = {k: requests[k] for k in ("request_id", "item_id", "group_id", "probe_id", "run")}
    data["judge"] = [judge] * requests.num_rows
    data["prompt_sha"] = [hashlib.sha256(f"{p.system}\x00{p.user}\x00{p.answer_prefix}".encode()).hexdigest()[:16]
                          for p in prompts]
    for f in RESPONSES.names[len(data):]:
        data[f] = [getattr(o, f) for o in outs]
    return pa.Table.from_pydict(data, schema=RESPONSES)


def item_aligned_blocks(requests: pa.Table, target_rows: int) -> list[pa.Table]:
    """Slices of about ``target_rows`` rows that never split one item's requests."""
    items = requests["item_id"].to_pylist()
    blocks, start = [], 0
    for i in range(1, len(items) + 1):
        at_boundary = i == len(items) or items[i] != items[i - 1]
        if at_boundary and i - start >= target_rows:
            blocks.append(requests.slice(start, i - start))
            start = i
    if start < len(items):
        blocks.append(requests.slice(start))
    return blocks


def pending_requests(requests: pa.Table, store: PartStore) -> pa.Table:
    done = store.committed_ids()
    if len(done) == 0:
        return requests
    return requests.filter(pc.invert(pc.is_in(requests["request_id"], value_set=done)))


def require_answered(plan: pa.Table, responses: pa.Table, where: str) -> None:
    """A fit or evaluation stage refuses a plan whose collection is not finished."""
    missing = plan.num_rows - pc.sum(pc.is_in(plan["request_id"], value_set=responses["request_id"])).as_py()
    if missing:
        raise InputError(where, f"{missing} planned requests have no response; rerun `judgecal collect`")


def init_ray() -> None:
    import ray

    if not ray.is_initialized():
        ray.init(ignore_reinit_error=True, include_dashboard=False, log_to_driver=True, configure_logging=False)


def collect(
    requests: pa.Table,
    renderer,
    engine_cfg: EngineConfig,
    store: PartStore,
    block_rows: int = 64,
    num_actors: int = 1,
    log=None,
) -> CollectStats:
    """Compute every request of ``requests`` not yet in ``store``; returns totals."""
    import ray.data

    log = log or (lambda msg: print(msg, file=sys.stderr, flush=True))
    t0 = time.perf_counter()
    store.sweep_tmp()
    pending = pending_requests(requests, store)
    planned, done = requests.num_rows, requests.num_rows - pending.num_rows
    log(f"[collect] {planned} requests planned, {done} already committed, {pending.num_rows} to compute "
        f"with {engine_cfg.identity}")
    if pending.num_rows == 0:
        return CollectStats(planned, done, 0, 0, 0, time.perf_counter() - t0)
    init_ray()
    ctx = ray.data.DataContext.get_current()
    ctx.enable_progress_bars = False
    ctx.execution_options.preserve_order = True  # keeps one item's prompts adjacent for each actor
    ds = ray.data.from_arrow(item_aligned_blocks(pending, block_rows)).map_batches(
        JudgeStage,
        fn_constructor_kwargs={"engine_cfg": engine_cfg, "renderer": renderer.subset(pending["item_id"].unique())},
        batch_size=None,
        batch_format="pyarrow",
        zero_copy_batch=True,
        compute=ray.data.ActorPoolStrategy(size=num_actors),
        num_cpus=engine_cfg.num_cpus,
    )
    n = ptok = ctok = 0
    for block in ds.iter_batches(batch_size=None, batch_format="pyarrow"):
        store.write_part(block)
        n += block.num_rows
        ptok += pc.sum(block["prompt_tokens"]).as_py() or 0
        ctok += pc.sum(block["computed_tokens"]).as_py() or 0
        el = time.perf_counter() - t0
        rate = n / el
        eta = (pending.num_rows - n) / rate if rate else float("nan")
        log(f"[collect] {done + n}/{planned} ({100 * (done + n) / planned:.0f}%)  {rate:.2f} req/s  "
            f"tokens {ptok:,} prompt / {ctok:,} computed  ETA {eta:.0f}s")
    return CollectStats(planned, done, n, ptok, ctok, time.perf_counter() - t0)
