"""Collection on Ray Data: plan - committed -> render -> engine stage -> commit, on the workers.

* pending: planned ids with no answer, or whose answers are all errors with fewer than
  ``max_attempts`` tries (a failed request is tried again, its attempt number recorded on
  the response; an ``unparsed`` answer is an answer and is not retried);
* blocks: cut at item boundaries (all probes of an item reach one actor back to back, which
  is what prefix reuse needs), sized so a block is about ``part_seconds`` of the engine's
  work and at most ``part_rows`` rows: 10^6 cheap requests make ~100 parts, while a kill
  loses at most one block per actor of a slow judge;
* render: its own map stage (the engine actors never hold the items table);
* engine: whatever stage the engine config builds (an actor pool by default);
* commit: a map stage on the workers writes each block as one exactly-once part (see
  :mod:`judgecal.pipeline.store`) and returns one summary row; the driver reads only those
  rows, for progress.

Why a commit map and not ``Dataset.write_datasink``: the summary rows stream back while the
job runs (progress, ETA, failure counts), and a block's part is visible as soon as it is
written, which is what resume needs.
"""

from __future__ import annotations

import math
import sys
import time
from collections import Counter
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from judgecal.engines.base import EngineConfig
from judgecal.pipeline.render import render_table
from judgecal.pipeline.store import PartStore
from judgecal.schemas import PARSE_ERROR

LIGHT_ACTORS = 1  # render / commit workers; they take no CPU reservation
SUMMARY = pa.schema([("rows", pa.int64()), ("errors", pa.int64()), ("prompt_tokens", pa.int64()),
                     ("computed_tokens", pa.int64()), ("completion_tokens", pa.int64()),
                     ("committed", pa.bool_()), ("first_error", pa.string())])


class CollectFailed(Exception):
    """Collection ended with requests still failing, or stopped (a storage or worker error):
    committed parts are kept, a rerun resumes. The CLI prints one line and exits 3."""

    exit_code = 3


@dataclass(frozen=True)
class CollectSettings:
    part_rows: int = 10_000
    part_seconds: float = 60.0
    block_rows: int | None = None  # fixed block size; None: from the engine's rate and part_seconds
    num_actors: int = 1
    max_attempts: int = 3


@dataclass
class CollectStats:
    planned: int
    already_done: int
    computed: int
    prompt_tokens: int = 0
    computed_tokens: int = 0
    completion_tokens: int = 0
    errors: int = 0
    gave_up: int = 0  # failed max_attempts times; not tried again
    parts: int = 0
    wall_s: float = 0.0
    error_reasons: dict = field(default_factory=dict)


def pending_requests(plan: pa.Table, store: PartStore, max_attempts: int) -> tuple[pa.Table, int]:
    """Planned rows still to compute, with their attempt number; and how many gave up."""
    # Every committed row, duplicates included: an id is done if any row answered it; a failed
    # id's tries are its highest attempt. (No sort of 10^6 ids: a filter and a group-by.)
    done = store.read_all(["request_id", "parse_status", "attempt"])
    ok = done.filter(pc.not_equal(done["parse_status"], PARSE_ERROR))["request_id"].combine_chunks()
    failed = done.filter(pc.equal(done["parse_status"], PARSE_ERROR))
    if failed.num_rows:
        failed = failed.filter(pc.invert(pc.is_in(failed["request_id"], value_set=ok)))
        failed = failed.group_by("request_id").aggregate([("attempt", "max")]).rename_columns(
            ["request_id", "attempt"])
        failed = failed.filter(pc.is_in(failed["request_id"], value_set=plan["request_id"].combine_chunks()))
    exhausted = failed.filter(pc.greater_equal(failed["attempt"], max_attempts))["request_id"]
    skip = pa.chunked_array([ok, exhausted], pa.string()).combine_chunks()
    pending = plan.filter(pc.invert(pc.is_in(plan["request_id"], value_set=skip))) if len(skip) else plan
    tries = dict(zip(failed["request_id"].to_pylist(), failed["attempt"].to_pylist()))
    attempt = [tries.get(r, 0) + 1 for r in pending["request_id"].to_pylist()] if tries else \
        np.ones(pending.num_rows, np.int32)
    return pending.append_column("attempt", pa.array(attempt, pa.int32())), len(exhausted)


