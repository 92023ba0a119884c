"""HTTP judges at scale: one rate limit for the whole actor pool, a 429 that pauses the pool,
and the judge's cost in the results log.

The pool tests run a real collect (render -> 4 engine actors -> commit on a local Ray)
against a real local server speaking the chat-completions protocol, which records when each
request arrives. The token bucket itself is tested alone with a fake clock."""

import json
import random
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from judgecal.datasets import load_dataset, subset_items
from judgecal.engines import HttpEngineConfig
from judgecal.engines.http import retry_after_s
from judgecal.engines.null import NullEngineConfig
from judgecal.engines.ratelimit import BURST_SECONDS, RateLimiter
from judgecal.pipeline import CollectSettings, PartStore, collect
from judgecal.probes import ProbeRenderer, build_plan, load_bank
from judgecal.scale import ScoreScale
from judgecal.workspace import Workspace

from conftest import chat_completion, write_config

SCALE = ScoreScale(1, 5)


# -- the token bucket alone, on a fake clock --------------------------------------------------
class Clock:
    def __init__(self):
        self.t = 100.0

    def __call__(self):
        return self.t


def test_request_bucket_bursts_then_keeps_the_rate():
    clock = Clock()
    lim = RateLimiter(requests_per_minute=600, clock=clock)  # 10/s, burst 10 (1 s worth)
    waits = [lim.acquire() for _ in range(13)]
    assert waits[:10] == [0.0] * 10
    assert waits[10:] == pytest.approx([0.1, 0.2, 0.3])  # reserved in call order, 0.1 s apart
    clock.t += 60.0  # a long idle refills to the burst, not beyond
    assert [lim.acquire() for _ in range(11)][-2:] == pytest.approx([0.0, 0.1])
    slow = RateLimiter(requests_per_minute=3, clock=clock)  # under one a second: burst is one request
    assert [slow.acquire() for _ in range(3)] == pytest.approx([0.0, 20.0, 40.0])


def test_token_bucket_estimates_settles_and_lets_a_large_request_wait_for_a_full_bucket():
    clock = Clock()
    lim = RateLimiter(tokens_per_minute=6000, clock=clock)  # 100 tokens/s, burst 100
    assert lim.acquire(1, 60) == 0.0
    assert lim.acquire(1, 60) == pytest.approx(0.2)  # 40 left, 20 more take 0.2 s
    lim.settle(+60)  # the server used less than reserved: refunded
    clock.t += 0.2
    assert lim.acquire(1, 60) == pytest.approx(0.0)
    lim.settle(-40)  # it used more: charged
    clock.t += 10.0
    assert lim.acquire(1, 250) == 0.0  # larger than the burst: goes with a full bucket, leaves 150 of debt
    assert lim.acquire(1, 10) == pytest.approx(1.6)  # waits off the debt (150) and its own 10


def test_both_buckets_grant_at_the_later_time_and_in_order():
    clock = Clock()
    lim = RateLimiter(requests_per_minute=600, tokens_per_minute=600, clock=clock)  # 10 req/s, 10 tok/s
    got = [lim.acquire(1, 5) for _ in range(4)]  # tokens bind: 2 at once, then one per 0.5 s
    assert got == pytest.approx([0.0, 0.0, 0.5, 1.0])
    assert lim.acquire(1, 0) == pytest.approx(1.0)  # never before an earlier grant


def test_pause_holds_every_grant_and_drains_the_burst():
    clock = Clock()
    lim = RateLimiter(requests_per_minute=600, clock=clock)
    assert lim.acquire() == 0.0
    assert lim.pause(2.0) == pytest.approx(2.0)
    assert lim.pause(0.5) == pytest.approx(2.0)  # a shorter pause does not shorten it
    assert lim.resume_in() == pytest.approx(2.0)
    assert [lim.acquire() for _ in range(3)] == pytest.approx([2.1, 2.2, 2.3])  # steady rate, no burst
    clock.t += 2.0
    assert lim.resume_in() == 0.0
    free = RateLimiter(clock=clock)  # no limits: only pauses wait
    assert free.acquire() == 0.0 and free.pause(1.5) == 1.5 and free.acquire(1, 10**9) == pytest.approx(1.5)
    assert lim.stats()["pauses"] == 1


def test_no_window_ever_exceeds_burst_plus_rate():
    """Random arrivals, random request sizes: the granted send times of each bucket never put
    more than ``burst + rate * w`` into any window of ``w`` seconds."""
    rng = random.Random(7)
    clock = Clock()
    rpm, tpm = 1200.0, 30_000.0
    lim = RateLimiter(rpm, tpm, clock=clock)
    sends = []
    for _ in range(600):
        clock.t += rng.expovariate(40.0)  # offered ~40/s, twice the 20/s allowed
        n = rng.randint(1, 400)
        sends.append((clock.t + lim.acquire(1, n), n))
    sends.sort()
    for rate, burst, cost in ((rpm / 60, max(1, rpm / 60 * BURST_SECONDS), lambda n: 1),
                              (tpm / 60, max(1, tpm / 60 * BURST_SECONDS), lambda n: n)):
        for i in range(len(sends)):
            used = 0
            for j in range(i, len(sends)):
                used += cost(sends[j][1])
                assert used <= burst + rate * (sends[j][0] - sends[i][0]) + 1e-6
    assert sends[-1][0] - sends[0][0] > 0.9 * 600 / 20  # and it did bind


