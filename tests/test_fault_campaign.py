"""The fault campaign (issue 15, item 2): each fault injected at seeded random points, three
trials each, and per trial what was lost (must be nothing), misread (must be nothing) and
redone.

* an OpenAI-compatible judge that misbehaves (:class:`FaultServer`, a local server): 429 with
  and without Retry-After, 500, malformed JSON, a body cut short, a 200 with no choices, a 200
  that is not JSON, no answer for longer than the engine's timeout, a connection closed
  without an answer. Each trial is a real collect (render -> 2 http engine actors -> commit,
  on a local Ray) of 72 requests in which every fault meets 3 random requests (by the trial's
  seed): some for 1-2 attempts (transient: answered after exactly that many retries), some
  for every attempt of the collect (permanent: recorded as failed with the reason after
  ``max_retries + 1`` tries). A 200 that is not a chat completion is not retried within a
  collect: it fails at once with the reason, that request alone. Every planned request ends
  with a row, answered or failed with its reason, never dropped; every answer is its own
  request's; the rerun (the judge healed) computes exactly the failed ones, once each. The
  client logs each attempt (:class:`CountedHttp`), the server counts what reached it.
* the judge's server dying (connections cut, port refusing) after a random number of answers
  and coming back within the engine's retries, or only for the rerun.
* SIGKILL of an engine actor, and of the driver (`judgecal collect` joined to a running Ray
  with ``RAY_ADDRESS``, as a job on a cluster), after a random number of parts: nothing lost,
  nothing committed twice, the rerun completes.
* bad parts in ``responses/`` (truncated at a random byte, random bytes, another Parquet
  file): named in one line and moved aside, the rest read as written, the rerun recomputes
  what they held; stray files (not parts, a copied part, another plan's part) never misread;
  a random bit flipped inside a part: refused or harmless, never other values (parts carry
  page checksums; without them 14 of 100 flips read as other values).
* the S3 endpoint refusing (HTTP 503 SlowDown) or stalling (requests held unanswered, then
  answered late) for a few seconds from a random request of a `judgecal collect` on s3://
  (a real endpoint, moto's server, behind tests/s3_endpoint.py's proxy): the collect retries
  through it or stops in one line naming the storage error; nothing partial is visible, the
  rerun completes, every planned request has one row, its own answer.

Not here: a worker node SIGKILLed (tests/test_job_submit.py, a two-node cluster), the driver
killed with the local Ray it started itself (tests/test_pipeline.py) and the S3 endpoint
cutting uploads (tests/test_s3.py): single trials there, each several times the cost of a
trial here.

Each test appends one row to the campaign's table (fault, how injected, trials, lost,
misread, redone) once its assertions held; with ``JUDGECAL_WRITE_FAULT_TABLE=1`` the module
writes it to ``benchmarks/results/fault_campaign.json`` (``benchmarks/fault_table.py``
renders it as Markdown): the faults that ran replace their rows (each stamped ``when``), the
others' rows are kept.
"""

from __future__ import annotations

import json
import math
import os
import random
import re
import shutil
import signal
import socket
import sys
import threading
import time
from collections import Counter
from dataclasses import dataclass, field, replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from judgecal.config import load_study
from judgecal.datasets import load_dataset, subset_items
from judgecal.engines import HttpEngineConfig, SimulatedEngineConfig
from judgecal.engines.base import EngineConfig, seed_of
from judgecal.engines.http import HttpEngine
from judgecal.methods.runner import StudyRunner
from judgecal.pipeline import CollectSettings, PartStore, answered, collect, completeness
from judgecal.pipeline.collect import CollectFailed
from judgecal.probes import ProbeRenderer, build_plan, load_bank
from judgecal.scale import ScoreScale
from judgecal.workspace import Workspace

from conftest import ROOT, chat_completion, write_config
from s3_endpoint import BUCKET, CuttingProxy, aws_env, start_moto
from test_faults_pipeline import collected, main_err, study_copy  # noqa: F401 - the collected study fixture
from test_s3 import PRISM, client, keys

TRIALS = 3
SCALE = ScoreScale(1, 5)
TABLE: list[dict] = []  # one row per fault, in the order the tests run
TABLE_FILE = ROOT / "benchmarks" / "results" / "fault_campaign.json"


@pytest.fixture(scope="module", autouse=True)
def _campaign():
    """The engine configs below travel to Ray's workers by value; the table is written last."""
    import ray.cloudpickle

    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])
    yield
    if os.environ.get("JUDGECAL_WRITE_FAULT_TABLE") == "1" and TABLE:
        # the faults that ran replace their rows (a run of some tests, -k, keeps the others' rows)
        when = time.strftime("%Y-%m-%d %H:%M")
        new = {r["fault"]: {**r, "when": when} for r in TABLE}
        old = json.loads(TABLE_FILE.read_text())["rows"] if TABLE_FILE.exists() else []
        rows = [new.pop(r["fault"], r) for r in old] + list(new.values())
        TABLE_FILE.parent.mkdir(exist_ok=True)
        TABLE_FILE.write_text(json.dumps({"trials_per_fault": TRIALS, "when": when, "rows": rows}, indent=2) + "\n")


def add_row(fault: str, how: str, trials: list[dict], redone: str, misread: int = 0, **totals) -> None:
    """One row of the table; called after the test's assertions held (``misread``: answers read
    as another request's or as other values, checked by every test)."""
    lost = sum(t["lost"] for t in trials)
    TABLE.append({"fault": fault, "how": how, "trials": len(trials), "lost": lost, "misread": misread,
                  "redone": redone, **totals, "per_trial": trials})
    print(f"\n{fault}: {len(trials)} trials, lost {lost}; {redone}\n  {trials}")


# -- a chat-completions server that injects one fault -----------------------------------------
HTTP_FAULTS = {
    # name: (how it is injected, retried within a collect?, the reason a failed request records)
    "429 with Retry-After": ("HTTP 429, `Retry-After: 1`", True, r"^RateLimitError: Error code: 429"),
    "429 without Retry-After": ("HTTP 429, no Retry-After", True, r"^RateLimitError: Error code: 429"),
    "500": ("HTTP 500 with a JSON error body", True, r"^InternalServerError: Error code: 500"),
    "malformed JSON": ("HTTP 200, its JSON cut short (Content-Length matches)", False, r"^JSONDecodeError: "),
    "truncated body": ("HTTP 200, the connection closed at half its Content-Length", True,
                       r"^APIConnectionError: Connection error"),
    "200 with no choices": ("HTTP 200, `\"choices\": []`", False, r"^MalformedAnswer: .*no choices"),
    "200 that is not JSON": ("HTTP 200, `Content-Type: text/html` (a proxy's error page)", False,
                             r"^MalformedAnswer: .*not a chat completion"),
    "hang": ("no answer for 8 s, engine timeout 3 s", True, r"^APITimeoutError: Request timed out"),
    "closed connection": ("request read, connection closed without an answer", True,
                          r"^APIConnectionError: Connection error"),
}
HANG_S, HANG_TIMEOUT_S = 8.0, 3.0  # a generous timeout: a busy 2-core machine must not time out a clean request


