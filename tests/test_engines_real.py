"""Real engines: the embedded llama.cpp judge, and the HTTP engine against real local servers."""

import dataclasses
import json
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import numpy as np
import pytest

from judgecal.datasets import load_dataset, subset_items
from judgecal.engines import HttpEngineConfig, JudgePrompt, LlamaCppEngineConfig, bundled_model_path
from judgecal.pipeline import CollectSettings, PartStore, collect
from judgecal.pipeline.render import judge_prompts
from judgecal.workspace import Workspace
from judgecal.probes import ProbeRenderer, build_plan, load_bank
from judgecal.scale import ScoreScale

from conftest import chat_completion, free_port, send_json

SCALE = ScoreScale(1, 5)


def prompts(n_items=2, attrs=("length", "hedging")):
    items = subset_items(load_dataset("summeval"), 1, n_items)
    probes = load_bank("style").probes(list(attrs))
    plan = build_plan(items, probes, 1, SCALE, "test")
    return judge_prompts(ProbeRenderer(items, probes, SCALE), plan)


@pytest.fixture(scope="module")
def llama_engine():
    eng = LlamaCppEngineConfig().build()
    yield eng
    eng.close()


def test_local_model_scores_from_its_distribution_and_reuses_the_prefix(llama_engine):
    ps = prompts()
    outs = llama_engine.score(ps, SCALE)
    assert len(outs) == len(ps)
    for o in outs:
        assert o.parse_status in ("ok", "constrained")
        assert o.score in {1.0, 2.0, 3.0, 4.0, 5.0}
        assert 1.0 <= o.expected_score <= 5.0
    # Probes after the first prompt recompute only their suffix (or the new summary).
    assert outs[0].computed_tokens == outs[0].prompt_tokens
    assert all(o.computed_tokens < 0.2 * o.prompt_tokens for o in outs[1:5])
    # Reuse is an optimisation only: the same prompt scored cold gives the same distribution.
    cold = LlamaCppEngineConfig(prefix_reuse=False).build()
    again = cold.score(ps[2:4], SCALE)
    cold.close()
    assert all(o.computed_tokens == o.prompt_tokens for o in again)  # no reuse: not the parallel path either
    for a, b in zip(outs[2:4], again):  # bit for bit: llama.cpp computes SmolLM2's tokens the same in any batch of 2+
        assert a.expected_score == b.expected_score


def test_models_load_without_amx_buffers_where_llamacpp_has_them():
    """On an AMX CPU (Sapphire Rapids) llama.cpp's AMX kernels crashed the first decode of a
    batch with a segmentation fault, every engine test with it: models load without the extra
    buffers there (judgecal.engines.llamacpp_amx), and a 512-token batch decodes. Elsewhere the
    defaults stay as llama.cpp has them."""
    import llama_cpp.llama_cpp as lib

    from judgecal.engines.llamacpp_amx import amx_built_in

    eng = dataclasses.replace(LlamaCppEngineConfig(), parallel_probes=False).build()
    try:
        assert lib.llama_model_default_params().use_extra_bufts is (not amx_built_in())
        tokens = eng.prompt_tokens(prompts(1)[0])
        assert len(tokens) > 512
        eng._eval(tokens, reuse=False)  # the first batch is 512 tokens: where the AMX kernels crashed
        assert np.isfinite(eng._last_logits()).all()
    finally:
        eng.close()


def test_one_at_a_time_never_computes_a_token_alone():
    """llama.cpp computes a batch of one token with other kernels, so the one-at-a-time path
    never makes one: a prompt the cache holds whole, or but for its last token, or whose new
    tokens are one past a multiple of n_batch, gets the logits of the same prompt computed with
    nothing cached, bit for bit (before this release the first two computed the last token
    alone and differed). A generation reads the prompt's own logits, and steps past the prompt
    (trie nodes, generated tokens, computed alone) are dropped from the cache."""
    import llama_cpp

    eng = dataclasses.replace(LlamaCppEngineConfig(), parallel_probes=False, n_batch=64).build()
    try:
        p = prompts(1)[0]
        whole = eng.prompt_tokens(p)
        t = whole[:570]  # a length where a last token computed alone differs (by 1.0 in a logit)
        assert len(whole) > 570 and len(t) % 64 not in (0, 1)

        def cold(tokens, eng=eng):
            llama_cpp.llama_memory_clear(llama_cpp.llama_get_memory(eng.llm._ctx.ctx), True)
            eng.llm.n_tokens = 0
            eng._eval(tokens, reuse=False)
            return eng._last_logits()

        want = cold(t)
        assert eng._eval(t) == 2 and np.array_equal(eng._last_logits(), want)  # the same prompt again
        cold(t[:-1] + [t[-2]])  # the cache: the prompt but for its last token
        assert eng._eval(t) == 2 and np.array_equal(eng._last_logits(), want)
        cold(t[:len(t) - 65])  # 65 new tokens with n_batch = 64: batches of 63 and 2
        assert eng._eval(t) == 65 and np.array_equal(eng._last_logits(), want)
        assert np.array_equal(cold(t[:129] + t[129:]), want)  # cold, in batches of 64, 64, then the rest

        calls, real_eval = [], eng.llm.eval

        def recording(tokens):
            calls.append((eng.llm.n_tokens, len(tokens)))
            return real_eval(tokens)

        eng.llm.eval = recording
        for _ in range(2):  # the cache holds the prompt both times
            out = eng.generate([dataclasses.replace(p, temperature=0.0)], 3)[0]
            assert out.completion_tokens >= 1 and eng.llm.n_tokens == len(whole)  # the generated tokens dropped
            assert all(n >= 2 for at, n in calls if at < len(whole)), calls  # the prompt: no token alone
            assert not [c for c in calls if c[0] == len(whole) - 1], calls  # its last token not computed again
            calls.clear()
        eng.llm.eval = real_eval
        eng.score([p], ScoreScale(1, 10))  # a walk: one token a step past the prompt
        assert eng.llm.n_tokens == len(whole)
    finally:
        eng.close()
    # n_batch past llama-cpp-python's default n_ubatch (512): 513 new tokens are one forward
    # pass, not 512 and then 1
    big = dataclasses.replace(LlamaCppEngineConfig(), parallel_probes=False, n_batch=1024).build()
    try:
        want = cold(t, big)
        cold(t[:57], big)
        assert big._eval(t) == 513 and np.array_equal(big._last_logits(), want)
    finally:
        big.close()


