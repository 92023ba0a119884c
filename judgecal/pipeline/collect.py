"""Collection on Ray Data: plan - committed -> render -> engine stage -> commit, on the workers.

* pending: planned ids with no answer, or whose answers are all errors with fewer than
  ``max_attempts`` tries (a failed request is tried again, its attempt number recorded on
  the response; an ``unparsed`` answer is an answer and is not retried);
* the plan is scanned once for its ids (:mod:`judgecal.pipeline.plan_source`), never held
  whole: each block is a range of plan rows that the render workers read themselves;
* blocks: cut at item boundaries (all probes of an item reach one actor back to back, which
  is what prefix reuse needs), sized so a block is about ``part_seconds`` of the engine's
  work and at most ``part_rows`` rows: 10^6 cheap requests make ~100 parts, while a kill
  loses at most one block per actor of a slow judge;
* render: its own map stage (the engine actors never hold the items table);
* engine: whatever stage the engine config builds (an actor pool by default);
* commit: a map stage on the workers writes each block as one exactly-once part (see
  :mod:`judgecal.pipeline.store`) and returns one summary row; the driver reads only those
  rows, and the engine replicas' per-batch reports (:mod:`judgecal.pipeline.progress`);
* before any of it, one preflight request (``EngineConfig.preflight``: an http judge that is
  not there stops the collect in seconds), and Ray started within a deadline.

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

import pyarrow as pa
import pyarrow.compute as pc

from judgecal.engines.base import EngineConfig
from judgecal.pipeline.answered import error_reason
from judgecal.pipeline.plan_source import PendingIndex, PlanReader, PlanSource, scan_plan
from judgecal.pipeline.render import render_table
from judgecal.pipeline.quiet import drop_known_ray_noise, drop_ray_thread_note
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
    fail_fast_requests: int = 20  # stop when this many first requests all fail to connect; 0: never


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


def block_size(engine_cfg: EngineConfig, s: CollectSettings) -> int:
    if s.block_rows is not None:
        return s.block_rows
    return int(max(1, min(s.part_rows, math.ceil(engine_cfg.requests_per_s * s.part_seconds))))


class _Render:
    """The render stage's worker: reads its blocks' plan rows itself (the driver sends only
    start and stop rows) and holds the renderer (the items it needs) for the whole run."""

    def __init__(self, renderer, with_meta: bool, source: PlanSource, index: PendingIndex):
        self.renderer, self.with_meta = renderer, with_meta
        self.reader = PlanReader(source, index)

    def __call__(self, batch: pa.Table) -> pa.Table:
        rows = [self.reader.read(a, b) for a, b in zip(batch["start"].to_pylist(), batch["stop"].to_pylist())]
        return render_table(self.renderer, pa.concat_tables(rows), self.with_meta)


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


class RayStartFailed(Exception):
    """Ray did not start (or the cluster in RAY_ADDRESS did not answer). One line, exit 1."""

    exit_code = 1


RAY_START_TIMEOUT_S = 180.0  # JUDGECAL_RAY_START_TIMEOUT_S overrides; Ray itself may wait far longer


def init_ray() -> None:
    """Start (or join, with RAY_ADDRESS) Ray, within a deadline: Ray retries an unreachable
    address for many minutes, and a busy machine can stall a local start."""
    import os
    import threading

    import ray

    if ray.is_initialized():
        return
    outcome: list = []
    ready = threading.Event()

    def start():
        try:
            ray.init(ignore_reinit_error=True, include_dashboard=False, log_to_driver=True, configure_logging=False,
                     logging_level="ERROR")
        except BaseException as e:  # noqa: BLE001 - handed to the caller
            outcome.append(e)
            ready.set()
            return
        outcome.append(None)
        ready.set()
        # Ray's local processes die with the *thread* that started them (Linux's parent-death
        # signal is per thread): this one lives as long as the process.
        threading.Event().wait()

    drop_ray_thread_note()
    limit = float(os.environ.get("JUDGECAL_RAY_START_TIMEOUT_S", RAY_START_TIMEOUT_S))
    thread = threading.Thread(target=start, name="judgecal-ray-init", daemon=True)
    thread.start()
    ready.wait(limit)
    where = os.environ.get("RAY_ADDRESS") or "a local Ray instance"
    hint = ("on a busy machine retry or raise JUDGECAL_RAY_START_TIMEOUT_S; or start Ray yourself "
            "(`ray start --head`) and set RAY_ADDRESS=auto")
    if not outcome:
        raise RayStartFailed(f"could not start or reach {where} within {limit:g} s; {hint}")
    if outcome[0] is not None:
        raise RayStartFailed(f"could not start or reach {where}: {_last_error_line(outcome[0])}; {hint}") from None
    from judgecal.signals import reclaim

    reclaim()  # ray.init may install a SIGTERM handler of its own; ours keeps the one-line stop


def collect(plan: pa.Table | PlanSource, renderer, engine_cfg: EngineConfig, store: PartStore,
            settings: CollectSettings = CollectSettings(), log=None) -> CollectStats:
    """Compute every request of ``plan`` (a table, or a :class:`PlanSource` over the plan's
    file) without a usable answer in ``store``; returns totals."""
    log = log or (lambda msg: print(msg, file=sys.stderr, flush=True))
    t0 = time.perf_counter()
    source = PlanSource.of(plan)
    index = PendingIndex.from_store(store, settings.max_attempts)
    scan = scan_plan(source, index, block_size(engine_cfg, settings))
    planned, todo, gave_up, retry = source.num_rows, scan.todo, scan.gave_up, scan.retries
    stats = CollectStats(planned, planned - todo - gave_up, 0, gave_up=gave_up)
    log(f"[collect] {planned} requests planned, {stats.already_done} already committed, {todo} to compute"
        + (f" ({retry} retries of failed requests)" if retry else "")
        + (f", {gave_up} failed {settings.max_attempts} times and are not retried" if gave_up else "")
        + f" with {engine_cfg.identity}")
    if todo == 0:
        stats.wall_s = time.perf_counter() - t0
        return stats
    sub_renderer = renderer.subset(pa.array(sorted(scan.items)))
    _preflight(engine_cfg, sub_renderer, source, index, scan.blocks[0], log)
    init_ray()
    interactive = sys.stderr.isatty()  # asked before fd 2 goes through the noise filter
    with drop_known_ray_noise() as terminal:
        _run(source, index, scan, sub_renderer, engine_cfg, store, settings, stats, todo, log,
             terminal if interactive else None)
    stats.wall_s = time.perf_counter() - t0
    return stats


def _preflight(engine_cfg: EngineConfig, renderer, source, index, block, log) -> None:
    """One request of the first block, sent before anything fans out (the engine decides
    whether and how: see ``EngineConfig.preflight``)."""
    from judgecal.engines.actor import prompts_from_table
    from judgecal.scale import ScoreScale

    if type(engine_cfg).preflight is EngineConfig.preflight:
        return
    rows = PlanReader(source, index).read(*block).slice(0, 1)
    rendered = render_table(renderer, rows, engine_cfg.wants_meta)
    prompt, mode = prompts_from_table(rendered)[0], rendered["mode"][0].as_py()
    scale = ScoreScale(rendered["scale_lo"][0].as_py(), rendered["scale_hi"][0].as_py()) if mode == "score" else None
    t = time.perf_counter()
    engine_cfg.preflight(prompt, mode, scale)
    log(f"[collect] preflight: {engine_cfg.identity} answered one request in {time.perf_counter() - t:.1f}s")


def _quiet_ray_data() -> None:
    """judgecal prints its own progress: Ray Data's per-dataset INFO lines and its advice to
    turn its progress bars on are not for judgecal's users (its warnings and errors stay)."""
    import logging

    logging.getLogger("ray.data").setLevel(logging.WARNING)
    logging.getLogger("ray.data._internal.progress").setLevel(logging.ERROR)