def block_size(engine_cfg: EngineConfig, s: CollectSettings) -> int:
    if s.block_rows is not None:
        return s.block_rows
    return int(max(1, min(s.part_rows, math.ceil(engine_cfg.requests_per_s * s.part_seconds))))


def item_aligned_blocks(requests: pa.Table, target_rows: int) -> list[pa.Table]:
    """Slices of about ``target_rows`` rows that never split one item's requests."""
    items = requests["item_id"].combine_chunks()
    n = len(items)
    if n == 0:
        return []
    change = np.ones(n + 1, dtype=bool)  # change[i]: an item starts at row i (or i == n)
    if n > 1:
        change[1:n] = pc.not_equal(items.slice(1), items.slice(0, n - 1)).to_numpy(zero_copy_only=False)
    bounds = np.flatnonzero(change)
    blocks, start = [], 0
    for b in bounds[1:]:
        if b - start >= target_rows or b == n:
            blocks.append(requests.slice(start, b - start))
            start = int(b)
    return blocks


def _compact(pending: pa.Table) -> pa.Table:
    """The plan as shipped to the workers: repeated string keys dictionary-encoded, so 10^6
    requests travel as ~50 MB instead of ~200 MB (the driver's memory holds the blocks)."""
    for i, f in enumerate(pending.schema):
        if pa.types.is_string(f.type) and f.name != "request_id":
            pending = pending.set_column(i, f.name, pc.dictionary_encode(pending[f.name]))
    return pending


class _Render:
    """The render stage's worker: holds the renderer (the items it needs) for the whole run."""

    def __init__(self, renderer, with_meta: bool):
        self.renderer, self.with_meta = renderer, with_meta

    def __call__(self, batch: pa.Table) -> pa.Table:
        for i, f in enumerate(batch.schema):  # back to the plan's plain strings
            if pa.types.is_dictionary(f.type):
                batch = batch.set_column(i, f.name, batch[f.name].cast(f.type.value_type))
        return render_table(self.renderer, batch, self.with_meta)


class _Commit:
    """The commit stage's worker: each block becomes one exactly-once part; one summary row
    goes back to the driver."""

    def __init__(self, store: PartStore):
        self.store = store

    def __call__(self, batch: pa.Table) -> pa.Table:
        return _commit(batch, self.store)


def _commit(batch: pa.Table, store: PartStore) -> pa.Table:
    errs = pc.equal(batch["parse_status"], PARSE_ERROR)
    n_err = pc.sum(errs.cast(pa.int64())).as_py() or 0
    first = batch.filter(errs)["raw_text"][0].as_py() if n_err else None
    committed = store.write_part(batch) is not None if batch.num_rows else False
    tot = {c: pc.sum(batch[c]).as_py() or 0 for c in ("prompt_tokens", "computed_tokens", "completion_tokens")}
    return pa.Table.from_pylist([{"rows": batch.num_rows, "errors": n_err, **tot, "committed": committed,
                                  "first_error": first}], schema=SUMMARY)


def init_ray() -> None:
    import ray

    if not ray.is_initialized():
        ray.init(ignore_reinit_error=True, include_dashboard=False, log_to_driver=True, configure_logging=False)