def test_a_prompt_past_n_ctx_is_an_error_row_in_score_and_generate():
    """The collect's preflight refuses such prompts first; the engine, called directly, answers
    each with one error row (the others in the call are still answered)."""
    eng = dataclasses.replace(LlamaCppEngineConfig(), n_ctx=64, parallel_probes=False).build()
    try:
        long, short = prompts(1)[0], JudgePrompt("short", "Rate it.", "Fine.", "Rating: ")
        for outs in (eng.score([long, short], SCALE), eng.generate([long, short], 2)):
            assert outs[0].parse_status == "error" and outs[0].raw_text.startswith("prompt of ")
            assert outs[0].raw_text.endswith("exceeds n_ctx=64") and outs[0].computed_tokens == 0
            assert outs[1].parse_status != "error"
    finally:
        eng.close()


def test_real_model_through_the_ray_pipeline(ray_local, tmp_path):
    items = subset_items(load_dataset("summeval"), 2, 2)
    probes = load_bank("style").probes(["length"])
    cfg = LlamaCppEngineConfig()
    plan = build_plan(items, probes, 1, SCALE, cfg.identity)
    store = PartStore(Workspace(tmp_path / "r"))
    stats = collect(plan, ProbeRenderer(items, probes, SCALE), cfg, store, CollectSettings(block_rows=6))
    table = store.read()
    assert stats.computed == table.num_rows == 12
    assert set(table["judge"].to_pylist()) == {"llamacpp:SmolLM2-135M-Instruct.Q4_1.gguf"}
    assert table["expected_score"].null_count == 0
    assert stats.computed_tokens < stats.prompt_tokens / 2


@pytest.fixture(scope="module")
def llama_server():
    """llama_cpp.server: an OpenAI-compatible HTTP server on 127.0.0.1 with the bundled model
    (through judgecal.engines.llamacpp_amx: on an AMX CPU llama_cpp.server's own load crashed
    at the first request, as the embedded judge did)."""
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "judgecal.engines.llamacpp_amx", "--model", bundled_model_path(),
         "--model_alias", "smollm2",
         "--host", "127.0.0.1", "--port", str(port), "--n_ctx", "4096", "--logits_all", "True"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    import urllib.request

    deadline = time.time() + 60
    while time.time() < deadline:
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/v1/models", timeout=1)
            break
        except OSError:
            time.sleep(0.3)
    else:
        proc.kill()
        pytest.fail("llama_cpp.server did not start")
    yield f"http://127.0.0.1:{port}/v1"
    proc.terminate()
    proc.wait(10)


def test_http_engine_against_a_real_openai_compatible_server(llama_server):
    eng = HttpEngineConfig(base_url=llama_server, model="smollm2", concurrency=2, max_tokens=4).build()
    ps = prompts(1, ("length",))
    outs = eng.score(ps, SCALE)
    eng.close()
    assert len(outs) == 3
    for o in outs:
        assert o.parse_status in ("ok", "unparsed"), o.raw_text
        assert o.prompt_tokens > 200 and o.completion_tokens >= 1
        assert o.raw_text is not None


class Flaky(BaseHTTPRequestHandler):
    """Fails the first two calls with 503, then answers like a chat completions endpoint."""

    calls = 0
    in_flight = 0
    max_in_flight = 0
    lock = threading.Lock()

    def do_POST(self):
        cls = type(self)
        with cls.lock:
            cls.calls += 1
            n = cls.calls
            cls.in_flight += 1
            cls.max_in_flight = max(cls.max_in_flight, cls.in_flight)
        self.rfile.read(int(self.headers["Content-Length"]))
        time.sleep(0.05)
        if n <= 2:
            body, code = b'{"error": "busy"}', 503
        else:
            body, code = chat_completion("Score: 4", prompt_tokens=11, completion_tokens=3), 200
        with cls.lock:
            cls.in_flight -= 1
        send_json(self, body, code)

    def log_message(self, *a):
        pass


