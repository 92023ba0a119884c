"""Collection on Ray Data: plan - committed -> render -> engine stage -> commit, on the workers.

* pending: planned ids with no answer, or whose answers are all errors with fewer than
  ``max_attempts`` tries (a failed request is tried again, its attempt number recorded on
  the response; an ``unparsed`` answer is an answer and is not retried);
* the plan is scanned once for its ids (:mod:`judgecal.pipeline.plan_source`), never held
  whole: each block is a range of plan rows that the render workers read themselves;
* blocks: cut at item boundaries (all probes of an item reach one actor back to back, which
  is what prefix reuse needs), sized so a block is about ``part_seconds`` of the engine's
  work and at most ``part_rows`` rows: 10^6 cheap requests make ~100 parts, while a kill
  loses at most one block per actor of a slow judge. The engine's *measured* rate sizes
  them (:mod:`judgecal.pipeline.blocks`: cut as the render stage asks, from the replicas'
  reports), not the rate its config declares; ``[collect] block_rows`` fixes the size
  instead, and an engine whose stage reports nothing (vLLM) gets blocks from its declared rate;
* Ray Data's no-progress limit (30 min without a block moving) is off while the engine
  reports: a block of a slow judge may take longer, and progress.STALL_S (nothing answered
  for 30 min) stops a judge that hangs instead;
* render: its own map stage (the engine actors never hold the items table);
* engine: whatever stage the engine config builds (an actor pool by default);
* commit: a map stage on the workers writes each block as one exactly-once part (see
  :mod:`judgecal.pipeline.store`) and returns one summary row; the driver reads only those
  rows, and the engine replicas' per-batch reports (:mod:`judgecal.pipeline.progress`);
* before any of it, one preflight request (``EngineConfig.preflight``: an http judge that is
  not there stops the collect in seconds), and Ray started within a deadline;
* a batch engine (``driver_side``: ``openai-batch``) runs none of this: the driver submits
  the pending requests to the provider's batch API and commits its answers
  (:mod:`judgecal.pipeline.batches`), with the same pending rule and the same commits.

Why a commit map and not ``Dataset.write_datasink``: the summary rows stream back while the
job runs (progress, ETA, failure counts), and a block's part is visible as soon as it is
written, which is what resume needs.
"""

from __future__ import annotations

import functools
import math
import os
import sys
import time
from collections import Counter
from contextlib import closing
from dataclasses import dataclass, field

import pyarrow as pa
import pyarrow.compute as pc

from judgecal.engines.base import UNSENT, EngineConfig
from judgecal.errors import InputError
from judgecal.pipeline.answered import error_reason
from judgecal.pipeline.blocks import FIRST_ROWS, WAIT, BlockDispenser
from judgecal.pipeline.cluster_watch import connect_error
from judgecal.pipeline.failures import died_starting, first_reason, last_error_line, root_cause, start_failure
from judgecal.pipeline.plan_source import PendingIndex, PlanReader, PlanSource, scan_plan
from judgecal.pipeline.render import render_table
from judgecal.pipeline.quiet import drop_known_ray_noise, drop_ray_thread_note, worker_errors
from judgecal.pipeline.storage_reach import check_nodes_reach
from judgecal.pipeline.store import BadPart, PartStore
from judgecal.redact import redact
from judgecal.schemas import PARSE_ERROR, PARSE_OUT_OF_SCALE, PARSE_USABLE, RENDERED
from judgecal.signals import main_thread_waker

LIGHT_ACTORS = 1  # render / commit workers; they take no CPU reservation
SUMMARY = pa.schema([("rows", pa.int64()), ("errors", pa.int64()), ("prompt_tokens", pa.int64()),
                     ("computed_tokens", pa.int64()), ("completion_tokens", pa.int64()),
                     ("committed", pa.bool_()), ("first_error", pa.string()), ("out_of_scale", pa.int64())])
# Grains: the plan is scanned into at most this many runs of whole items, which blocks group.
MAX_GRAINS = 100_000
# Input rows (tickets) of one Ray Data pipeline; a plan that needs more blocks runs another.
MAX_TICKETS = 10_000
# Tickets past twice the blocks a pipeline is estimated to need (:func:`tickets_for`)
TICKET_SLACK = 16
# The first pipeline's least (before any measurement): a judge up to ~10x slower than it
# declares seldom needs a second (whose replicas start again: a llamacpp judge reloads its
# model, and all but the last replica wait for the last block), at ~3.5 s at most left over
FIRST_TICKETS = 256


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
    wait: bool = False  # a batch engine: wait for its batches at the provider (``--wait``)


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
    out_of_scale: int = 0  # answers whose score lay outside the request's scale: refused at commit
    measured_rate: float | None = None  # requests a second one replica answered (what sized the blocks)
    in_flight: int = 0  # a batch engine: requests still at the provider when the collect returned
    open_batches: int = 0  # ... in this many batches
    tickets: int = 0  # measured blocks: the pipelines' input rows (blocks asked for; see tickets_for)


def block_size(engine_cfg: EngineConfig, s: CollectSettings) -> int:
    if s.block_rows is not None:
        return s.block_rows
    return int(max(1, min(s.part_rows, math.ceil(engine_cfg.requests_per_s * s.part_seconds))))