def _run(source, index, scan, renderer, engine_cfg, store, settings, stats, todo, log, terminal=None) -> None:
    """The Ray Data pipeline, followed to its end. ``terminal``: a stream for a progress bar
    (stderr is a terminal), else plain progress lines through ``log``."""
    import ray.data

    from judgecal.pipeline.progress import CollectProgress, start_board

    _quiet_ray_data()

    # One row per block (its plan rows): the workers read the plan, the driver never holds it.
    ds = ray.data.from_items([{"start": a, "stop": b} for a, b in scan.blocks], override_num_blocks=len(scan.blocks))
    # This dataset's own copy of the context (the global one is left alone): progress is ours,
    # and blocks reach the engine in plan order, so consecutive items of one group (one
    # article) follow each other and the engine keeps reusing the shared prefix.
    ds.context.enable_progress_bars = False
    ds.context.print_on_execution_start = False
    ds.context.execution_options.preserve_order = True
    # Render and commit run in small pools of long-lived workers with num_cpus=0: they are
    # light, must never wait behind an engine actor that holds every CPU, and as tasks they
    # started a fresh worker process per block on a busy machine (measured: 0.6x of the bare
    # engine instead of 0.95x). As their own stages the engine actors never hold the items.
    light = {"batch_size": None, "batch_format": "pyarrow", "zero_copy_batch": True, "num_cpus": 0,
             "compute": ray.data.ActorPoolStrategy(size=LIGHT_ACTORS)}
    ds = ds.map_batches(_Render, fn_constructor_kwargs={"renderer": renderer, "with_meta": engine_cfg.wants_meta,
                                                        "source": source, "index": index}, **light)
    board = start_board(settings.fail_fast_requests) if engine_cfg.reports_progress else None
    ds = engine_cfg.build_stage(ds, settings.num_actors, board)
    ds = ds.map_batches(_Commit, fn_constructor_kwargs={"store": store}, **light)
    progress = CollectProgress(stats, todo, log, board, settings.fail_fast_requests, interactive=terminal is not None,
                               stream=terminal)
    reasons: Counter = Counter()
    stop: list[str] = []  # the fail-fast reason, once the ticker has interrupted the main thread
    try:
        for s in _summaries(ds, progress, stop):
            progress.on_summary(s)
            if s["first_error"]:
                reasons[error_reason(s["first_error"])] += s["errors"]
        progress.tick(force=True)
    except KeyboardInterrupt:
        if stop:  # the ticker's interrupt, wherever it landed: the fail-fast rule, exit 3
            raise CollectFailed(f"stopped early after {progress.done} requests: {stop[0]}") from None
        raise
    except CollectFailed:
        raise
    except Exception as e:  # noqa: BLE001 - a worker or storage failure, reported in one line
        raise CollectFailed(f"stopped after {stats.computed} new responses ({stats.parts} parts committed and "
                            f"kept; rerun to resume): {_last_error_line(e)}") from e
    finally:
        progress.close()
    stats.error_reasons = dict(reasons.most_common(3))