def collect(plan: pa.Table, renderer, engine_cfg: EngineConfig, store: PartStore,
            settings: CollectSettings = CollectSettings(), log=None) -> CollectStats:
    """Compute every request of ``plan`` without a usable answer in ``store``; returns totals."""
    import ray.data

    log = log or (lambda msg: print(msg, file=sys.stderr, flush=True))
    t0 = time.perf_counter()
    pending, gave_up = pending_requests(plan, store, settings.max_attempts)
    planned, todo = plan.num_rows, pending.num_rows
    stats = CollectStats(planned, planned - todo - gave_up, 0, gave_up=gave_up)
    retry = int(pc.sum(pc.greater(pending["attempt"], 1).cast(pa.int64())).as_py() or 0)
    log(f"[collect] {planned} requests planned, {stats.already_done} already committed, {todo} to compute"
        + (f" ({retry} retries of failed requests)" if retry else "")
        + (f", {gave_up} failed {settings.max_attempts} times and are not retried" if gave_up else "")
        + f" with {engine_cfg.identity}")
    if todo == 0:
        stats.wall_s = time.perf_counter() - t0
        return stats
    init_ray()
    blocks = item_aligned_blocks(_compact(pending), block_size(engine_cfg, settings))
    ds = ray.data.from_arrow(blocks)
    # This dataset's own copy of the context (the global one is left alone): progress is ours,
    # and blocks reach the engine in plan order, so consecutive items of one group (one
    # article) follow each other and the engine keeps reusing the shared prefix.
    ds.context.enable_progress_bars = False
    ds.context.execution_options.preserve_order = True
    # Render and commit run in small pools of long-lived workers with num_cpus=0: they are
    # light, must never wait behind an engine actor that holds every CPU, and as tasks they
    # started a fresh worker process per block on a busy machine (measured: 0.6x of the bare
    # engine instead of 0.95x). As their own stages the engine actors never hold the items.
    light = {"batch_size": None, "batch_format": "pyarrow", "zero_copy_batch": True, "num_cpus": 0,
             "compute": ray.data.ActorPoolStrategy(size=LIGHT_ACTORS)}
    ds = ds.map_batches(_Render, fn_constructor_kwargs={"renderer": renderer.subset(pending["item_id"].unique()),
                                                        "with_meta": engine_cfg.wants_meta}, **light)
    ds = engine_cfg.build_stage(ds, settings.num_actors)
    ds = ds.map_batches(_Commit, fn_constructor_kwargs={"store": store}, **light)
    reasons: Counter = Counter()
    try:
        _follow(ds, stats, reasons, todo, t0, log)
    except Exception as e:  # noqa: BLE001 - a worker or storage failure, reported in one line
        raise CollectFailed(f"stopped after {stats.computed} new responses ({stats.parts} parts committed and "
                            f"kept; rerun to resume): {_last_error_line(e)}") from e
    stats.error_reasons = dict(reasons.most_common(3))
    stats.wall_s = time.perf_counter() - t0
    return stats


def _last_error_line(e: Exception) -> str:
    """Ray wraps a worker's exception in its traceback; its last 'Type: message' line says what failed."""
    lines = [ln.strip() for ln in str(e).splitlines() if ": " in ln and not ln.startswith(" ")]
    return (lines[-1] if lines else f"{type(e).__name__}: {e}")[:300]


def _follow(ds, stats: CollectStats, reasons: Counter, todo: int, t0: float, log) -> None:
    """Consume the commit stage's summary rows: totals and progress lines."""
    last = 0.0
    for s in ds.iter_rows():
        stats.computed += s["rows"]
        stats.errors += s["errors"]
        stats.parts += int(s["committed"])
        for k in ("prompt_tokens", "computed_tokens", "completion_tokens"):
            setattr(stats, k, getattr(stats, k) + s[k])
        if s["first_error"]:
            reasons[s["first_error"].splitlines()[0][:160]] += s["errors"]
        now = time.perf_counter()
        if now - last > 1.0 or stats.computed == todo:
            last = now
            rate = stats.computed / (now - t0)
            done = stats.already_done + stats.computed
            log(f"[collect] {done}/{stats.planned} ({100 * done / stats.planned:.0f}%)  {rate:,.1f} req/s  "
                f"tokens {stats.prompt_tokens:,} prompt / {stats.computed_tokens:,} computed  "
                f"errors {stats.errors}  ETA {(todo - stats.computed) / rate if rate else float('nan'):.0f}s")