class _Render:
    """The render stage's worker: reads its blocks' plan rows itself (the driver sends only
    start and stop rows, or tickets that the board turns into blocks sized by the measured
    rate) and holds the renderer (the items it needs) for the whole run."""

    def __init__(self, renderer, with_meta: bool, source: PlanSource, index: PendingIndex, board=None):
        self.renderer, self.with_meta = renderer, with_meta
        self.reader = PlanReader(source, index)
        self.board = board

    def __call__(self, batch: pa.Table) -> pa.Table:
        if "ticket" in batch.column_names:
            spans = [b for b in map(self._block, batch["ticket"].to_pylist()) if b is not None]
        else:
            spans = list(zip(batch["start"].to_pylist(), batch["stop"].to_pylist()))
            if self.board is not None and self._halted():  # the judge went away: no more blocks
                spans = []
        if not spans:  # a ticket after the plan was handed out, or none for a judge gone
            return RENDERED.empty_table()
        rows = [self.reader.read(a, b) for a, b in spans]
        return render_table(self.renderer, pa.concat_tables(rows), self.with_meta)

    def _halted(self) -> bool:
        import ray

        return ray.get(self.board.halted_now.remote())

    def _block(self, ticket: int):
        """The ticket's block; waits while enough blocks wait ahead of the engine."""
        import ray

        while True:
            got = ray.get(self.board.next_block.remote(ticket))
            if not (isinstance(got, str) and got == WAIT):
                return got
            time.sleep(0.05)


class _Commit:
    """The commit stage's worker: each block becomes one exactly-once part; one summary row
    goes back to the driver; with a progress board, the block is reported to it too."""

    def __init__(self, store: PartStore, board=None):
        self.store, self.board = store, board

    def __call__(self, batch: pa.Table) -> pa.Table:
        summary = _commit(batch, self.store)
        if self.board is not None:  # fire and forget: the driver's summaries stay the record
            self.board.on_part.remote(summary["rows"][0].as_py(), summary["committed"][0].as_py())
        return summary


def _commit(batch: pa.Table, store: PartStore) -> pa.Table:
    batch = _without_unsent(batch)
    if not batch.num_rows or "parse_status" not in batch.column_names:  # an empty block
        return pa.Table.from_pylist([{"rows": 0, "errors": 0, "prompt_tokens": 0, "computed_tokens": 0,
                                      "completion_tokens": 0, "committed": False, "first_error": None,
                                      "out_of_scale": 0}], schema=SUMMARY)
    batch, n_out = refuse_out_of_scale(batch)
    errs = pc.equal(batch["parse_status"], PARSE_ERROR)
    n_err = pc.sum(errs.cast(pa.int64())).as_py() or 0
    first = batch.filter(errs)["raw_text"][0].as_py() if n_err else None
    committed = store.write_part(batch) is not None if batch.num_rows else False
    tot = {c: pc.sum(batch[c]).as_py() or 0 for c in ("prompt_tokens", "computed_tokens", "completion_tokens")}
    return pa.Table.from_pylist([{"rows": batch.num_rows, "errors": n_err, **tot, "committed": committed,
                                  "first_error": first, "out_of_scale": n_out}], schema=SUMMARY)


def _without_unsent(batch: pa.Table) -> pa.Table:
    """The block less its requests never sent (the engine found the judge gone): not answers,
    nor attempts; left pending, asked on the rerun (committed as failures, three outages used up
    every attempt of requests never sent: a user's finding)."""
    if not batch.num_rows or "raw_text" not in batch.column_names or "parse_status" not in batch.column_names:
        return batch
    unsent = pc.and_(pc.equal(batch["parse_status"], PARSE_ERROR),
                     pc.starts_with(pc.fill_null(batch["raw_text"].cast(pa.large_string()), ""), f"{UNSENT}:"))
    return batch.filter(pc.invert(pc.fill_null(unsent, False))) if pc.any(unsent).as_py() else batch


def refuse_out_of_scale(batch: pa.Table) -> tuple[pa.Table, int]:
    """Answers whose score (or expected score) lies outside their request's scale (the
    ``scale_lo`` / ``scale_hi`` columns the engine stage passes on) become ``out_of_scale``
    with no score: kept with the judge's text and counted, never fitted, not retried. A batch
    without those columns (an engine stage of its own, vLLM's) is left as it is."""
    if "scale_lo" not in batch.column_names or "scale_hi" not in batch.column_names:
        return batch, 0
    lo, hi = batch["scale_lo"].cast(pa.float64()), batch["scale_hi"].cast(pa.float64())
    scored = pc.less(lo, hi)  # a score request (generate rows carry 0-0)

    def outside(col):
        c = batch[col]
        return pc.fill_null(pc.and_(scored, pc.or_(pc.less(c, lo), pc.greater(c, hi))), False)

    bad_score = pc.and_(outside("score"), pc.is_in(batch["parse_status"], value_set=pa.array(PARSE_USABLE)))
    bad_expected = outside("expected_score")
    n = pc.sum(pc.or_(bad_score, bad_expected).cast(pa.int64())).as_py() or 0
    if not n:
        return batch, 0
    null = pa.scalar(None, pa.float64())
    out = batch.set_column(batch.schema.get_field_index("score"), "score", pc.if_else(bad_score, null, batch["score"]))
    out = out.set_column(out.schema.get_field_index("expected_score"), "expected_score",
                         pc.if_else(bad_expected, null, out["expected_score"]))
    status = pc.if_else(bad_score, pa.scalar(PARSE_OUT_OF_SCALE), out["parse_status"])
    return out.set_column(out.schema.get_field_index("parse_status"), "parse_status", status), n