def _summaries(ds, progress, stop: list):
    """The commit stage's summary rows, read on the main thread (so Ctrl-C lands inside Ray
    Data's iterator, which then shuts its executor down cleanly), while a ticker thread prints
    progress as blocks are answered and, when the fail-fast rule fires, records the reason in
    ``stop`` and interrupts the main thread. It interrupts only while the main thread reads
    rows (a lock orders the two), so the interrupt lands inside the caller's ``try``."""
    import _thread
    import threading

    done, reading = threading.Event(), threading.Lock()
    inside = [True]

    def ticker():
        while not done.wait(0.25):
            progress.tick()
            why = progress.stop_reason()
            if why:
                with reading:
                    if inside[0]:
                        stop.append(why)
                        _thread.interrupt_main()
                return

    thread = threading.Thread(target=ticker, name="judgecal-progress", daemon=True)
    thread.start()
    try:
        yield from ds.iter_rows()
    finally:
        with reading:
            inside[0] = False
        done.set()
        thread.join()


def _last_error_line(e: Exception) -> str:
    """Ray wraps a worker's exception in its traceback; its last 'Type: message' line says what failed."""
    lines = [ln.strip() for ln in str(e).splitlines() if ": " in ln and not ln.startswith(" ")]
    return (lines[-1] if lines else f"{type(e).__name__}: {e}")[:300]