def test_http_engine_retries_with_backoff_and_bounds_concurrency():
    server = ThreadingHTTPServer(("127.0.0.1", 0), Flaky)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/v1"
        eng = HttpEngineConfig(base_url=url, model="m", concurrency=2, max_retries=3, logprobs=False).build()
        outs = eng.score([JudgePrompt(str(i), "s", "u") for i in range(6)], SCALE)
        assert [o.score for o in outs] == [4.0] * 6
        assert Flaky.calls == 8 and Flaky.max_in_flight <= 2
        failing = HttpEngineConfig(base_url="http://127.0.0.1:9/v1", model="m", max_retries=1, timeout_s=2).build()
        (o,) = failing.score([JudgePrompt("z", "s", "u")], SCALE)
        assert o.parse_status == "error" and "Connection" in o.raw_text
    finally:
        server.shutdown()


class Recorder(BaseHTTPRequestHandler):
    """A chat completions endpoint that records each JSON body and answers ``reply``."""

    bodies: list = []
    lock = threading.Lock()
    reply = "Score: 4"

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        with self.lock:
            self.bodies.append(body)
        send_json(self, chat_completion(self.reply, prompt_tokens=17, completion_tokens=5))

    def log_message(self, *a):
        pass


def test_http_engine_sends_temperature_and_seed_and_generates_text():
    from judgecal.engines.base import seed_of

    server = ThreadingHTTPServer(("127.0.0.1", 0), Recorder)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    eng = None
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/v1"
        eng = HttpEngineConfig(base_url=url, model="m", concurrency=2, max_retries=0, timeout_s=5,
                               logprobs=False).build()
        same = [JudgePrompt("r1", "s", "u", temperature=0.7, seed=3) for _ in range(2)]
        outs = eng.score([*same, JudgePrompt("r1", "s", "u", temperature=0.7, seed=4)], SCALE)
        assert [o.score for o in outs] == [4.0] * 3
        temps = [b["temperature"] for b in Recorder.bodies]
        seeds = [b["seed"] for b in Recorder.bodies]
        assert temps == [0.7] * 3
        assert sorted(seeds) == sorted([seed_of("r1", 3) % 2**31] * 2 + [seed_of("r1", 4) % 2**31])
        assert len(set(seeds)) == 2  # identical requests share a seed; another run draws another

        Recorder.bodies.clear()
        Recorder.reply = "uses a source"
        gen = eng.generate([JudgePrompt("g", "s", "u", answer_prefix="1. The summary "),
                            JudgePrompt("h", "s", "u")], max_tokens=32)
        assert [o.raw_text for o in gen] == ["uses a source"] * 2  # the prefix was not sent: none is added
        assert all(o.parse_status == "ok" and o.score is None for o in gen)
        assert [(o.prompt_tokens, o.computed_tokens, o.completion_tokens) for o in gen] == [(17, 17, 5)] * 2
        assert all(b["max_tokens"] == 32 and b["temperature"] == 0.0 for b in Recorder.bodies)
        assert all([m["role"] for m in b["messages"]] == ["system", "user"] for b in Recorder.bodies)

        Recorder.reply = "1. The summary names the source"  # a server that did continue the prefix
        (o,) = eng.generate([JudgePrompt("k", "s", "u", answer_prefix="1. The summary ")], max_tokens=32)
        assert o.raw_text == "1. The summary names the source"

        # URW's criteria request, answered as a chat model answers it: the criteria are its lines
        # (the prefix glued on made "Does the response1. Does it give a name?": a user's finding)
        from judgecal.rubrics.criteria import CriteriaRenderer, parse_criteria

        (r,) = CriteriaRenderer({"g": "Name a bakery."}, 2).render([{"item_id": "g"}])
        Recorder.reply = "1. Does it give a name?\n2. Is the name related to baking?"
        (o,) = eng.generate([JudgePrompt("c", r.system, r.user, r.answer_prefix)], max_tokens=96)
        assert parse_criteria(o.raw_text, 2) == ["Does it give a name?", "Is the name related to baking?"]

        failing = HttpEngineConfig(base_url="http://127.0.0.1:9/v1", model="m", max_retries=0, timeout_s=2).build()
        (o,) = failing.generate([JudgePrompt("z", "s", "u")], max_tokens=8)
        failing.close()
        assert o.parse_status == "error" and "Connection" in o.raw_text
    finally:
        if eng is not None:
            eng.close()
        server.shutdown()
        server.server_close()


def test_http_engine_conforms_against_a_real_server(llama_server):
    from judgecal.engines.conformance import check_engine

    check_engine(HttpEngineConfig(base_url=llama_server, model="smollm2", concurrency=2, max_tokens=4))