class RayStartFailed(Exception):
    """Ray did not start (or the cluster in RAY_ADDRESS did not answer). One line, exit 1."""

    exit_code = 1


RAY_START_TIMEOUT_S = 180.0  # JUDGECAL_RAY_START_TIMEOUT_S overrides; Ray itself may wait far longer
START_END_S = 60.0  # how long a stop during Ray's start waits for it to end, to stop it whole
RAY_PROCESSES = b"/ray/"  # in the command lines of the processes Ray starts (its gcs_server, raylet, agents)


def check_ray_address() -> str:
    """RAY_ADDRESS as judgecal can join it ('' for a local instance of its own), or a one-line
    refusal: called before a collect writes anything, and again where Ray starts."""
    address = os.environ.get("RAY_ADDRESS", "").strip()
    if address.lower().startswith(("http://", "https://")):  # `ray job submit`'s address: an easy slip
        raise RayStartFailed(f"RAY_ADDRESS={address} is a dashboard's address (what `ray job submit` takes); "
                             "judgecal joins a cluster at its GCS address (HEAD:6379) or `auto` on the head node")
    if "://" in address:  # Ray takes any URL for Ray Client, where Ray Data's executor fails (a user's finding)
        raise RayStartFailed(f"RAY_ADDRESS={address}: Ray Client (ray://) is not supported, Ray Data needs its "
                             "driver on the cluster; submit the study as a job (jobs/study.py) or run it on a node")
    return address


def check_ray_answers(address: str) -> None:
    """A HOST:PORT address where nothing accepts a connection, said at once: Ray retried it until
    judgecal's start limit (3 minutes by default), with its C++ warnings on the way (a user's
    finding). Only where Ray is about to be joined: `show` and a finished study need no Ray."""
    host, _, port = address.rpartition(":")
    if not (host and port.isdigit()):
        return
    why = connect_error(host.strip("[]"), int(port), 5.0)
    if why:
        raise RayStartFailed(f"RAY_ADDRESS={address}: cannot connect ({why}); start the cluster's head "
                             "(`ray start --head`) or give its GCS address (HEAD:6379); unset RAY_ADDRESS for a "
                             "local Ray of judgecal's own")
    if answers_http1(host.strip("[]"), int(port)):  # the dashboard's port without http://: Ray waited 3 minutes
        raise RayStartFailed(f"RAY_ADDRESS={address} answers HTTP/1 (a dashboard's port, what `ray job submit` "
                             "takes); judgecal joins a cluster at its GCS address (HEAD:6379, which speaks gRPC) or "
                             "`auto` on the head node")


def answers_http1(host: str, port: int, timeout: float = 3.0) -> bool:
    """Whether ``host:port`` answers a plain HTTP/1 request as an HTTP/1 server does (a Ray
    dashboard: "HTTP/1.0 200"); a GCS speaks gRPC (HTTP/2 frames back), a silent port is not
    one either."""
    import socket

    try:
        with socket.create_connection((host, port), timeout) as s:
            s.settimeout(timeout)
            s.sendall(b"GET / HTTP/1.0\r\nHost: judgecal\r\n\r\n")
            return s.recv(5) == b"HTTP/"
    except OSError:
        return False