def test_retry_after_forms():
    assert retry_after_s({"retry-after": "2"}) == 2.0
    assert retry_after_s({"retry-after-ms": "250", "retry-after": "9"}) == 0.25
    date = time.strftime("%a, %d %b %Y %H:%M:%S GMT", time.gmtime(time.time() + 30))
    assert 28 < retry_after_s({"retry-after": date}) <= 31
    assert retry_after_s({}) is None and retry_after_s({"retry-after": "soon"}) is None


def test_cost_is_tokens_times_prices():
    cfg = HttpEngineConfig(price_per_million_prompt_tokens=2.5, price_per_million_completion_tokens=10.0)
    assert cfg.cost(2_000_000, 100_000) == pytest.approx(6.0)
    assert NullEngineConfig().cost(10**9, 10**9) == 0.0  # engines without prices cost nothing


# -- a local chat-completions server ------------------------------------------------------------
class ChatServer:
    """Answers ``Score: 4`` with usage (17 prompt, 2 completion tokens) after ``delay_s``; the
    first ``fail_first`` requests get 429 with ``Retry-After: 1``. Records (arrival, status)."""

    def __init__(self, delay_s=0.0, fail_first=0):
        self.delay_s, self.fail_first = delay_s, fail_first
        self.log: list[tuple[float, int, float]] = []  # (arrival, status, reply time)
        self.lock = threading.Lock()
        owner = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"  # keep-alive: the clients reuse connections

            def do_POST(self):
                arrived = time.monotonic()
                self.rfile.read(int(self.headers["Content-Length"]))
                with owner.lock:
                    n = len(owner.log)
                    owner.log.append(None)
                time.sleep(owner.delay_s)
                if n < owner.fail_first:
                    code, body, extra = 429, b'{"error": {"message": "slow down"}}', {"Retry-After": "1"}
                else:
                    code, extra = 200, {}
                    body = chat_completion("Score: 4", prompt_tokens=17, completion_tokens=2)
                with owner.lock:
                    owner.log[n] = (arrived, code, time.monotonic())
                self.send_response(code)
                for k, v in {"Content-Type": "application/json", "Content-Length": str(len(body)), **extra}.items():
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *a):
                pass

        class Server(ThreadingHTTPServer):
            request_queue_size = 128  # many actors connect at once; the default 5 would drop SYNs
            daemon_threads = True

        self.server = Server(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def server_factory():
    made = []

    def make(**kw):
        made.append(ChatServer(**kw))
        return made[-1]

    yield make
    for s in made:
        s.close()


def pool_collect(tmp_path, cfg, groups=6, items=4, actors=4):
    its = subset_items(load_dataset("summeval"), groups, items)
    probes = load_bank("style").probes(["length"])
    plan = build_plan(its, probes, 1, SCALE, cfg.identity)
    store = PartStore(Workspace(tmp_path / "r"))
    t0 = time.perf_counter()
    stats = collect(plan, ProbeRenderer(its, probes, SCALE), cfg, store,
                    CollectSettings(block_rows=6, num_actors=actors), log=lambda m: None)
    return plan, store.read(), stats, time.perf_counter() - t0


def test_four_actors_share_one_request_rate(ray_local, tmp_path, server_factory):
    srv = server_factory()
    cfg = HttpEngineConfig(base_url=srv.url, model="m", concurrency=4, max_retries=0, timeout_s=10,
                           logprobs=False, requests_per_minute=600)  # 10/s for the pool, burst 10
    plan, got, _, _ = pool_collect(tmp_path, cfg)
    assert got.num_rows == plan.num_rows == 72 and set(got["parse_status"].to_pylist()) == {"ok"}
    times = sorted(t for t, _, _ in srv.log)
    assert len(times) == 73  # collect's preflight first (before the pool and its limiter), then the plan
    times = times[1:]
    # The limiter grants send times; the server sees arrivals, each later by a varying delay (the
    # grant's reply, a first connection, the client building its request: measured up to ~0.5 s
    # on this 2-core machine under a load of 15), so a window may hold a few more: allowed as
    # `jitter` seconds of rate. Four actors with a bucket each would send 40/s and fail by far.
    rate, burst, jitter = 10.0, 10, 0.5
    for i in range(len(times)):
        for j in range(i, len(times)):
            assert j - i + 1 <= burst + rate * (times[j] - times[i] + jitter), (i, j, times[j] - times[i])
    # It bound (16 threads against a server that answers at once would take well under a second).
    assert times[-1] - times[0] >= (72 - burst) / rate - jitter


def test_a_429_pauses_the_whole_pool_and_every_request_is_answered(ray_local, tmp_path, server_factory):
    srv = server_factory(delay_s=0.05, fail_first=3)
    cfg = HttpEngineConfig(base_url=srv.url, model="m", concurrency=2, max_retries=3, timeout_s=10,
                           logprobs=False)  # no rate limit: only the 429s slow the pool
    plan, got, stats, _ = pool_collect(tmp_path, cfg)
    assert got.num_rows == plan.num_rows and stats.errors == 0
    assert set(got["parse_status"].to_pylist()) == {"ok"}  # answered once the server recovered
    log = sorted(srv.log)
    assert [c for _, c, _ in log].count(429) == 3 and len(log) == plan.num_rows + 3
    for _, code, replied in log:
        if code == 429:  # Retry-After: 1 from when the 429 went out; requests already in flight may land
            quiet = [t for t, _, _ in log if replied + 0.2 < t < replied + 0.85]
            assert quiet == [], f"{len(quiet)} requests arrived during the pause"
    assert log[-1][0] - log[0][0] >= 0.9


def test_the_results_log_prices_the_tokens(ray_local, tmp_path, server_factory):
    from judgecal.config import load_config
    from judgecal.methods.runner import StudyRunner
    from judgecal.report.table import format_table

    srv = server_factory()
    out = tmp_path / "out"
    cfg = load_config(str(write_config(tmp_path / "c.toml", f"""
[study]
output = "{out}"
[dataset]
max_groups = 4
max_items_per_group = 2
[probes]
attributes = ["length"]
[engine]
kind = "http"
base_url = "{srv.url}"
max_retries = 0
logprobs = false
price_per_million_prompt_tokens = 2.5
price_per_million_completion_tokens = 10.0
[collect]
num_actors = 2
[fit]
folds = 2
inner_folds = 2
bootstrap = 100
""")))
    log = StudyRunner(cfg).run_all()
    assert json.loads((out / "results.json").read_text())["stats"] == log["stats"]
    c, facts = log["stats"]["collect"]["responses"], log["stats"]["responses"]
    n = facts["requests"]
    assert (c["prompt_tokens"], c["completion_tokens"]) == (facts["prompt_tokens"], facts["completion_tokens"]) \
        == (17 * n, 2 * n)
    want = (17 * n * 2.5 + 2 * n * 10.0) / 1e6
    assert c["cost_usd"] == pytest.approx(want) and facts["cost_usd"] == pytest.approx(want)
    assert f"cost: ${want:,.4f}" in format_table(log)


# -- what a collect sees of a judge before and while it answers -------------------------------
def test_answers_are_handed_on_as_the_pool_finishes_them(server_factory):
    """Progress for a slow http judge: no batch waits for its slowest request; answers reach
    ``on_answered`` while the others are still in flight, and come back in order."""
    from judgecal.engines import JudgePrompt

    srv = server_factory(delay_s=0.2)
    eng = HttpEngineConfig(base_url=srv.url, model="m", concurrency=4, max_retries=0, logprobs=False).build()
    seen = []
    eng.on_answered = lambda outs: seen.append((time.monotonic(), len(outs)))
    t0 = time.monotonic()
    outs = eng.score([JudgePrompt(f"r{i}", "s", f"u{i}") for i in range(16)], SCALE)
    done = time.monotonic()
    eng.close()
    assert [o.score for o in outs] == [4.0] * 16 and sum(n for _, n in seen) == 16
    assert len(seen) >= 2 and seen[0][0] < done - 0.1 and seen[0][0] - t0 >= 0.5  # handed on mid-way, 0.5 s apart


def test_the_preflight_tells_a_missing_judge_from_a_busy_or_slow_one(server_factory, monkeypatch):
    from judgecal.engines import JudgePrompt
    from judgecal.engines import http as http_engine
    from judgecal.engines.base import JudgeUnavailable
    from conftest import free_port

    prompt = JudgePrompt("r", "s", "u")
    dead = HttpEngineConfig(base_url=f"http://127.0.0.1:{free_port()}/v1")
    with pytest.raises(JudgeUnavailable, match="cannot reach the judge: APIConnectionError"):
        dead.preflight(prompt, "score", SCALE)
    HttpEngineConfig(base_url=server_factory().url, logprobs=False).preflight(prompt, "score", SCALE)  # "Score: 4"
    HttpEngineConfig(base_url=server_factory(fail_first=1).url).preflight(prompt, "score", SCALE)  # 429: busy, there
    monkeypatch.setattr(http_engine, "PREFLIGHT_TIMEOUT_S", 0.3)
    HttpEngineConfig(base_url=server_factory(delay_s=1.0).url).preflight(prompt, "score", SCALE)  # connected, slow