def score_of(key: int) -> int:
    """The answer the server gives a request (by its seed): a row holding another request's
    answer would show."""
    return 1 + key % 5


class FaultServer:
    """An OpenAI-compatible chat endpoint on 127.0.0.1 that answers ``Score: k`` (``score_of``
    the request's seed) except where ``faults`` says: a request's seed -> (the fault it meets,
    how many of its attempts meet it; ``math.inf``: every one). The first request it sees (collect's
    preflight) is always answered and not counted. ``die()`` stops it as a killed process
    would (open connections cut, the port refusing), ``revive()`` starts it on the same port.
    ``die_after``: from the answer after that many on, it cuts every request until
    ``revive()`` (``dying`` set), so the outage starts at that answer, not when a thread
    watching the count next runs (on a loaded machine the collect could end first)."""

    def __init__(self):
        self.faults: dict[int, tuple[str, float]] = {}
        self.seen: Counter = Counter()  # seed -> attempts that reached the server
        self.arrivals: dict[int, list[float]] = {}  # seed -> when each attempt arrived
        self.answered = 0
        self.die_after: int | None = None
        self.dying = threading.Event()
        self.preflight = True
        self.lock = threading.Lock()
        self.conns: set = set()
        self.gone = threading.Event()  # releases hanging handlers at close
        self.port = 0
        self._start()
        self.url = f"http://127.0.0.1:{self.port}/v1"

    def _start(self):
        owner = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"  # keep-alive, as real servers

            def setup(self):
                super().setup()
                with owner.lock:
                    owner.conns.add(self.connection)

            def finish(self):
                with owner.lock:
                    owner.conns.discard(self.connection)
                try:
                    super().finish()
                except OSError:
                    pass

            def do_POST(self):
                key = json.loads(self.rfile.read(int(self.headers["Content-Length"])))["seed"]
                with owner.lock:
                    if owner.dying.is_set():
                        fault = "closed connection"  # dead from the moment it answered its last
                    elif owner.preflight:
                        owner.preflight, fault = False, None
                    else:
                        owner.seen[key] += 1
                        owner.arrivals.setdefault(key, []).append(time.monotonic())
                        kind, times = owner.faults.get(key, (None, 0))
                        fault = kind if owner.seen[key] <= times else None
                    owner.answered += fault is None
                    if owner.die_after is not None and owner.answered > owner.die_after:
                        owner.dying.set()
                try:
                    owner.respond(self, fault, key)
                except OSError:  # the client gave up (a timeout) or the server was killed
                    self.close_connection = True

            def log_message(self, *a):
                pass

        class Server(ThreadingHTTPServer):
            daemon_threads = True
            request_queue_size = 64

            def handle_error(self, request, client_address):
                pass  # a connection cut by die() or by the client: no traceback on stderr

        self.server = Server(("127.0.0.1", self.port), Handler)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def respond(self, h, fault, key):
        good = chat_completion(f"Score: {score_of(key)}", prompt_tokens=17, completion_tokens=2)
        if fault is None:
            return send(h, 200, good)
        if fault == "429 with Retry-After":
            return send(h, 429, b'{"error": {"message": "slow down"}}', {"Retry-After": "1"})
        if fault == "429 without Retry-After":
            return send(h, 429, b'{"error": {"message": "slow down"}}')
        if fault == "500":
            return send(h, 500, b'{"error": {"message": "internal error"}}')
        if fault == "malformed JSON":
            return send(h, 200, good[: len(good) // 2])
        if fault == "truncated body":
            h.send_response(200)
            h.send_header("Content-Type", "application/json")
            h.send_header("Content-Length", str(len(good)))
            h.end_headers()
            h.wfile.write(good[: len(good) // 2])
            h.wfile.flush()
            return cut(h)
        if fault == "200 with no choices":
            return send(h, 200, json.dumps({**json.loads(good), "choices": []}).encode())
        if fault == "200 that is not JSON":
            return send(h, 200, b"<html><body>502 Bad Gateway</body></html>", {"Content-Type": "text/html"})
        if fault == "hang":
            self.gone.wait(HANG_S)
            return cut(h)
        if fault == "closed connection":
            return cut(h)
        raise AssertionError(fault)

    def die(self):
        self.server.shutdown()
        self.server.server_close()
        with self.lock:
            conns = list(self.conns)
        for c in conns:
            try:
                c.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def revive(self):
        self.die_after = None
        self.dying.clear()
        self._start()

    def close(self):
        self.gone.set()
        self.die()


def send(h, code: int, body: bytes, headers: dict | None = None) -> None:
    h.send_response(code)
    for k, v in {"Content-Type": "application/json", "Content-Length": str(len(body)), **(headers or {})}.items():
        h.send_header(k, v)
    h.end_headers()
    h.wfile.write(body)


def cut(h) -> None:
    h.close_connection = True
    h.connection.shutdown(socket.SHUT_RDWR)


# -- the judge: the http engine, each attempt logged by the client ----------------------------
@dataclass(frozen=True)
class CountedHttp(HttpEngineConfig):
    """The http engine as a collect runs it (one shared rate limiter for the pool), with every
    attempt it sends (retries included) logged by request id in ``attempts_dir``: a refused
    connection never reaches the server, so only the client can count it."""

    attempts_dir: str = ""
    limiter: object = field(default=None, compare=False, repr=False)

    def build_stage(self, ds, replicas: int = 1, board=None):
        from judgecal.engines.ratelimit import start_shared_limiter

        limiter = start_shared_limiter(self.requests_per_minute, self.tokens_per_minute)
        return EngineConfig.build_stage(replace(self, limiter=limiter), ds, replicas, board)

    def build(self):
        from judgecal.engines.ratelimit import RemoteLimiter

        engine = HttpEngine(self, RemoteLimiter(self.limiter) if self.limiter is not None else None)
        request, log = engine._request, Path(self.attempts_dir) / f"{os.getpid()}-{id(engine)}.log"

        def counted(p, max_tokens, **kw):
            with open(log, "a") as f:
                f.write(p.request_id + "\n")
            return request(p, max_tokens, **kw)

        engine._request = counted
        return engine


def attempts(folder: Path) -> Counter:
    return Counter(ln for p in folder.glob("*.log") for ln in p.read_text().split())


_PLAN = {}


def campaign_plan():
    """72 requests: 6 SummEval articles x 4 summaries x the 3 length probes."""
    if not _PLAN:
        items = subset_items(load_dataset("summeval"), 6, 4)
        probes = load_bank("style").probes(["length"])
        plan = build_plan(items, probes, 1, SCALE, HttpEngineConfig().identity)
        _PLAN.update(plan=plan, renderer=ProbeRenderer(items, probes, SCALE))
    return _PLAN["plan"], _PLAN["renderer"]


SETTINGS = CollectSettings(block_rows=6, num_actors=2)
PER_FAULT = 3  # requests each fault meets in a trial
MAX_RETRIES = 2


def best_rows(store: PartStore) -> dict[str, dict]:
    t = store.read(["request_id", "parse_status", "score", "raw_text", "attempt"])
    return {r["request_id"]: r for r in t.to_pylist()}


def check_answers(rows: dict, key_of: dict) -> None:
    """Every answered row carries its own request's answer."""
    for rid, r in rows.items():
        if r["parse_status"] == "ok":
            assert r["score"] == score_of(key_of[rid]), (rid, r)


def run_collect(plan, renderer, cfg, store) -> tuple:
    lines: list[str] = []
    t = time.perf_counter()
    stats = collect(plan, renderer, cfg, store, SETTINGS, log=lines.append)
    return stats, lines, time.perf_counter() - t


def rerun_heals(plan, renderer, cfg, store, server, key_of, failed: set[str]) -> int:
    """The judge healed: the rerun computes exactly the failed requests, once each (attempt 2),
    and then every planned request is answered with its own answer."""
    server.faults = {}
    stats, _, _ = run_collect(plan, renderer, cfg, store)
    assert (stats.already_done, stats.computed, stats.errors) == (plan.num_rows - len(failed), len(failed), 0)
    c = completeness(plan, store)
    assert (c.answered, c.failed, c.missing) == (plan.num_rows, 0, 0)
    rows = best_rows(store)
    check_answers(rows, key_of)
    assert {rid for rid, r in rows.items() if r["attempt"] == 2} == failed
    every = Counter(store.read_all(["request_id"])["request_id"].to_pylist())
    assert all(every[rid] == (2 if rid in failed else 1) for rid in key_of), "a request committed twice"
    return stats.computed


def http_trial(tmp: Path, trial: int) -> dict[str, dict]:
    """One collect in which each fault meets ``PER_FAULT`` random requests of the plan (by the
    trial's seed), then the rerun with the judge healed. Returns each fault's figures."""
    plan, renderer = campaign_plan()
    ids = plan["request_id"].to_pylist()
    key_of = {rid: seed_of(rid, s) % 2**31 for rid, s in zip(ids, plan["seed"].to_pylist())}
    rng = random.Random(f"http/{trial}")
    chosen = rng.sample(ids, PER_FAULT * len(HTTP_FAULTS))
    meets: dict[str, tuple[str, float]] = {}  # request -> (fault, attempts that meet it)
    for i, fault in enumerate(HTTP_FAULTS):
        mine = chosen[i * PER_FAULT:(i + 1) * PER_FAULT]
        permanent = rng.randint(1, PER_FAULT - 1)  # the rest transient: 1 or 2 attempts
        for j, rid in enumerate(mine):
            meets[rid] = (fault, math.inf if j < permanent else rng.randint(1, MAX_RETRIES))
    server = FaultServer()
    server.faults = {key_of[rid]: m for rid, m in meets.items()}
    log_dir = tmp / f"attempts-{trial}"
    log_dir.mkdir()
    cfg = CountedHttp(base_url=server.url, model="m", concurrency=4, max_retries=MAX_RETRIES, logprobs=False,
                      timeout_s=HANG_TIMEOUT_S, attempts_dir=str(log_dir))
    store = PartStore(Workspace(tmp / f"responses-{trial}"))
    try:
        stats, _, wall = run_collect(plan, renderer, cfg, store)
        c = completeness(plan, store)
        assert (c.planned, c.answered + c.failed, c.missing) == (len(ids), len(ids), 0)  # nothing dropped
        rows = best_rows(store)
        tries = attempts(log_dir)
        # what each request met: clean 1 try; transient k faults + 1; permanent max_retries + 1;
        # a fault not retried within the collect: 1 try, failed with the reason
        for rid in ids:
            fault, times = meets.get(rid, (None, 0))
            _, retried, reason = HTTP_FAULTS.get(fault, (None, True, None))
            r = rows[rid]
            if fault is None or (retried and times <= MAX_RETRIES):
                assert r["parse_status"] == "ok", (fault, times, r)
                want = times + 1
            else:
                assert r["parse_status"] == "error" and re.search(reason, r["raw_text"]), (fault, times, r)
                want = MAX_RETRIES + 1 if retried else 1
            assert tries[rid] == want, (fault, times, tries[rid], want, r)
            assert server.seen[key_of[rid]] == want, (fault, times, server.seen[key_of[rid]], want)
            # retried after the server's Retry-After (1 s), else after the backoff (0.5 s less 25% jitter)
            gaps = [b - a for a, b in zip(server.arrivals[key_of[rid]], server.arrivals[key_of[rid]][1:])]
            assert all(g >= (0.9 if fault == "429 with Retry-After" else 0.35) for g in gaps), (fault, gaps)
        check_answers(rows, key_of)
        failed = {rid for rid, r in rows.items() if r["parse_status"] == "error"}
        assert stats.errors == len(failed) == c.failed
        rerun_heals(plan, renderer, cfg, store, server, key_of, failed)
    finally:
        server.close()
    out = {}
    for fault in HTTP_FAULTS:
        mine = [rid for rid, (f, _) in meets.items() if f == fault]
        out[fault] = {"trial": trial, "seed": f"http/{trial}", "requests": len(mine),
                      "permanent": sum(meets[rid][1] == math.inf for rid in mine),
                      "lost": sum(rid not in rows for rid in mine),
                      "retries": sum(tries[rid] - 1 for rid in mine),
                      "failed_with_reason": sum(rid in failed for rid in mine),
                      "recomputed_by_rerun": sum(rid in failed for rid in mine), "collect_s": round(wall, 1)}
    out["_trial"] = {"collect_s": round(wall, 1), "planned": len(ids), "failed": len(failed)}
    return out


def test_a_200_that_is_not_a_chat_completion_fails_that_request_only_not_its_batch():
    """A 200 with no choices, or a proxy's HTML page, is one failed request with its reason;
    the other requests of the batch keep their answers (scoring and free text alike)."""
    from judgecal.engines import JudgePrompt

    server = FaultServer()
    prompts = [JudgePrompt(f"r{i}", "s", "u") for i in range(6)]
    keys = [seed_of(p.request_id, p.seed) % 2**31 for p in prompts]
    server.preflight = False
    engine = HttpEngineConfig(base_url=server.url, model="m", concurrency=2, max_retries=2, timeout_s=10,
                              logprobs=False).build()
    try:
        for mode in ("score", "generate"):
            server.seen.clear()
            server.faults = {keys[1]: ("200 with no choices", math.inf), keys[4]: ("200 that is not JSON", math.inf)}
            outs = engine.score(prompts, SCALE) if mode == "score" else engine.generate(prompts, 8)
            assert [o.parse_status for o in outs] == ["ok", "error", "ok", "ok", "error", "ok"], (mode, outs)
            assert re.search(HTTP_FAULTS["200 with no choices"][2], outs[1].raw_text), outs[1].raw_text
            assert re.search(HTTP_FAULTS["200 that is not JSON"][2], outs[4].raw_text), outs[4].raw_text
            assert "502 Bad Gateway" in outs[4].raw_text  # what the server sent, to tell why
            for k, o in zip(keys, outs):
                if o.parse_status == "ok":
                    assert (o.score if mode == "score" else o.raw_text) == \
                        (score_of(k) if mode == "score" else f"Score: {score_of(k)}")
            assert [server.seen[k] for k in keys] == [1] * 6  # not retried within the call: the rerun does
    finally:
        engine.close()
        server.close()


def test_http_judge_faults_are_retried_or_recorded_never_dropped(ray_local, tmp_path):
    """Three collects of 72 requests; in each, every fault meets 3 random requests (1-2 of them
    for all their attempts), the other 45 meet none."""
    trials = [http_trial(tmp_path, t) for t in range(TRIALS)]
    for fault, (how, retried, _) in HTTP_FAULTS.items():
        mine = [t[fault] for t in trials]
        retries, failed = sum(t["retries"] for t in mine), sum(t["failed_with_reason"] for t in mine)
        answered_after = sum(t["requests"] - t["failed_with_reason"] for t in mine)
        if retried:
            assert retries > 0 and answered_after > 0
            redone = (f"{retries} retries: {answered_after} answered after 1-2, {failed} failed after "
                      f"{MAX_RETRIES + 1} tries and recorded with the reason; the rerun answered them")
        else:
            assert retries == 0
            redone = f"not retried within a collect: {failed} failed at once with the reason; the rerun answered them"
        which = f"{PER_FAULT} random requests of 72 a trial" + (", 1-2 of them on every attempt" if retried else "")
        add_row(f"HTTP judge: {fault}", f"{how}; {which}", mine, redone, requests=sum(t["requests"] for t in mine),
                retries=retries, failed_with_reason=failed, recomputed=sum(t["recomputed_by_rerun"] for t in mine))
    print("collects:", [t["_trial"] for t in trials])


def die_trial(tmp: Path, trial: int) -> dict:
    """The judge's process dies (its connections cut, its port refusing) after a random number
    of answers and comes back after a random 0.8-2 s, within the engine's retries (max_retries
    4: at least 5.6 s of backoff); in the last trial it stays away for the rest of the collect
    (max_retries 1) and comes back for the rerun."""
    plan, renderer = campaign_plan()
    ids = plan["request_id"].to_pylist()
    key_of = {rid: seed_of(rid, s) % 2**31 for rid, s in zip(ids, plan["seed"].to_pylist())}
    rng = random.Random(f"die/{trial}")
    comes_back = trial < TRIALS - 1
    after, down = rng.randint(6, 30), rng.uniform(0.8, 2.0)
    server = FaultServer()
    log_dir = tmp / f"attempts-die-{trial}"
    log_dir.mkdir()
    cfg = CountedHttp(base_url=server.url, model="m", concurrency=4, max_retries=4 if comes_back else 1,
                      logprobs=False, timeout_s=10.0, attempts_dir=str(log_dir))
    store = PartStore(Workspace(tmp / f"responses-die-{trial}"))
    died, stop = threading.Event(), threading.Event()

    server.die_after = after  # the preflight's answer, then `after`

    def killer():
        while not server.dying.wait(0.005):
            if stop.is_set():
                return
        server.die()
        died.set()
        if comes_back:
            time.sleep(down)
            server.revive()

    thread = threading.Thread(target=killer, daemon=True)
    thread.start()
    try:
        if comes_back:
            stats, _, wall = run_collect(plan, renderer, cfg, store)
        else:  # gone for good: the blocks in flight end and commit, then the collect stops (exit 3),
            # or ends with them failed where every block was handed out before the rule saw it
            t = time.perf_counter()
            try:
                run_collect(plan, renderer, cfg, store)
            except CollectFailed as e:
                assert re.search(r"the last 20 requests all failed with .(APIConnectionError|JudgeGone).* after "
                                 r"\d+ answers: the judge went away", str(e)), str(e)
            wall = time.perf_counter() - t
        stop.set()
        thread.join()
        assert died.is_set(), "the collect ended before the server died"
        c = completeness(plan, store)
        rows = best_rows(store)
        check_answers(rows, key_of)
        failed = {rid for rid, r in rows.items() if r["parse_status"] == "error"}
        tries = attempts(log_dir)
        assert any(n > 1 for n in tries.values())  # some met the outage and were tried again
        if comes_back:
            assert (c.planned, c.answered, c.missing) == (len(ids), len(ids), 0)
            assert not failed and stats.errors == 0  # every request answered after its retries
            recomputed = 0
        else:
            # every answer the judge gave before it went is committed; what failed says why; what
            # was never sent (the judge found gone) is failed unsent or left for the rerun
            assert c.answered == after and c.answered + c.failed + c.missing == len(ids)
            assert failed and all(re.search(r"^APIConnectionError: Connection error", rows[rid]["raw_text"])
                                  for rid in failed), [rows[rid]["raw_text"] for rid in failed]
            assert all(tries[rid] == 2 for rid in failed)  # max_retries 1
            assert all(tries[rid] <= 1 for rid in set(ids) - set(rows))  # not committed: unsent, or cut short
            server.revive()
            again, _, _ = run_collect(plan, renderer, cfg, store)
            assert (again.already_done, again.computed, again.errors) == (after, len(ids) - after, 0)
            assert completeness(plan, store).answered == len(ids)
            check_answers(best_rows(store), key_of)
            recomputed = again.computed
    finally:
        stop.set()
        server.close()
    return {"trial": trial, "seed": f"die/{trial}", "planned": len(ids), "died_after": after,
            "down_s": round(down, 2) if comes_back else "until the rerun", "lost": 0 if comes_back else
            after - c.answered, "retries": sum(n - 1 for n in tries.values()),
            "failed_with_reason": len(failed), "never_sent": c.missing,

            "recomputed_by_rerun": recomputed, "collect_s": round(wall, 1)}


def test_an_http_judge_that_dies_and_comes_back_loses_nothing(ray_local, tmp_path):
    trials = [die_trial(tmp_path, t) for t in range(TRIALS)]
    back, gone = trials[:-1], trials[-1]
    add_row("HTTP judge: dies and comes back",
            "server killed (connections cut, port refusing) after 6-30 random answers; back after 0.8-2 s "
            "(2 trials) or only for the rerun (1 trial)", trials,
            f"{sum(t['retries'] for t in back)} retries across the outage, all answered; gone for good: every one "
            f"of the {gone['died_after']} answers kept, {gone['failed_with_reason']} failed with the reason after 2 "
            f"tries, {gone['never_sent']} never sent (once 8 in a row failed to connect: not committed, no attempt "
            "used); the rerun answered them",
            requests=sum(t["planned"] for t in trials), retries=sum(t["retries"] for t in trials),
            failed_with_reason=gone["failed_with_reason"], recomputed=gone["recomputed_by_rerun"])


def test_a_judge_gone_mid_collect_stops_it_soon_and_keeps_every_answer(ray_local, tmp_path):
    """The judge died after 20 answers, blocks sized by the measured rate: the collect retried
    every other request for minutes, and the answers of the block in flight were lost to the
    Ctrl-C that ended it (a user's finding: 21 minutes, ~130 answers asked again). Now the
    engine fails requests unsent once 8 in a row failed to connect, the collect hands out no
    more blocks, and the one in flight commits: every answer is kept, the stop is exit 3."""
    items = subset_items(load_dataset("summeval"), 20, 16)
    probes = load_bank("style").probes(["length"])
    plan = build_plan(items, probes, 1, SCALE, HttpEngineConfig().identity)  # 960 requests in blocks of 8
    renderer = ProbeRenderer(items, probes, SCALE)
    ids = plan["request_id"].to_pylist()
    key_of = {rid: seed_of(rid, s) % 2**31 for rid, s in zip(ids, plan["seed"].to_pylist())}
    server = FaultServer()
    server.die_after = 20  # then every connection is cut and, once it is killed, refused
    threading.Thread(target=lambda: server.dying.wait(120) and server.die(), daemon=True).start()
    cfg = CountedHttp(base_url=server.url, model="m", concurrency=4, max_retries=2, logprobs=False, timeout_s=10.0,
                      attempts_dir=str(tmp_path))
    store = PartStore(Workspace(tmp_path / "responses"))
    try:
        t = time.perf_counter()
        with pytest.raises(CollectFailed, match=r"^stopped early after \d+ requests \(\d+ responses committed and "
                                                r"kept for the 960 planned\): the last 20 requests all failed with "
                                                r"'.*, after 20 answers: the judge went away"):
            collect(plan, renderer, cfg, store, CollectSettings(num_actors=1, part_rows=8), log=lambda m: None)
        wall = time.perf_counter() - t
        c = completeness(plan, store)
        assert c.answered == 20 and c.answered + c.failed + c.missing == len(ids)
        assert c.missing > len(ids) / 2  # most blocks were never handed out: no error rows for the rest of the plan
        check_answers(best_rows(store), key_of)
        # a request never sent is no answer and no attempt: not committed, asked on the rerun
        assert not [r for r in best_rows(store).values() if (r["raw_text"] or "").startswith("JudgeGone")]
        # fewer tries than retrying every request after the death (3 each), so some went unsent
        assert sum(attempts(tmp_path).values()) < 20 + 3 * (len(ids) - 20)
        print(f"\njudge gone after 20 answers: stopped in {wall:.1f} s")
    finally:
        server.close()


# -- SIGKILL of an engine actor ------------------------------------------------------------------
@dataclass(frozen=True)
class Marked(SimulatedEngineConfig):
    """A simulated judge whose replicas leave their pid in ``pid_dir`` and log each request
    they start on (a killed replica's block is started again by its restart)."""

    pid_dir: str = ""

    def build(self):
        pid = os.getpid()
        (Path(self.pid_dir) / f"{pid}.pid").touch()
        engine = super().build()
        score, log = engine.score, Path(self.pid_dir) / f"{pid}-{id(engine)}.log"

        def logged(prompts, scale):
            with open(log, "a") as f:
                f.write("".join(p.request_id + "\n" for p in prompts))
            return score(prompts, scale)

        engine.score = logged
        return engine


def kill_trial(tmp: Path, trial: int) -> dict:
    from test_pipeline import small_plan

    items, probes, plan, sim = small_plan(3, 4)  # 84 requests
    rng = random.Random(f"kill/{trial}")
    pid_dir = tmp / f"pids-{trial}"
    pid_dir.mkdir()
    judge = Marked(biases=dict(sim.biases), latency_s=0.04, pid_dir=str(pid_dir)).with_truth(sim.truth)
    store = PartStore(Workspace(tmp / f"responses-kill-{trial}"))
    at = rng.randint(1, 6)  # parts committed before the kill
    killed, stop = [], threading.Event()

    def killer():
        while len(store.parts()) < at and not stop.wait(0.01):
            pass
        pids = sorted(int(p.stem) for p in pid_dir.glob("*.pid"))
        if not stop.is_set() and pids:
            pid = rng.choice(pids)
            os.kill(pid, signal.SIGKILL)
            killed.append(pid)

    thread = threading.Thread(target=killer, daemon=True)
    thread.start()
    t = time.perf_counter()
    try:
        stats = collect(plan, ProbeRenderer(items, probes, SCALE), judge, store,
                        CollectSettings(block_rows=6, num_actors=2), log=lambda m: None)
    finally:
        stop.set()
        thread.join()
    wall = time.perf_counter() - t
    assert killed, "the collect ended before an actor could be killed"
    c = completeness(plan, store)
    assert (c.answered, c.failed, c.missing) == (plan.num_rows, 0, 0) and stats.errors == 0
    raw = store.read_all(["request_id"])["request_id"].to_pylist()
    assert len(raw) == len(set(raw)) == plan.num_rows  # nothing committed twice
    started = Counter(ln for p in pid_dir.glob("*.log") for ln in p.read_text().split())
    assert set(started) == set(plan["request_id"].to_pylist())
    # every answer is its own request's (the simulated judge is deterministic)
    from judgecal.pipeline.render import judge_prompts

    renderer = ProbeRenderer(items, probes, SCALE)
    prompts = judge_prompts(renderer, plan, with_meta=True)
    reference = {p.request_id: o.score for p, o in zip(prompts, sim.build().score(prompts, SCALE))}
    got = store.read(["request_id", "score"]).to_pylist()
    assert {r["request_id"]: r["score"] for r in got} == reference
    return {"trial": trial, "seed": f"kill/{trial}", "planned": plan.num_rows, "killed_after_parts": at,
            "lost": c.missing, "misread": 0, "answered_again": sum(started.values()) - plan.num_rows,
            "collect_s": round(wall, 1)}


def test_sigkill_of_an_engine_actor_loses_nothing_and_commits_nothing_twice(ray_local, tmp_path):
    trials = [kill_trial(tmp_path, t) for t in range(TRIALS)]
    again = sum(t["answered_again"] for t in trials)
    add_row("SIGKILL of an engine actor", "one of 2 simulated-judge actors SIGKILLed after 1-6 random parts "
            "(84 requests, blocks of 6)", trials,
            f"{again} requests answered again (the killed actor's blocks, by Ray Data's restart); none committed "
            "twice", misread=0, requests=sum(t["planned"] for t in trials), answered_again=again)


# -- bad parts and stray files in responses/ ----------------------------------------------------
VALUES = ["request_id", "parse_status", "score", "expected_score", "raw_text", "attempt"]


def as_read(study: Path, responses: Path | None = None) -> dict[str, dict]:
    """What a fit reads: the plan's answers, each once."""
    plan = pq.read_table(study / "requests.parquet", columns=["request_id"])
    store = PartStore(Workspace(responses or study / "responses"))
    return {r["request_id"]: r for r in answered(plan, store, VALUES[1:]).select(VALUES).to_pylist()}


def damage(path: Path, kind: str, rng: random.Random) -> None:
    data = path.read_bytes()
    if kind == "truncated":
        path.write_bytes(data[: rng.randint(1, len(data) - 1)])
    elif kind == "garbage":
        path.write_bytes(rng.choice([rng.randbytes(rng.randint(1, 4000)), b"<html>503 Service Unavailable</html>"]))
    elif kind == "foreign":  # a Parquet file of another kind under a part's name
        pq.write_table(rng.choice([pa.table({"id": ["x"], "label": [1]}),
                                   pa.table({"request_id": [1, 2], "parse_status": ["ok", "ok"]}),
                                   pa.table({"request_id": ["x"], "score": ["high"]})]), path)
    else:
        raise AssertionError(kind)


BAD_KINDS = ("truncated", "garbage", "foreign")


def bad_parts_trial(collected, tmp: Path, trial: int, capfd) -> dict:  # noqa: F811 - the fixture's value
    rng = random.Random(f"bad-parts/{trial}")
    s = study_copy(collected, tmp / f"bad-{trial}")
    # read from the original: a part this process has read is not checked again (parts never change)
    before = as_read(s, collected / "responses")
    parts = sorted((s / "responses").glob("part-*.parquet"))
    bad = rng.sample(parts, rng.randint(1, 3))
    kinds = [BAD_KINDS[trial % len(BAD_KINDS)], *(rng.choice(BAD_KINDS) for _ in bad[1:])]  # each kind once at least
    held = {rid for p in bad for rid in pq.read_table(p, columns=["request_id"])["request_id"].to_pylist()}
    for p, kind in zip(bad, kinds):
        damage(p, kind, rng)
    quarantine = s / "responses" / "_quarantine"

    code, err = main_err(capfd, "fit", str(s))
    assert code == 2 and len(err) == 1, err  # one line
    first = min(bad)  # parts are checked in name order: the first is named, the others counted
    assert err[0].startswith(f"judgecal: error: {first}: "), err
    more = f" (and {len(bad) - 1} more)" if len(bad) > 1 else ""
    assert err[0].endswith(f"; moved to {quarantine}/{more}; rerun `judgecal collect` to compute its requests "
                           "again"), err
    assert sorted(p.name for p in quarantine.iterdir()) == sorted(p.name for p in bad)  # moved aside
    rest = as_read(s)  # the other parts, read as they were written
    assert set(rest) == set(before) - held and all(rest[rid] == before[rid] for rid in rest)

    stats = StudyRunner(load_study(str(s))).collect()["responses"]
    assert (stats["already_done"], stats["computed"], stats["errors"]) == (len(before) - len(held), len(held), 0)
    after = as_read(s)  # the simulated judge is deterministic: recomputed = as first answered
    assert set(after) == set(before) and all({**after[r], "attempt": 1} == before[r] for r in before)
    assert main_err(capfd, "fit", str(s))[0] == 0
    return {"trial": trial, "seed": f"bad-parts/{trial}", "parts": len(parts), "bad": kinds,
            "lost": len(set(before) - set(after)),
            "misread": 0, "recomputed_by_rerun": stats["computed"]}


def test_bad_parts_are_named_moved_aside_and_recomputed(collected, tmp_path, capfd):  # noqa: F811
    trials = [bad_parts_trial(collected, tmp_path, t, capfd) for t in range(TRIALS)]
    kinds = Counter(k for t in trials for k in t["bad"])
    assert set(kinds) == set(BAD_KINDS)
    made = ", ".join(f"{k} {n}" for k, n in sorted(kinds.items()))
    add_row("bad part in responses/", "1-3 random parts of 8 truncated at a random byte, overwritten with random "
            f"bytes or an HTML page, or replaced by another Parquet file ({made})", trials,
            f"named in one line and moved aside; {sum(t['recomputed_by_rerun'] for t in trials)} requests they held "
            "recomputed by the rerun, every other row read as written", misread=0)


def stray_trial(collected, tmp: Path, trial: int, capfd) -> dict:  # noqa: F811
    rng = random.Random(f"stray/{trial}")
    s = study_copy(collected, tmp / f"stray-{trial}")
    resp = s / "responses"
    before = as_read(s, collected / "responses")
    parts = sorted(resp.glob("part-*.parquet"))
    src = rng.choice(parts)

    def other_plan(path):  # a real response part of another plan: other request ids
        t = pq.read_table(src)
        ids = pa.array([f"{rng.getrandbits(128):032x}" for _ in range(t.num_rows)])
        pq.write_table(t.set_column(t.schema.get_field_index("request_id"), "request_id", ids), path)

    strays = {
        "notes.txt": lambda p: p.write_text("what I changed\n"),
        ".DS_Store": lambda p: p.write_bytes(rng.randbytes(64)),
        "part-copy.parquet.tmp": lambda p: p.write_bytes(src.read_bytes()[:100]),  # an upload cut short
        "old/part-0.parquet": lambda p: (p.parent.mkdir(), shutil.copy(src, p)),  # a sub-folder
        "part-copy.parquet": lambda p: shutil.copy(src, p),  # a part copied under another name
        "part-other-plan.parquet": other_plan,
        "part-foreign.parquet": lambda p: pq.write_table(pa.table({"id": ["x"], "label": [1]}), p),
    }
    chosen = rng.sample(sorted(strays), rng.randint(2, 4))
    for name in chosen:
        strays[name](resp / name)
    code, err = main_err(capfd, "fit", str(s))
    if "part-foreign.parquet" in chosen:  # named like a part, not one: named in one line, moved aside
        assert code == 2 and len(err) == 1 and err[0].startswith(f"judgecal: error: {resp / 'part-foreign.parquet'}: "
                                                                "not a response part"), err
        code, err = main_err(capfd, "fit", str(s))
    assert code == 0, err
    after = as_read(s)
    assert after == before  # the plan's answers, each once, as written: nothing else read
    kept = [n for n in chosen if n != "part-foreign.parquet"]
    assert all((resp / n).exists() for n in kept)  # what is not a part is left alone
    return {"trial": trial, "seed": f"stray/{trial}", "strays": chosen, "lost": len(set(before) - set(after)),
            "misread": 0}


def test_stray_files_in_responses_are_never_misread(collected, tmp_path, capfd):  # noqa: F811
    trials = [stray_trial(collected, tmp_path, t, capfd) for t in range(TRIALS)]
    add_row("stray file in responses/", "2-4 of: a text file, .DS_Store, a cut `.parquet.tmp`, a part in a "
            "sub-folder, a part copied under another name, another plan's part, another Parquet file named "
            "part-*.parquet", trials, "nothing to redo: non-parts left alone and never read, duplicates read "
            "once, another plan's rows never read; a part-named foreign file named in one line and moved aside",
            misread=0)


FLIPS = 100


def test_a_random_bit_flip_in_a_part_is_refused_or_harmless(collected, tmp_path):  # noqa: F811
    """A part whose bytes changed on disk (one random bit inside a column chunk) is either refused
    (named, moved aside, recomputed) or reads the same values: never other values."""
    src = sorted((collected / "responses").glob("part-*.parquet"))
    rng = random.Random("bit-flip")
    outcome, columns = Counter(), Counter()
    for trial in range(FLIPS):
        part = rng.choice(src)
        data, md = part.read_bytes(), pq.read_metadata(part)
        c = rng.randrange(md.num_columns)
        chunk = md.row_group(0).column(c)
        start = chunk.dictionary_page_offset or chunk.data_page_offset
        flipped = bytearray(data)
        flipped[rng.randrange(start, start + chunk.total_compressed_size)] ^= 1 << rng.randrange(8)
        folder = tmp_path / f"flip-{trial}"
        folder.mkdir()
        (folder / part.name).write_bytes(bytes(flipped))
        want = pq.read_table(part).sort_by("request_id")
        try:
            got = PartStore(Workspace(folder)).read_all().sort_by("request_id")
        except Exception as e:  # noqa: BLE001 - refused: it must name the part and move it aside
            assert str(folder / part.name) in str(e) and not (folder / part.name).exists(), e
            outcome["refused"] += 1
            continue
        if got.equals(want.select(got.column_names).cast(got.schema)):
            outcome["same values"] += 1
        else:
            outcome["misread"] += 1
            columns[md.schema.column(c).name] += 1
    TABLE.append({"fault": "corrupt part (one random bit flipped)", "how": "a random bit inside a random column "
                  f"chunk of a part ({FLIPS} flips)", "trials": sum(outcome.values()), "lost": 0,
                  "misread": outcome["misread"], "redone": f"{outcome['refused']} refused (named in one line, moved "
                  f"aside), {outcome['same values']} read the same values, {outcome['misread']} read as other values"
                  + (f" (in {', '.join(sorted(columns))})" if columns else "") + "; parts carry page checksums",
                  "per_trial": [dict(outcome)]})
    print(f"\nbit flips: {dict(outcome)}; misread columns {dict(columns)}")
    assert outcome["misread"] == 0, (dict(outcome), dict(columns))


# -- SIGKILL of the driver ------------------------------------------------------------------------
def driver_kill_trial(tmp: Path, trial: int, address: str) -> dict:
    """`judgecal collect`, joined to a running Ray (``RAY_ADDRESS``, as a job on a cluster), is
    SIGKILLed after a random number of parts; the rerun (here in-process, on the same Ray)
    computes exactly what was not committed."""
    import subprocess

    from conftest import judgecal_cmd, small_study

    rng = random.Random(f"driver/{trial}")
    out = tmp / f"driver-{trial}"
    cfg = small_study(tmp, out, engine='kind = "simulated"\nlatency_s = 0.02', groups=4, items=2,
                      extra="[collect]\nblock_rows = 7\n")
    cfg.write_text(cfg.read_text().replace('attributes = ["length"]', ""))  # 17 probes: 136 requests
    planned = 4 * 2 * 17
    at = rng.randint(2, 5)  # of 8 parts (an item's 17 requests each)
    env = {**os.environ, "RAY_AUTH_MODE": "disabled", "RAY_ADDRESS": address}
    t0 = time.perf_counter()
    proc = subprocess.Popen(judgecal_cmd("collect", str(cfg)), cwd=ROOT, env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True)
    parts = out / "responses"
    deadline = time.monotonic() + 180
    while len(list(parts.glob("part-*.parquet"))) < at and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.02)
    assert proc.poll() is None, "the collect ended before it could be killed"
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    killed_s = time.perf_counter() - t0
    committed = len(list(parts.glob("part-*.parquet")))
    while True:  # a worker may still commit a block it had in flight: wait until none comes
        time.sleep(1.0)
        now = len(list(parts.glob("part-*.parquet")))
        if now == committed:
            break
        committed = now
    store = PartStore(Workspace(parts))
    kept = len(store)
    assert 0 < kept < planned
    t1 = time.perf_counter()
    stats = StudyRunner(load_study(str(out))).collect()["responses"]
    rerun_s = time.perf_counter() - t1
    assert (stats["already_done"], stats["computed"], stats["errors"]) == (kept, planned - kept, 0)
    plan = pq.read_table(out / "requests.parquet", columns=["request_id"])
    c = completeness(plan, store)
    assert (c.planned, c.answered, c.missing) == (planned, planned, 0)
    raw = store.read_all(["request_id"])["request_id"].to_pylist()
    assert len(raw) == len(set(raw)) == planned  # nothing committed twice
    return {"trial": trial, "seed": f"driver/{trial}", "planned": planned, "killed_after_parts": at,
            "kept": kept, "lost": c.missing, "recomputed_by_rerun": stats["computed"],
            "killed_after_s": round(killed_s, 1), "rerun_s": round(rerun_s, 1)}


def test_sigkill_of_the_driver_loses_nothing_and_the_rerun_completes(ray_local, tmp_path):
    address = ray_local.get_runtime_context().gcs_address
    trials = [driver_kill_trial(tmp_path, t, address) for t in range(TRIALS)]
    add_row("SIGKILL of the driver", "`judgecal collect` on a running Ray (`RAY_ADDRESS`) SIGKILLed after 2-5 "
            "random parts of 8 (136 requests)", trials,
            f"every committed part kept ({sum(t['kept'] for t in trials)} requests); the rerun computed the "
            f"{sum(t['recomputed_by_rerun'] for t in trials)} others, none twice",
            requests=sum(t["planned"] for t in trials), recomputed=sum(t["recomputed_by_rerun"] for t in trials))


# -- the S3 endpoint refusing and stalling ----------------------------------------------------------
# `judgecal collect` of a whole study (in-process, on the module's Ray) on s3:// against a real S3
# endpoint (moto's server on 127.0.0.1) behind a proxy (tests/s3_endpoint.py) that, from a random
# request of the collect, refuses or stalls every request for a while. Ray's workers commit the
# parts and read the plan, so the endpoint must be in their environment when Ray starts: the
# proxy's port is set before the module's Ray (an autouse fixture, set up before ray_local), its
# upstream once moto runs.
S3_OUTAGES = {
    # kind: (the fault, how each request in the outage is answered, its length in seconds: drawn from)
    "refuse": ("S3 endpoint refusing", "answered HTTP 503 SlowDown (S3's XML error body), nothing forwarded",
               (2.0, 6.0)),
    "stall": ("S3 endpoint stalling", "held without a byte back, then forwarded and answered late (pyarrow "
              "times a request out after 3 s without a byte, boto3 after 60 s; each tries 10 times, "
              "judgecal.workspace.S3_ATTEMPTS)", (4.0, 12.0)),
}
S3_PARTS = 12  # test_s3's PRISM study, 2 summaries an article: 6 x 2 x 17 probes = 204 requests, blocks of 17
S3_SETS = ("dataset.max_items_per_group=2", "collect.block_rows=17")
S3_HANG_S = 150  # a collect still running this long after it started hangs: every thread's stack, and exit


@pytest.fixture(scope="module", autouse=True)
def _s3_proxy():
    """The proxy's port as the AWS endpoint, before the module's Ray starts (its workers keep
    the environment they started with); its upstream is set by ``s3_endpoint``."""
    proxy = CuttingProxy(None)
    saved = {k: os.environ.get(k) for k in aws_env(0)}
    os.environ.update(aws_env(proxy.port))
    yield proxy
    proxy.close()
    for k, v in saved.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v


@pytest.fixture(scope="module")
def s3_endpoint(_s3_proxy, ray_local):
    server, port = start_moto()
    client(port).create_bucket(Bucket=BUCKET)
    _s3_proxy.upstream = ("127.0.0.1", port)
    yield _s3_proxy, port
    server.stop()


@pytest.fixture(scope="module")
def s3_reference(s3_endpoint, tmp_path_factory):
    """The same study collected on local disk, no fault: every request's answer (the simulated
    judge is deterministic), what each row read back from S3 must equal."""
    from judgecal import cli

    tmp = tmp_path_factory.mktemp("s3-reference")
    cfg = write_config(tmp / "prism.toml", PRISM)
    assert cli.main(["collect", str(cfg), "--set", f"study.output={tmp / 'out'}", *s3_sets()]) == 0
    rows = pq.read_table(tmp / "out" / "responses").select(VALUES[:-1]).to_pylist()
    assert len(rows) == len({r["request_id"] for r in rows}) == S3_PARTS * 17
    return cfg, {r["request_id"]: r for r in rows}


def s3_sets() -> list[str]:
    return [a for s in S3_SETS for a in ("--set", s)]


def s3_request(method: str, path: str) -> str:
    """A request in words: `PUT part`, `LIST responses/`, `GET requests.parquet`, ..."""
    if "list-type=2" in path:
        return "LIST " + re.sub(r".*prefix=[^%&]*%2F", "", path).split("&")[0].replace("%2F", "/")
    name = path.split("?")[0].rsplit("/", 1)[-1]
    return f"{method} {'part' if name.startswith('part-') else name}"


def s3_outage_trial(s3_endpoint, s3_reference, kind: str, trial: int, capfd) -> dict:
    """`judgecal collect` of a fresh study on s3://; from its ``after``-th request counted from
    the first part upload (1-12: the part uploads, on the workers, by boto3; 13-24: the
    completeness check's listing and reads that follow, on the driver, by pyarrow) every
    request is refused or stalled for a while. The collect retries through it or stops in one
    line naming the storage error; then (the endpoint back) nothing partial is visible, the
    rerun completes, and every planned request has one row, its own answer."""
    import faulthandler

    proxy, port = s3_endpoint
    cfg, reference = s3_reference
    rng = random.Random(f"s3-{kind}/{trial}")
    after, seconds = rng.randint(1, 2 * S3_PARTS), rng.uniform(*S3_OUTAGES[kind][2])
    prefix = f"{kind}-{trial}"
    uri = f"s3://{BUCKET}/{prefix}"
    args = ("collect", str(cfg), "--set", f"study.output={uri}", *s3_sets())
    proxy.outage(kind, after, seconds)
    faulthandler.dump_traceback_later(S3_HANG_S, exit=True)  # a hang is a bug: say where, never wait forever
    try:
        t = time.perf_counter()
        code, err = main_err(capfd, *args)
        wall = time.perf_counter() - t
    finally:
        faulthandler.cancel_dump_traceback_later()
    assert proxy.started is not None, f"the collect ended before its request {after} from the first part upload"
    assert proxy.met > 0 and not [ln for ln in err if "Traceback" in ln or ln.startswith("  File ")], err
    said = [ln for ln in err if ln.startswith("judgecal: ")]
    if code == 0:  # retried through it
        assert not said, err
    else:  # stopped: one line, the last, naming the storage error
        assert said == err[-1:] and re.search(r"storage (error|refused)", said[0]), err
        assert (kind == "refuse") == bool(re.search(r"SlowDown|SLOW_DOWN|SERVICE_UNAVAILABLE|503", said[0])), said
    while not proxy.settled():  # the outage over, every request it held answered
        time.sleep(0.05)
    names = keys(port, f"{prefix}/responses/")
    if code:  # in-process, a stopped collect's workers live on (a CLI's die with it): a commit they
        quiet = time.monotonic()  # were retrying may still land; wait until none has for 3 s
        while time.monotonic() - quiet < 3.0:
            time.sleep(0.2)
            if (now := keys(port, f"{prefix}/responses/")) != names:
                names, quiet = now, time.monotonic()
    # nothing partial visible: every object under responses/ is a whole, readable part
    assert all(re.fullmatch(rf"{prefix}/responses/part-[0-9a-f]+\.parquet", k) for k in names), names
    store = PartStore(Workspace(f"{uri}/responses"))
    kept = len(set(store.read_all(["request_id"])["request_id"].to_pylist()))  # a bad part would raise
    code2, err2 = main_err(capfd, *args)
    assert code2 == 0, err2
    planned, done, todo = map(int, re.search(r"(\d+) requests planned, (\d+) already committed, (\d+) to compute",
                                             "\n".join(err2)).groups())
    assert (planned, done, todo) == (len(reference), kept, planned - kept)
    plan = Workspace(uri).read_parquet("requests.parquet")
    assert answered(plan, store).num_rows == plan.num_rows == planned
    raw = store.read_all(["request_id"])["request_id"].to_pylist()
    assert len(raw) == len(set(raw)) == planned  # nothing lost, nothing committed twice
    got = {r["request_id"]: r for r in store.read_all(VALUES[:-1]).to_pylist()}
    assert got == reference  # every answer its own request's, as a clean collect gives it
    return {"trial": trial, "seed": f"s3-{kind}/{trial}", "planned": planned, "from_request": after,
            "began_with": s3_request(*proxy.first), "outage_s": round(seconds, 1), "requests_met": proxy.met,
            "exit": code, "stopped": said[0] if code else None, "lost": planned - len(set(raw)), "misread": 0,
            "recomputed_by_rerun": todo, "collect_s": round(wall, 1)}


def s3_outage_row(kind: str, trials: list[dict]) -> None:
    fault, how, (lo, hi) = S3_OUTAGES[kind]
    stopped = [t for t in trials if t["exit"]]
    began = ", ".join(f"{t['began_with']} ({t['outage_s']:g} s)" for t in trials)
    add_row(fault, f"a proxy before a real S3 endpoint (moto): from a random request of a {trials[0]['planned']}-"
            f"request `judgecal collect` (1-{2 * S3_PARTS} from the first part upload) and for {lo:g}-{hi:g} s, every "
            f"request {how}; began at: {began}", trials,
            f"{sum(t['requests_met'] for t in trials)} requests met it; {len(trials) - len(stopped)} collects "
            f"retried through, {len(stopped)} stopped in one line naming the storage error"
            + "".join(f"{'; ' if i else ' ('}exit {t['exit']}, {t['recomputed_by_rerun']} left to compute"
                      for i, t in enumerate(stopped)) + (")" if stopped else "")
            + f"; nothing partial visible; the reruns computed {sum(t['recomputed_by_rerun'] for t in trials)} "
            "requests, none twice",
            misread=0, requests=sum(t["planned"] for t in trials), met=sum(t["requests_met"] for t in trials),
            stopped=len(stopped), recomputed=sum(t["recomputed_by_rerun"] for t in trials))


def test_s3_endpoint_refusing_is_retried_or_stops_in_one_line_and_the_rerun_completes(s3_endpoint, s3_reference,
                                                                                       capfd):
    trials = [s3_outage_trial(s3_endpoint, s3_reference, "refuse", t, capfd) for t in range(TRIALS)]
    s3_outage_row("refuse", trials)
    # a throttle of seconds is ridden through: 10 tries with backoff (judgecal.workspace.S3_ATTEMPTS);
    # with the SDKs' default 3 tries every one of these collects stopped
    assert [t["exit"] for t in trials] == [0] * TRIALS, trials


def test_s3_endpoint_stalling_is_waited_out_or_stops_in_one_line_and_the_rerun_completes(s3_endpoint, s3_reference,
                                                                                         capfd):
    s3_outage_row("stall", [s3_outage_trial(s3_endpoint, s3_reference, "stall", t, capfd) for t in range(TRIALS)])