def init_ray(log=None) -> None:
    """Start a local Ray instance (or join the cluster at RAY_ADDRESS), within a deadline: Ray
    retries an unreachable address for many minutes, and a busy machine can stall a local
    start. A dashboard (http://) or Ray Client (ray://) address is refused in one line. ``log``
    hears one line first (a collect was silent for the ~15 s a local start takes: a user's finding)."""
    import os
    import threading

    import ray

    from judgecal.signals import RAY_OWNER, live_children, tag_ray_start

    if ray.is_initialized():
        return
    address = check_ray_address()
    check_ray_answers(address)
    if log is not None:
        joins = {"": None, "local": None, "auto": "on this machine (RAY_ADDRESS=auto)"}.get(address, f"at {address}")
        log(f"[collect] joining the Ray cluster {joins}" if joins else
            "[collect] starting a local Ray instance (some 10-20 s)")
    outcome: list = []
    ready = threading.Event()
    # a task Ray retries (Ray Data asking a replica still starting where it runs) printed its
    # whole traceback on stdout at each retry (~150 lines for a vLLM replica that failed to
    # start, a user's finding): the failure that stops the collect is said in its own line
    os.environ.setdefault("RAY_enable_output_error_log_if_still_retry", "0")  # stays set in this process
    if not sys.stderr.isatty():  # workers' lines reach a log file without colour codes (a user's finding)
        os.environ.setdefault("RAY_COLOR_PREFIX", "0")

    def start():
        try:
            # without RAY_ADDRESS a local instance of its own: ray.init() alone would attach to any
            # cluster already running on this machine, without a word (a user's finding)
            ray.init(address=address or "local", ignore_reinit_error=True, include_dashboard=False,
                     log_to_driver=True, configure_logging=False, logging_level="ERROR")
        except BaseException as e:  # noqa: BLE001 - handed to the caller
            outcome.append(e)
            ready.set()
            return
        finally:
            os.environ.pop(RAY_OWNER, None)  # its processes have it; this process's later children do not
        outcome.append(None)
        ready.set()
        # Ray's local processes die with the *thread* that started them (Linux's parent-death
        # signal is per thread): this one lives as long as the process.
        threading.Event().wait()

    drop_ray_thread_note()
    if address in ("", "local"):  # a local Ray of its own: what is left of it at the end is found by this tag
        tag_ray_start()
    limit = float(os.environ.get("JUDGECAL_RAY_START_TIMEOUT_S", RAY_START_TIMEOUT_S))
    thread = threading.Thread(target=start, name="judgecal-ray-init", daemon=True)
    thread.start()
    local, deadline = address in ("", "local"), time.monotonic() + limit
    # Ray's processes seen while it starts: a stop that reached them too is told by their end,
    # even where they ended before the stop's handler ran (on a busy machine they had, and the
    # stop waited out the whole failed start, 18 s: CI's finding)
    seen: set[int] = set()
    try:
        while not ready.wait(0.2) and time.monotonic() < deadline:
            if local:
                seen |= live_children(RAY_PROCESSES)
    except KeyboardInterrupt:  # Ctrl-C or SIGTERM while Ray starts
        if local:  # a join starts no local process (and `ray job stop` kills in 3 s)
            _end_start(ready, outcome, log, seen)
        raise
    where = os.environ.get("RAY_ADDRESS") or "a local Ray instance"
    hint = ("check that it is the cluster's GCS address (HEAD:6379) and that the cluster is up, or raise "
            "JUDGECAL_RAY_START_TIMEOUT_S" if address else "on a busy machine retry or raise "
            "JUDGECAL_RAY_START_TIMEOUT_S; or start Ray yourself (`ray start --head`) and set RAY_ADDRESS=auto")
    if not outcome:
        raise RayStartFailed(f"could not start or reach {where} within {limit:g} s; {hint}")
    if outcome[0] is not None:
        raise RayStartFailed(f"could not start or reach {where}: {last_error_line(outcome[0])}; {hint}") from None
    from judgecal.signals import reclaim

    reclaim()  # ray.init may install a SIGTERM handler of its own; ours keeps the one-line stop


def _end_start(ready, outcome: list, log, seen: set[int]) -> None:
    """A stop while Ray starts: its start goes on on its own thread, and a process that ended
    under it left Ray's dashboard and runtime-env agents running, orphaned, some 200 MB each
    time (a user's finding). Let the start end (up to ``START_END_S``), then stop Ray, as every
    command's end does. A second Ctrl-C does not wait. Nor does a stop that reached Ray's own
    processes (a scheduler's SIGTERM to the whole process group): once one of them ends, the start
    cannot end well; it waited up to a minute and ended in Ray's own exit 1 (a user's finding), and
    what is left of Ray ends with this process (Ray's parent-death signal) or got the stop itself.
    ``seen``: Ray's processes (this process's children) seen running before the stop."""
    import ray

    from judgecal.pipeline.quiet import silenced
    from judgecal.signals import live_children

    if not ready.is_set() and log is not None:
        log("[collect] stopping: Ray is still starting; it is stopped once started (a second Ctrl-C leaves "
            "its processes running)")
    ray_processes, deadline = seen | live_children(RAY_PROCESSES), time.monotonic() + START_END_S
    while time.monotonic() < deadline and not ready.is_set():
        if ray_processes - live_children(RAY_PROCESSES):
            return  # the stop reached Ray's own processes
        ready.wait(0.25)
    if outcome and outcome[0] is None and ray.is_initialized():
        with silenced():
            ray.shutdown()


def collect(plan: pa.Table | PlanSource, renderer, engine_cfg: EngineConfig, store: PartStore,
            settings: CollectSettings = CollectSettings(), log=None) -> CollectStats:
    """Compute every request of ``plan`` (a table, or a :class:`PlanSource` over the plan's
    file) without a usable answer in ``store``; returns totals."""
    log = log or (lambda msg: print(msg, file=sys.stderr, flush=True))
    t0 = time.perf_counter()
    source = PlanSource.of(plan)
    if source.num_rows == 0:  # a request set with nothing to ask (URW's criteria where the data brings them):
        return CollectStats(0, 0, 0)  # the caller's line says why; "0 requests planned" read as a fault
    store.sweep(log)  # unreadable or foreign parts are moved aside; what they held is computed again
    if getattr(engine_cfg, "driver_side", False):  # a batch API: submitted and fetched here, no Ray
        from judgecal.pipeline.batches import collect_batches

        return collect_batches(source, renderer, engine_cfg, store, settings, log, t0)
    index = _pending(store, settings.max_attempts, log)
    # measured blocks group grains (runs of whole items); fixed ones are cut here
    grain = max(1, source.num_rows // MAX_GRAINS) if _measured(engine_cfg, settings) else \
        block_size(engine_cfg, settings)
    scan = scan_plan(source, index, grain)
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
    init_ray(log)
    _warn_if_no_node_fits(engine_cfg, log)
    if check_ray_address():  # a cluster's nodes (a local Ray's workers share this environment)
        check_nodes_reach(store)
    interactive = sys.stderr.isatty()  # asked before fd 2 goes through the noise filter
    with drop_known_ray_noise() as terminal:
        _run(source, index, scan, sub_renderer, engine_cfg, store, settings, stats, todo, log,
             terminal if interactive else None, real_stderr=terminal)
    stats.wall_s = time.perf_counter() - t0
    return stats


def _warn_if_no_node_fits(engine_cfg, log) -> None:
    """One line where no node of the cluster has the CPUs one engine replica asks for, or the
    cluster has fewer GPUs (a replica's placement group may span nodes): the collect would wait
    without a word (a user's finding: 2 CPUs on 1-CPU nodes). A line, not a refusal, on a
    cluster (an autoscaler may add nodes); on the local Ray judgecal starts nothing can join,
    and `device = "gpu"` on a machine without one waited forever (a user's finding): refused."""
    import ray

    need = engine_cfg.resources
    nodes = [n.get("Resources", {}) for n in ray.nodes() if n.get("Alive")]
    most_cpus = max((r.get("CPU", 0.0) for r in nodes), default=0.0)
    all_gpus = sum(r.get("GPU", 0.0) for r in nodes)
    field = next((f for f in ("actor_cpus", "cpus_per_replica") if hasattr(engine_cfg, f)), None)
    on_cluster = bool(check_ray_address())
    for what, want, have, lower in (("CPUs", need.num_cpus, most_cpus, field and f"lower [engine] {field} or "),
                                    ("GPUs", need.num_gpus, all_gpus, "")):
        if want <= have:
            continue
        if not on_cluster:
            raise InputError(f"[engine].{field}" if what == "CPUs" and field else "[engine]",
                             f"an engine replica asks for {want:g} {what} but this machine's Ray has {have:g}, and "
                             f"no node can join the local Ray judgecal starts: {lower or ''}run it where they are "
                             "(a cluster: RAY_ADDRESS)" + ('; on the CPU, [engine] device = "cpu"'
                                                           if what == "GPUs" and hasattr(engine_cfg, "device") else ""))
        where = "the largest node of this Ray cluster has" if what == "CPUs" else "this Ray cluster has"
        log(f"[collect] warning: an engine replica asks for {want:g} {what} but {where} {have:g}: it waits "
            f"until such nodes join (an autoscaler may add them); else {lower or ''}start bigger nodes")


def _pending(store: PartStore, max_attempts: int, log) -> PendingIndex:
    """What the committed parts say is done. A part whose pages turn out corrupt is moved
    aside as it is read (its footer was fine), and the parts are read again without it."""
    for _ in range(len(store.parts())):
        try:
            return PendingIndex.from_store(store, max_attempts)
        except BadPart as e:
            log(f"[collect] {e.note}; its requests are computed again")
    return PendingIndex.from_store(store, max_attempts)


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
    # "An exception was raised from a task of operator ...": the collect's own line names the
    # cause (root_cause), and its traceback is no use to a user
    logging.getLogger("ray.data._internal.execution.streaming_executor_state").setLevel(logging.CRITICAL)
    # the ~100-line "Full stack trace" of an error Ray Data takes for its own (an engine replica
    # that died starting is one): off the console, still in Ray Data's log file (its filter
    # reads `hide`); the collect's one line names the cause
    exceptions = logging.getLogger("ray.data.exceptions")
    if _hide_on_console not in exceptions.filters:
        exceptions.addFilter(_hide_on_console)


def _hide_on_console(record) -> bool:
    record.hide = True
    return True


def _measured(engine_cfg: EngineConfig, s: CollectSettings) -> bool:
    """Blocks follow the measured rate unless their size is fixed or the engine's stage
    reports nothing to measure."""
    return s.block_rows is None and engine_cfg.reports_progress


def tickets_for(todo: int, status: dict | None, declared_rows: int, actors: int, first_rows: int) -> int:
    """Tickets for one pipeline of measured blocks, ``todo`` pending rows in all: twice the
    blocks the rows not yet handed out take, plus :data:`TICKET_SLACK`. ``status``: the board's
    dispenser status after an earlier pipeline (its ``handed_rows`` and measured ``target``
    rows a block), None for the first pipeline, whose blocks are a small first block a replica,
    then the engine's declared ``declared_rows``, and which gets at least
    :data:`FIRST_TICKETS`. Every ticket left over once the plan is handed out still passes
    through the three stages before the pipeline ends, about 14 ms each (a 53,839-request
    collect of a fast judge sat at 100% for 45 s behind 3,160 of them: a user's finding); too
    few start another pipeline, sized by the measured rate."""
    if status is None:
        blocks = actors + math.ceil(max(0, todo - actors * first_rows) / max(1, declared_rows))
        return max(FIRST_TICKETS, 2 * blocks + TICKET_SLACK)
    rows = max(0, todo - int(status.get("handed_rows", 0)))
    target = status.get("target")
    blocks = math.ceil(rows / max(1, target)) if target else actors + math.ceil(rows / max(1, declared_rows))
    return 2 * blocks + TICKET_SLACK


def _pipeline(inputs: list[dict], source, index, renderer, engine_cfg, store, settings, board, measured: bool):
    """One Ray Data pipeline over ``inputs`` (blocks' plan rows, or tickets for the board)."""
    import ray.data

    # One row per block: the workers read the plan, the driver never holds it.
    ds = ray.data.from_items(inputs, override_num_blocks=len(inputs))
    # This dataset's own copy of the context (the global one is left alone): progress is ours,
    # and blocks reach the engine in plan order, so consecutive items of one group (one
    # article) follow each other and the engine keeps reusing the shared prefix. Measured
    # blocks are cut in plan order by the board as the one render worker asks, whatever the
    # order its tickets come in; Ray Data's reordering would hold a block back behind a ticket
    # that waits for that very block to be answered, so it is off for them.
    ds.context.enable_progress_bars = False
    ds.context.print_on_execution_start = False
    ds.context.execution_options.preserve_order = not measured
    if board is not None and hasattr(ds.context, "execution_no_progress_timeout_s"):
        # a block of a slow judge may take longer than Ray Data's no-progress limit; while the
        # engine reports, judgecal's own rule (nothing answered for progress.STALL_S) stops a hang
        ds.context.execution_no_progress_timeout_s = -1
    # Render and commit run in small pools of long-lived workers with num_cpus=0: they are
    # light, must never wait behind an engine actor that holds every CPU, and as tasks they
    # started a fresh worker process per block on a busy machine (measured: 0.6x of the bare
    # engine instead of 0.95x). As their own stages the engine actors never hold the items.
    light = {"batch_size": None, "batch_format": "pyarrow", "zero_copy_batch": True, "num_cpus": 0,
             "compute": ray.data.ActorPoolStrategy(size=LIGHT_ACTORS)}
    ds = ds.map_batches(_Render, fn_constructor_kwargs={"renderer": renderer, "with_meta": engine_cfg.wants_meta,
                                                        "source": source, "index": index, "board": board}, **light)
    ds = engine_cfg.build_stage(ds, settings.num_actors, board)
    # ray.data.llm's build_processor calls ray.init, which sets Ray's SIGTERM handler (exit 15,
    # no line: the vLLM stranger's finding) before it sees Ray is up: ours goes back
    from judgecal.signals import reclaim

    reclaim()
    return ds.map_batches(_Commit, fn_constructor_kwargs={"store": store, "board": board}, **light)


def _run(source, index, scan, renderer, engine_cfg, store, settings, stats, todo, log, terminal=None,
         real_stderr=None) -> None:
    """The Ray Data pipeline, followed to its end. ``terminal``: a stream for a progress bar
    (stderr is a terminal), else plain progress lines through ``log``; ``real_stderr``: the
    stream for a last line written past the noise filter (see :func:`_summaries`).

    Measured blocks: the pipeline's input rows are tickets that the board (an actor) turns
    into blocks as the render stage asks; once every planned request is committed the driver
    stops reading (the tickets left over are never rendered), and a plan that needs more
    blocks than one pipeline has tickets goes on in another."""
    import ray
    import ray.data  # before its loggers are quietened: its import sets their levels

    from judgecal.pipeline.progress import CollectProgress, start_board

    _quiet_ray_data()
    measured = _measured(engine_cfg, settings)
    dispenser = None
    if measured:
        dispenser = BlockDispenser([a for a, _ in scan.blocks], [b for _, b in scan.blocks], scan.rows,
                                   settings.part_seconds, settings.part_rows, settings.num_actors,
                                   first_rows=min(FIRST_ROWS, block_size(engine_cfg, settings)))
    board = start_board(settings.fail_fast_requests, dispenser) if engine_cfg.reports_progress else None
    progress = CollectProgress(stats, todo, log, board, settings.fail_fast_requests, interactive=terminal is not None,
                               stream=terminal)
    reasons: Counter = Counter()
    stop: list[str] = []  # the fail-fast reason, once the ticker has interrupted the main thread
    parts_before = set(store.parts())
    handed_out, handed = 0, None  # tickets of earlier pipelines (one block each for the whole collect)
    try:
        while True:
            if measured:
                n = min(MAX_TICKETS, len(scan.blocks), tickets_for(
                    todo, handed, block_size(engine_cfg, settings), settings.num_actors, dispenser.first_rows))
                inputs = [{"ticket": t} for t in range(handed_out, handed_out + n)]
                handed_out += n
                stats.tickets = handed_out
            else:
                inputs = [{"start": a, "stop": b} for a, b in scan.blocks]
            ds = _pipeline(inputs, source, index, renderer, engine_cfg, store, settings, board, measured)
            halt = board.halt.remote if board is not None else None
            drain = max(DRAIN_S, engine_cfg.longest_request_s)  # a block in flight ends within a request's life
            with closing(_summaries(ds, progress, stop, lambda why: _stopped_early(progress, stats, why, store),
                                    real_stderr, halt, drain)) as summaries:  # closed at once: Ray Data stops
                for s in summaries:
                    progress.on_summary(s)
                    stats.out_of_scale += s["out_of_scale"]
                    if s["first_error"]:
                        reasons[error_reason(s["first_error"])] += s["errors"]
                    if measured and stats.computed >= todo:
                        break  # every planned request is committed: the tickets left over are not needed
            if not measured or stats.computed >= todo:
                break
            handed = ray.get(board.blocks.remote())
            if handed["exhausted"] or handed["halted"]:
                break
        progress.tick(force=True)
        if why := progress.final_reason():  # the judge went away: what it answered is committed, the rest waits
            raise CollectFailed(_stopped_early(progress, stats, why, store))
        if measured:
            _log_blocks(ray.get(board.blocks.remote()), engine_cfg, settings, stats, log)
    except CollectFailed:
        raise
    except BaseException as e:  # noqa: BLE001 - a worker or storage failure, reported in one line
        # Ctrl-C, or an error raised while a library cleaned up after one ("RuntimeError: release
        # unlocked lock", exit 3 and no stop line: a user's finding)
        if (ctrl_c := _interrupted(e)) is not None:
            if stop:  # the ticker's interrupt, wherever it landed: the fail-fast rule, exit 3
                raise CollectFailed(_stopped_early(progress, stats, stop[0], store)) from None
            if board is not None and progress.done:  # what the stop cost (a user counted ~7,400 answers lost)
                # said once Ray has stopped (the CLI calls it then): counted before, the blocks
                # still committing made "136 of them committed" and then "kept: 187" (a user's finding)
                ctrl_c.collect_cost = functools.partial(_stop_cost, store, parts_before, stats, progress.done,
                                                        measured)
            raise ctrl_c from None
        if not isinstance(e, Exception):  # SystemExit, GeneratorExit: not ours to word
            raise
        # the workers may have committed parts whose summaries the driver had not read yet (a block late)
        parts, rows = _committed_since(store, parts_before, stats)
        if died_starting(e) and not rows and not parts:
            cause, deadline = root_cause(e), time.monotonic() + REASON_WAIT_S  # its own line may be on its way
            while first_reason(worker_errors(), cause) is None and time.monotonic() < deadline:
                time.sleep(0.1)
            raise CollectFailed(start_failure(e, worker_errors(), engine_cfg)) from e
        raise CollectFailed(f"stopped after {rows} new responses ({parts} new parts committed and "
                            f"kept; rerun to resume): {root_cause(e)}") from e
    finally:
        progress.close()
    stats.error_reasons = dict(reasons.most_common(3))
    if stats.out_of_scale:
        log(f"[collect] {stats.out_of_scale} answers gave a score outside the judge's scale: refused (parse status "
            f"{PARSE_OUT_OF_SCALE!r}, no parsed score, not retried; an expected-score reading keeps the "
            "expected score of its distribution where it has one)")


def _interrupted(e: BaseException) -> KeyboardInterrupt | None:
    """The Ctrl-C (or SIGTERM) that ``e`` was raised while handling, if any."""
    seen = set()
    while e is not None and id(e) not in seen:
        if isinstance(e, KeyboardInterrupt):
            return e
        seen.add(id(e))
        e = e.__context__ or e.__cause__
    return None


def _stop_cost(store: PartStore, before: set[str], stats: CollectStats, answered: int, measured: bool) -> str:
    """What a stop cost, read from the store once nothing commits any more: the answers of the
    blocks that were in flight."""
    kept = _committed_since(store, before, stats)[1]
    done = max(answered, kept)
    if kept >= done:  # every answer committed: no block was in flight to lose
        return f"[collect] stopped after {done:,} answers in this collect, every one of them committed"
    return (f"[collect] stopped after {done:,} answers in this collect, {kept:,} of them committed; the rest, in "
            "blocks in flight, are asked again on resume" + (
                " (a block is about [collect] part_seconds of the judge's work)" if measured else ""))


def _committed_since(store: PartStore, before: set[str], stats: CollectStats) -> tuple[int, int]:
    """(parts, rows) this collect committed, read from the store (the driver's own count reads
    the commit stage's summaries a block late), never fewer than the driver counted."""
    try:
        new = [n for n in store.parts() if n not in before]
        rows = sum(store.ws.parquet_file(n).metadata.num_rows for n in new)
    except Exception:  # noqa: BLE001 - the storage may be what failed
        return stats.parts, stats.computed
    return max(stats.parts, len(new)), max(stats.computed, rows)


def _log_blocks(status: dict, engine_cfg: EngineConfig, settings: CollectSettings, stats: CollectStats, log) -> None:
    """Say what sized the blocks when the measured rate is far from the declared one."""
    rate, sizes = status.get("rate"), status.get("sizes") or []
    stats.measured_rate = None if rate is None else round(rate, 3)
    declared = engine_cfg.requests_per_s
    if rate and len(sizes) > settings.num_actors and not (declared / 3 <= rate <= declared * 3):
        log(f"[collect] measured {rate:,.1f} requests/s a replica in its own time, over its last batches (the "
            f"engine declares {declared:,.1f}; the progress lines' rate is over the whole collect): blocks of "
            f"{min(sizes)}-{max(sizes)} requests ({len(sizes)} in all), each ~{settings.part_seconds:g} s of its work")


def _stopped_early(progress, stats: CollectStats, why: str, store: PartStore) -> str:
    """The stop line, with what the store holds: the driver may not have read the summaries of
    parts committed just before (it said "0 of 48" beside 2 committed parts)."""
    try:
        kept = len(store)  # as the Ctrl-C line counts
    except Exception:  # noqa: BLE001 - the storage may be what failed: the driver's count, a lower bound
        kept = stats.already_done + stats.computed
    return (f"stopped early after {progress.done} requests ({kept:,} responses committed and kept for the "
            f"{stats.planned:,} planned): {why}")


REASON_WAIT_S = 2.0  # for a replica that died starting: Ray forwards its log lines a moment after the error
DRAIN_S = 120.0  # how long blocks in flight may take to end once the judge went away
ITER_END_S = 10.0  # Ray Data's iterator threads end within 0.1 s of its close (measured)
# the threads Ray Data (2.60) starts in the driver to read a dataset that call into Ray
ITER_THREADS = ("iter_threaded", "StreamingExecutor-", "ray-data-metadata-prefetch")
STOP_GRACE_S = 5.0  # how long the main thread has to take the ticker's interrupt (a lost cluster)
OWNS_PROCESS = False  # set by the CLI when judgecal is the program: only then may it end the process


def _summaries(ds, progress, stop: list, stop_line=None, real_stderr=None, halt=None, drain=DRAIN_S):
    """The commit stage's summary rows, read on the main thread (so Ctrl-C lands inside Ray
    Data's iterator, which then shuts its executor down cleanly), while a ticker thread prints
    progress as blocks are answered and, when the fail-fast rule fires or the cluster stops
    answering, records the reason in ``stop`` and interrupts the main thread. It interrupts
    only while the main thread reads rows (a lock orders the two), so the interrupt lands
    inside the caller's ``try``.

    A main thread waiting inside Ray's C++ for a cluster that is gone never takes the interrupt
    (Ray would end the process later, without a line): when the cluster is lost and judgecal
    is the program (``OWNS_PROCESS``), after ``STOP_GRACE_S`` the ticker writes the stop line
    itself (``stop_line(why)``, on ``real_stderr``) and ends the process with CollectFailed's
    status. Nothing is lost: parts are committed whole or not at all, as under a kill.

    When the judge goes away mid-collect (``progress.gone_reason``), ``halt()`` tells the board:
    the render stage starts no more blocks, the ones in flight end and commit, and the reason
    waits in ``progress.halted`` for the caller. Blocks still in flight after ``drain`` s (or
    with no ``halt``: no board) are stopped as above."""
    import threading

    done, reading = threading.Event(), threading.Lock()
    inside, lost_seen = [True], []

    from judgecal.pipeline.cluster_watch import GcsWatch

    watch = GcsWatch.of_this_driver()

    def ticker():
        halted_at = 0.0
        while not done.wait(0.25):
            progress.tick()
            lost = watch.lost() if watch else None
            if lost:
                lost_seen.append(lost)
            why = progress.stop_reason() or lost
            if not why and not progress.halted and (gone := progress.gone_reason()):
                if halt is None:
                    why = gone
                else:
                    halt()
                    progress.halted, halted_at = gone, time.monotonic()
            elif not why and progress.halted and time.monotonic() - halted_at > drain:
                why = progress.halted.replace("; fix it", f"; its blocks in flight did not end within {drain:g} s "
                                              "(not committed); fix it", 1)
            if why:
                with reading:
                    if not inside[0]:
                        return
                    stop.append(why)
                    wake()  # bound below, before the ticker starts
                # the main thread waits in Ray for a cluster that is gone: Ray would end the
                # process without a word; only a program (not a caller's process) ends itself
                if lost and OWNS_PROCESS and stop_line is not None and not done.wait(STOP_GRACE_S):
                    _last_word(f"judgecal: collect: {stop_line(why)}", real_stderr)
                    os._exit(CollectFailed.exit_code)
                return

    with main_thread_waker() as wake:
        thread = threading.Thread(target=ticker, name="judgecal-progress", daemon=True)
        thread.start()
        before = set(threading.enumerate())
        try:
            # iter_rows reads a block ahead, so these summaries come a block late (progress takes
            # "committed" from the commit stage's reports to the board instead); without the
            # read-ahead the driver stops reading while the leftover tickets are still submitted,
            # and the raylet prints their kill on stdout
            yield from ds.iter_rows()
        finally:
            with reading:
                inside[0] = False
            done.set()
            thread.join()
            if not lost_seen:  # a lost cluster: Ray ends the process at its own limit, the line goes first
                _let_end(set(threading.enumerate()) - before)


def _let_end(threads: set) -> None:
    """Wait (up to ``ITER_END_S`` in all) for the threads of Ray Data's row iterator and executor
    to end once the iterator is closed: one still inside its step when ``ray.shutdown()`` ran
    touched the stopped core worker, which ended the process with status 1 after the stop line
    (about 1 collect in 3 stopped by the fail-fast rule). Only those (:data:`ITER_THREADS`): its
    block prefetcher parks for good, calling nothing, and a cluster with usage stats on runs a
    poller for the process's life (a wait for them took the whole time, past `ray job stop`'s
    3 s before SIGKILL)."""
    deadline = time.monotonic() + ITER_END_S
    for t in threads:
        if t.name.startswith(ITER_THREADS):
            t.join(max(0.0, deadline - time.monotonic()))


def _last_word(line: str, stream) -> None:
    try:
        print(redact(line), file=stream or sys.stderr, flush=True)
    except Exception:  # noqa: BLE001 - the process ends next either way
        pass
