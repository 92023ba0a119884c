"""Batch APIs (``[engine] kind = "openai-batch"``) against a local fake of OpenAI's files and
batches endpoints, which also answers chat completions: a request gets the same answer
whichever way it is sent, so a study collected through batches can be compared with the same
study collected through the ``http`` engine, request for request.

The batch tests never start Ray (``init_ray`` is made to fail): a batch collect is the
driver's job. Only the comparison with the ``http`` engine runs a Ray collect."""

import hashlib
import json
import math
import threading
from email.parser import BytesParser
from email.policy import HTTP
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pyarrow.compute as pc
import pytest

from judgecal.datasets import load_dataset, subset_items
from judgecal.engines import OpenAIBatchEngineConfig
from judgecal.engines.base import seed_of
from judgecal.pipeline import CollectSettings, PartStore, collect
from judgecal.pipeline.batches import STATE
from judgecal.pipeline.render import judge_prompts
from judgecal.probes import ProbeRenderer, build_plan, load_bank
from judgecal.scale import ScoreScale
from judgecal.workspace import Workspace

from conftest import send_json, small_study

SCALE = ScoreScale(1, 5)


def answer(body: dict) -> dict:
    """The fake judge: a chat completion fixed by the request (its user text and seed), with
    logprobs over 1-5 when asked."""
    h = int(hashlib.sha256(f"{body['messages'][-1]['content']}|{body.get('seed')}".encode()).hexdigest(), 16)
    score = 1 + h % 5
    choice = {"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": str(score)}}
    if body.get("logprobs"):
        alts = sorted(({"token": str(v), "logprob": -abs(v - score) - ((h >> (4 * v)) % 10) / 10 - 0.05 * (v != score)}
                       for v in range(1, 6)), key=lambda a: -a["logprob"])[:body.get("top_logprobs", 5)]
        choice["logprobs"] = {"content": [{"token": str(score), "logprob": alts[0]["logprob"], "top_logprobs": alts}]}
    return {"id": "c", "object": "chat.completion", "created": 0, "model": body["model"], "choices": [choice],
            "usage": {"prompt_tokens": len(body["messages"][-1]["content"]) // 4 + 8, "completion_tokens": 1,
                      "total_tokens": 0}}


def ok_line(req: dict) -> dict:
    return {"id": "br", "custom_id": req["custom_id"], "error": None,
            "response": {"status_code": 200, "request_id": "r", "body": answer(req["body"])}}


def bad_line(req: dict, status=400, message="bad request") -> dict:
    return {"id": "br", "custom_id": req["custom_id"], "error": None,
            "response": {"status_code": status, "request_id": "r", "body": {"error": {"message": message}}}}


def expired_line(req: dict) -> dict:
    return {"id": "br", "custom_id": req["custom_id"], "response": None,
            "error": {"code": "batch_expired", "message": "not executed before the completion window expired"}}


def complete(reqs):
    """Every request answered: (status, output lines, error lines, errors)."""
    return "completed", [ok_line(r) for r in reqs], [], None


class FakeProvider:
    """POST /v1/chat/completions, POST /v1/files, POST /v1/batches, GET /v1/batches/{id},
    GET /v1/files/{id}/content. A batch ends at its ``polls``-th GET, with the outcome of the
    next function in ``outcomes`` (default: ``complete``) applied to its requests."""

    def __init__(self, polls=1):
        self.polls, self.outcomes = polls, []
        self.files: dict[str, bytes] = {}
        self.uploads: list[list[dict]] = []  # each batch input file's lines
        self.batches: dict[str, dict] = {}
        self.chat = 0
        self.lock = threading.Lock()
        owner = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def _body(self) -> bytes:
                if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
                    out = b""
                    while True:
                        n = int(self.rfile.readline().strip(), 16)
                        out += self.rfile.read(n)
                        self.rfile.readline()
                        if n == 0:
                            return out
                return self.rfile.read(int(self.headers.get("Content-Length") or 0))

            def do_POST(self):
                data = self._body()
                with owner.lock:
                    reply = owner.post(self.path, self.headers.get("Content-Type", ""), data)
                send_json(self, json.dumps(reply).encode())

            def do_GET(self):
                with owner.lock:
                    code, reply = owner.get(self.path)
                if isinstance(reply, bytes):
                    self.send_response(code)
                    self.send_header("Content-Type", "application/octet-stream")
                    self.send_header("Content-Length", str(len(reply)))
                    self.end_headers()
                    self.wfile.write(reply)
                else:
                    send_json(self, json.dumps(reply).encode(), code)

            def log_message(self, *a):
                pass

        class Server(ThreadingHTTPServer):
            daemon_threads = True

        self.server = Server(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def post(self, path: str, ctype: str, data: bytes) -> dict:
        if path.endswith("/chat/completions"):
            self.chat += 1
            return answer(json.loads(data))
        if path.endswith("/files"):
            msg = BytesParser(policy=HTTP).parsebytes(f"Content-Type: {ctype}\r\n\r\n".encode() + data)
            parts = {p.get_param("name", header="content-disposition"): p for p in msg.iter_parts()}
            assert parts["purpose"].get_content().strip() == "batch"
            fid = f"file-{len(self.files)}"
            self.files[fid] = parts["file"].get_payload(decode=True)
            return {"id": fid, "object": "file", "bytes": len(self.files[fid]), "created_at": 0,
                    "filename": parts["file"].get_filename(), "purpose": "batch", "status": "processed"}
        if path.endswith("/batches"):
            req = json.loads(data)
            assert (req["endpoint"], req["completion_window"]) == ("/v1/chat/completions", "24h")
            bid = f"batch_{len(self.batches)}"
            lines = [json.loads(x) for x in self.files[req["input_file_id"]].decode().splitlines()]
            self.uploads.append(lines)
            self.batches[bid] = {"id": bid, "object": "batch", "endpoint": req["endpoint"], "created_at": 0,
                                 "completion_window": "24h", "input_file_id": req["input_file_id"],
                                 "status": "validating", "_polls": 0, "_lines": lines,
                                 "_outcome": self.outcomes.pop(0) if self.outcomes else complete}
            return self.view(bid)
        raise AssertionError(path)

    def get(self, path: str):
        if "/files/" in path and path.endswith("/content"):
            return 200, self.files[path.split("/")[-2]]
        bid = path.rsplit("/", 1)[-1]
        if bid not in self.batches:
            return 404, {"error": {"message": "no such batch"}}
        b = self.batches[bid]
        b["_polls"] += 1
        if b["status"] in ("validating", "in_progress") and b["_polls"] >= self.polls:
            status, out, err, errors = b["_outcome"](b["_lines"])
            b["status"] = status
            for name, lines in (("output_file_id", out), ("error_file_id", err)):
                if lines:
                    fid = f"file-{len(self.files)}"
                    self.files[fid] = "".join(json.dumps(x) + "\n" for x in lines).encode()
                    b[name] = fid
            if errors:
                b["errors"] = {"object": "list", "data": errors}
        elif b["status"] == "validating":
            b["status"] = "in_progress"
        return 200, self.view(bid)

    def view(self, bid: str) -> dict:
        b = self.batches[bid]
        n = len(b["_lines"])
        return {k: v for k, v in b.items() if not k.startswith("_")} | \
            {"request_counts": {"total": n, "completed": n if b["status"] == "completed" else 0, "failed": 0}}

    def close(self):
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def provider():
    p = FakeProvider()
    yield p
    p.close()


@pytest.fixture
def no_ray(monkeypatch):
    import importlib

    c = importlib.import_module("judgecal.pipeline.collect")  # the module (the package exports its function)

    def refuse():
        raise AssertionError("a batch collect started Ray")

    monkeypatch.setattr(c, "init_ray", refuse)


def setup(provider, tmp_path, groups=3, items=2, **kw):
    cfg = OpenAIBatchEngineConfig(base_url=provider.url, model="m", poll_s=0.01, **kw)
    its = subset_items(load_dataset("summeval"), groups, items)
    probes = load_bank("style").probes(["length"])
    plan = build_plan(its, probes, 1, SCALE, cfg.identity)
    return cfg, plan, ProbeRenderer(its, probes, SCALE), PartStore(Workspace(tmp_path / "r"))


def run(cfg, plan, renderer, store, wait=False, max_attempts=3):
    return collect(plan, renderer, cfg, store, CollectSettings(max_attempts=max_attempts, wait=wait),
                   log=lambda m: None)


def state(store) -> dict:
    return json.loads(open(f"{store.ws.uri}/{STATE}").read())


# -- tests -------------------------------------------------------------------------------------
def test_results_lines_are_read_as_the_http_engine_reads_an_answer():
    from judgecal.engines.base import engine_config_from_dict
    from judgecal.engines.batch import LineReader, failure, read_lines
    from judgecal.errors import InputError

    with pytest.raises(InputError, match=r"\[engine\].model: name the provider's model"):
        engine_config_from_dict({"kind": "openai-batch"}, "[engine]")
    cfg = engine_config_from_dict({"kind": "openai-batch", "model": "m", "batch_price_per_million_prompt_tokens": 2.0},
                                  "[engine]")
    assert cfg.cost(10**6, 10**6) == 2.0
    req = {"custom_id": "a", "body": {"model": "m", "messages": [{"role": "user", "content": "x"}], "seed": 1,
                                      "logprobs": True, "top_logprobs": 5}}
    good, bad = ok_line(req), bad_line(req, 429, "slow down")
    text = "\n".join(json.dumps(x) for x in (bad, good, good, {"custom_id": "z"}, {"no": "id"})) + "\n[oops\n"
    lines, counts = read_lines([text], {"a"})
    assert lines == {"a": good} and counts == {"lines": 6, "unreadable": 2, "unknown": 1, "duplicates": 2}
    # the provider's own line without a body is a failed answer (an attempt), never "unreadable": that
    # would submit it again, unbounded; a file a user imports calls it unreadable (no attempt used)
    bodiless = {"custom_id": "a", "response": {"status_code": 500, "body": None}, "error": None}
    assert read_lines([json.dumps(bodiless)])[0] == {"a": bodiless}
    assert failure(bodiless) == "BatchError: a results line with no response body"
    assert read_lines([json.dumps(bodiless)], results_shape=True)[1]["unreadable"] == 1
    reader = LineReader(cfg)
    out = reader.output(good, "score", SCALE)
    want = answer(req["body"])
    assert (out.score, out.parse_status, out.prompt_tokens) == (float(want["choices"][0]["message"]["content"]), "ok",
                                                                want["usage"]["prompt_tokens"])
    assert out.expected_score is not None and 1 <= out.expected_score <= 5
    assert reader.output(bad, "score", SCALE).raw_text == "BatchError: HTTP 429: slow down"
    broken = {"custom_id": "a", "response": {"status_code": 200, "body": {"choices": []}}}
    assert reader.output(broken, "score", SCALE).raw_text.startswith("BatchError: unreadable answer")
    # a completion the provider's filter withheld is a failed attempt in both modes (it was an
    # empty answer, never asked again); a model's own refusal is its answer, read as one
    withheld = json.loads(json.dumps(good))
    withheld["response"]["body"]["choices"][0].update(finish_reason="content_filter",
                                                      message={"role": "assistant", "content": None})
    for mode in ("score", "generate"):
        out = reader.output(withheld, mode, SCALE)
        assert out.parse_status == "error" and "content filter withheld" in out.raw_text
    refused = json.loads(json.dumps(good))
    refused["response"]["body"]["choices"][0]["message"] = {"role": "assistant", "content": None,
                                                            "refusal": "I can't help with that."}
    assert reader.output(refused, "score", SCALE).parse_status == "refusal"
    said = reader.output(good, "generate", None)  # the judge's whole turn: no prefix was sent, none is added
    assert said.raw_text == want["choices"][0]["message"]["content"] and said.score is None
    # URW's generated criteria: "1. Does the response" glued before the judge's own "1. ..." made
    # one criterion of the two (a user's finding)
    from judgecal.rubrics.criteria import parse_criteria

    listed = json.loads(json.dumps(good))
    listed["response"]["body"]["choices"][0]["message"]["content"] = "1. Does it give a name?\n2. Is it short?"
    assert parse_criteria(reader.output(listed, "generate", None).raw_text, 2) == ["Does it give a name?",
                                                                                  "Is it short?"]
    reader.close()


def test_files_are_cut_at_the_limits_and_each_line_is_the_http_request(provider, tmp_path, no_ray):
    cfg, plan, renderer, store = setup(provider, tmp_path, max_requests_per_file=10)
    n = plan.num_rows
    first = run(cfg, plan, renderer, store)
    assert (first.computed, first.in_flight, first.open_batches) == (0, n, math.ceil(n / 10))
    assert [len(u) for u in provider.uploads] == [10] * (n // 10) + ([n % 10] if n % 10 else [])
    lines = [x for u in provider.uploads for x in u]
    prompts = {p.request_id: p for p in judge_prompts(renderer, plan)}
    assert sorted(x["custom_id"] for x in lines) == sorted(plan["request_id"].to_pylist())  # each id once
    for x in lines:
        p, body = prompts[x["custom_id"]], x["body"]
        assert (x["method"], x["url"]) == ("POST", "/v1/chat/completions")
        assert body["messages"] == [{"role": "system", "content": p.system}, {"role": "user", "content": p.user}]
        assert (body["model"], body["seed"], body["max_tokens"], body["logprobs"], body["top_logprobs"]) == \
            ("m", seed_of(p.request_id, p.seed) % 2**31, 8, True, 10)
    assert [b["batch_id"] for b in state(store)["batches"]] == list(provider.batches)
    # a second look before the provider is done: nothing submitted again, nothing committed
    provider.polls = 2  # each batch ends at its second look
    second = run(cfg, plan, renderer, store)
    assert (second.computed, second.in_flight, len(provider.uploads)) == (0, n, len(lines) // 10 + bool(n % 10))
    third = run(cfg, plan, renderer, store)  # done at the provider now: committed
    assert (third.computed, third.errors, third.in_flight) == (n, 0, 0)
    assert store.read_all(["request_id"]).num_rows == n and set(store.read()["parse_status"].to_pylist()) <= {"ok"}
    again = run(cfg, plan, renderer, store)
    assert (again.already_done, again.computed, store.read_all(["request_id"]).num_rows) == (n, 0, n)
    # a byte limit cuts too: every file within it
    cfg2, plan2, renderer2, store2 = setup(provider, tmp_path / "b", max_bytes_per_file=20_000)
    before = len(provider.uploads)
    run(cfg2, plan2, renderer2, store2)
    sizes = [len(provider.files[b["input_file_id"]]) for b in list(provider.batches.values())[before:]]
    assert len(sizes) > 1 and max(sizes) <= 20_000


def test_a_partly_failed_batch_with_missing_lines_and_duplicate_ids(provider, tmp_path, no_ray):
    cfg, plan, renderer, store = setup(provider, tmp_path)

    def partly(reqs):
        out = [ok_line(r) for r in reqs[5:]] + [ok_line(reqs[5])]  # reqs[5] answered twice
        err = [bad_line(r) for r in reqs[:3]] + [bad_line(reqs[6], 500, "overloaded")]  # reqs[6]: failed, then answered
        return "completed", out, err, None  # reqs[3], reqs[4]: no line at all

    provider.outcomes = [partly]
    n = plan.num_rows
    run(cfg, plan, renderer, store)
    ids = [x["custom_id"] for x in provider.uploads[0]]
    got = run(cfg, plan, renderer, store)  # commits the batch, submits the failed and the missing again
    assert (got.computed, got.errors) == (n - 2, 3)
    rows = store.read_all()
    assert rows.num_rows == n - 2 and len(set(rows["request_id"].to_pylist())) == n - 2  # duplicates once
    best = {r["request_id"]: r for r in store.read().to_pylist()}
    assert {i for i in ids if best.get(i, {}).get("parse_status") == "error"} == set(ids[:3])
    assert "HTTP 400: bad request" in best[ids[0]]["raw_text"] and best[ids[6]]["parse_status"] == "ok"
    assert ids[3] not in best and ids[4] not in best
    entry = state(store)["batches"][0]
    assert (entry["answered"], entry["failed"], entry["missing"], entry["duplicates"]) == (n - 5, 3, 2, 2)
    resent = {x["custom_id"]: x for x in provider.uploads[1]}
    assert set(resent) == set(ids[:5])
    from judgecal.pipeline.batches import BatchState

    manifest = store.ws.read_parquet(BatchState(store.ws).open()[0]["manifest"])
    attempts = dict(zip(manifest["request_id"].to_pylist(), manifest["attempt"].to_pylist()))
    assert [attempts[i] for i in ids[:5]] == [2, 2, 2, 1, 1]  # the failed ones retried, the missing ones asked again
    last = run(cfg, plan, renderer, store)
    assert (last.computed, last.in_flight) == (5, 0)
    final = store.read()
    assert final.num_rows == n and set(final["parse_status"].to_pylist()) == {"ok"}
    assert store.read_all(["request_id"]).num_rows == n + 3  # the three error rows stay beside their retries


def test_expired_and_failed_batches_are_retried_until_answered_with_wait(provider, tmp_path, no_ray):
    cfg, plan, renderer, store = setup(provider, tmp_path, max_requests_per_file=9)  # 18 requests: two batches

    def expired(reqs):
        return "expired", [ok_line(r) for r in reqs[:4]], [expired_line(r) for r in reqs[4:]], None

    def failed(reqs):
        return "failed", [], [], [{"code": "invalid_json_line", "message": "line 2 is not valid", "line": 2},
                                  {"code": "too_many_tokens", "message": "the batch exceeds the queue limit"}]

    provider.outcomes = [expired, failed]
    n = plan.num_rows
    logs = []
    stats = collect(plan, renderer, cfg, store, CollectSettings(wait=True), log=logs.append)
    assert n == 18 and (stats.computed, stats.in_flight) == (n + 5 + 9, 0)  # every request, and the errors before
    final = store.read()
    assert final.num_rows == n and set(final["parse_status"].to_pylist()) == {"ok"}
    errors = store.read_all().filter(pc.equal(store.read_all()["parse_status"], "error")).to_pylist()
    reasons = {r["raw_text"] for r in errors}
    assert "BatchError: batch_expired: not executed before the completion window expired" in reasons
    assert "BatchError: invalid_json_line: line 2 is not valid" in reasons
    assert "BatchError: too_many_tokens: the batch exceeds the queue limit" in reasons
    assert {r["attempt"] for r in errors} == {1}
    assert sum("expired: 4 answered, 5 failed" in m for m in logs) == 1, logs
    statuses = [b["status"] for b in state(store)["batches"]]
    assert statuses[:2] == ["expired", "failed"] and set(statuses[2:]) == {"completed"}


def test_a_stop_between_the_commit_and_batches_json_commits_nothing_twice(provider, tmp_path, no_ray):
    cfg, plan, renderer, store = setup(provider, tmp_path)
    provider.outcomes = [lambda reqs: ("completed", [ok_line(r) for r in reqs[2:]], [bad_line(reqs[0])], None)]
    run(cfg, plan, renderer, store)
    before = open(f"{store.ws.uri}/{STATE}").read()
    run(cfg, plan, renderer, store, max_attempts=1)  # committed (no retry: one attempt allowed)
    rows = store.read_all().num_rows
    open(f"{store.ws.uri}/{STATE}", "w").write(before)  # as if stopped before batches.json was written
    again = run(cfg, plan, renderer, store, max_attempts=1)
    assert store.read_all().num_rows == rows and again.parts == 0  # the same parts, refused by the store


def test_an_upload_never_submitted_is_submitted_and_a_batch_the_provider_lost_is_asked_again(provider, tmp_path,
                                                                                               no_ray):
    cfg, plan, renderer, store = setup(provider, tmp_path, max_requests_per_file=9)  # two files, two batches
    run(cfg, plan, renderer, store)
    st = state(store)
    upload = st["batches"][0]["input_file_id"]
    st["batches"][0].update(batch_id=None, status="uploaded")  # stopped between the upload and the batch
    st["batches"][1]["batch_id"] = "batch_unknown"  # a batch the provider does not know (404)
    open(f"{store.ws.uri}/{STATE}", "w").write(json.dumps(st))
    stats = run(cfg, plan, renderer, store, wait=True)
    assert provider.batches["batch_2"]["input_file_id"] == upload  # the recorded upload, not a new one
    assert len(provider.batches) == 4 and len(provider.uploads[3]) == 9  # the lost batch's requests, again
    assert [b["status"] for b in state(store)["batches"]] == ["completed", "lost", "completed"]
    assert (stats.computed, stats.in_flight) == (plan.num_rows, 0) and store.read_all().num_rows == plan.num_rows


def test_cli_collect_stops_once_submitted_and_commits_with_wait(provider, tmp_path, no_ray, capsys):
    from judgecal.cli import main

    out = tmp_path / "out"
    toml = small_study(tmp_path, out, f'kind = "openai-batch"\nbase_url = "{provider.url}"\nmodel = "m"\npoll_s = 0.01')
    assert main(["collect", str(toml)]) == 3
    err = capsys.readouterr().err
    assert "judgecal: collect: " in err and "requests are at the provider in 1 batch" in err
    assert main(["collect", str(out), "--wait"]) == 0
    assert "responses: collected" in capsys.readouterr().out
    assert len(provider.uploads) == 1 and len(PartStore(Workspace(out / "responses"))) == len(provider.uploads[0])


def test_export_and_import_by_hand(tmp_path, no_ray, capsys):
    """For a provider judgecal does not call: the pending requests out as JSONL, its results in."""
    from judgecal.cli import main

    out = tmp_path / "out"
    toml = small_study(tmp_path, out, 'kind = "http"\nbase_url = "http://127.0.0.1:9/v1"\nmodel = "m"')  # never called
    path = tmp_path / "x" / "requests.jsonl"
    assert main(["export-batch", str(toml), str(path), "--set", "engine.logprobs=false"]) == 0
    reqs = [json.loads(x) for x in path.read_text().splitlines()]
    n = len(reqs)
    assert f"wrote {n:,} pending requests to {path}" in capsys.readouterr().out
    assert all("logprobs" not in r["body"] for r in reqs)  # --set applies: the body is the http engine's request
    lines = [bad_line(reqs[0])] + [ok_line(r) for r in reqs[2:]] + [ok_line(reqs[2])]  # reqs[1]: no line
    lines += [{"custom_id": "not-a-request", "response": {"status_code": 200, "body": answer(reqs[3]["body"])}}]
    res = tmp_path / "results.jsonl"
    res.write_text("".join(json.dumps(x) + "\n" for x in lines) + "{not json\n")
    assert main(["import-batch", str(out), str(res)]) == 3  # a request failed, one unanswered: as collect
    said = capsys.readouterr()
    assert f"1 of {n:,} requests failed" in said.out and f"1 of {n:,} planned requests have no response" in said.out
    assert f"{n - 2:,} answers and 1 failed lines committed" in said.err
    assert f"[import] {res}: 1 unreadable line (line {len(lines) + 1}) left out" in said.err
    assert f"[import] {res}: 1 line left out: 1 for no request of {out} (another study's" in said.err
    assert f"[import] {res}: 1 line repeats a custom_id given before (one answer per request is kept)" in said.err
    store = PartStore(Workspace(out / "responses"))
    assert store.read_all(["request_id"]).num_rows == n - 1
    assert main(["import-batch", str(out), str(res)]) == 3  # the same file again: nothing committed
    assert "already imported" in capsys.readouterr().err and store.read_all(["request_id"]).num_rows == n - 1
    again = tmp_path / "again.jsonl"
    assert main(["export-batch", str(out), str(again)]) == 0
    rest = [json.loads(x) for x in again.read_text().splitlines()]
    assert sorted(r["custom_id"] for r in rest) == sorted([reqs[0]["custom_id"], reqs[1]["custom_id"]])
    res2 = tmp_path / "results2.jsonl"
    other = ok_line(reqs[3])  # answered already: another answer for it is left out, and said to be
    other["response"]["body"]["choices"][0]["message"]["content"] = "9"
    res2.write_text("".join(json.dumps(ok_line(r)) + "\n" for r in rest) + json.dumps(other) + "\n")
    assert main(["import-batch", str(out), str(res2)]) == 0
    said = capsys.readouterr()
    assert "every planned request is answered" in said.out
    assert f"[import] {res2}: 1 line left out: 1 for requests answered already (the committed answer is kept)" \
        in said.err
    junk = tmp_path / "junk.jsonl"  # nothing usable: the one line names the unreadable line too
    junk.write_text("{oops\n" + json.dumps(ok_line(reqs[3])) + "\n")
    assert main(["import-batch", str(out), str(junk)]) == 2
    assert "1 for requests answered already (the committed answer is kept); and line 1 unreadable; nothing " \
        "imported" in capsys.readouterr().err
    got = {r["request_id"]: r for r in store.read().to_pylist()}
    assert len(got) == n and {r["parse_status"] for r in got.values()} == {"ok"}
    for r in reqs:  # each answer is the one the provider gave for that request
        assert got[r["custom_id"]]["score"] == float(answer(r["body"])["choices"][0]["message"]["content"])
    assert got[reqs[0]["custom_id"]]["attempt"] == 2 and store.read_all(["request_id"]).num_rows == n + 1


def test_cost_is_at_the_batch_price_and_the_batch_study_equals_the_http_study(ray_local, provider, tmp_path, no_ray,
                                                                              monkeypatch):
    """Done when: the same study through the batch endpoints and through the http engine (the
    same server answering) holds the same requests with the same answers."""
    from judgecal.config import load_config
    from judgecal.methods.runner import StudyRunner
    from judgecal.pipeline.batches import BatchesPending

    def study(name, engine):
        return StudyRunner(load_config(str(small_study(tmp_path / name, tmp_path / name / "out", engine))))

    (tmp_path / "b").mkdir()
    (tmp_path / "h").mkdir()
    batch = study("b", f'kind = "openai-batch"\nbase_url = "{provider.url}"\nmodel = "m"\npoll_s = 0.01\n'
                       "batch_price_per_million_prompt_tokens = 1.25\nbatch_price_per_million_completion_tokens = 5.0")
    with pytest.raises(BatchesPending, match="requests are at the provider in 1 batch; rerun `judgecal collect"):
        batch.collect()
    stats = batch.collect(wait=True)["responses"]
    assert provider.chat == 0 and stats["in_flight"] == 0
    assert stats["cost_usd"] == pytest.approx((stats["prompt_tokens"] * 1.25 + stats["completion_tokens"] * 5.0) / 1e6)
    assert stats["cost_usd"] > 0

    monkeypatch.undo()  # the http engine's collect runs on Ray
    http = study("h", f'kind = "http"\nbase_url = "{provider.url}"\nmodel = "m"\nmax_retries = 0')
    http.collect()
    assert provider.chat > 0
    cols = ["request_id", "item_id", "probe_id", "judge", "prompt_sha", "raw_text", "score", "parse_status",
            "expected_score", "prompt_tokens", "completion_tokens", "attempt"]
    a = PartStore(batch.ws.child("responses")).read(cols).to_pylist()
    b = PartStore(http.ws.child("responses")).read(cols).to_pylist()
    assert len(a) == len(b) == batch.ws.read_parquet("requests.parquet").num_rows and a == b
    assert len({r["score"] for r in a}) > 1 and all(r["expected_score"] is not None for r in a)


def test_the_text_table_prices_a_batch_study_at_the_batch_price():
    from judgecal.report.table import cost_lines

    log = {"spec": {"config": {"engine": {"kind": "openai-batch", "batch_price_per_million_prompt_tokens": 1.25,
                                          "batch_price_per_million_completion_tokens": 5.0}}},
           "stats": {"responses": {"cost_usd": 0.5, "prompt_tokens": 200_000, "completion_tokens": 50_000},
                     "collect": {"responses": {"cost_usd": 0.5}}}}
    (line,) = cost_lines(log)
    assert line.startswith("cost: $0.5000 for these answers (200,000 prompt + 50,000 completion tokens at $1.25 / $5 "
                           "per million, the batch price)")


def test_show_names_the_batch_engines_own_price_fields(tmp_path, capsys):
    """show pointed an openai-batch user to the http engine's price fields (a user's finding)."""
    from judgecal.cli import main

    cfg = small_study(tmp_path, tmp_path / "out", engine='kind = "openai-batch"\nmodel = "m"')
    assert main(["show", str(cfg)]) == 0
    assert ("a hosted judge's [engine] takes batch_price_per_million_prompt_tokens and "
            "batch_price_per_million_completion_tokens)") in capsys.readouterr().out


def test_rewards_from_a_batch_study_verify_through_the_synchronous_endpoint(provider, tmp_path, capsys):
    """A calibration fitted with an openai-batch verifier was refused by the reward functions
    (a batch cannot answer while a trainer waits; a user's finding): the same judge verifies
    through the provider's chat endpoint, with a note that it is the full price."""
    from judgecal.calibrate.urw import URW
    from judgecal.rewards import URWReward, compute_score
    from judgecal.rubrics import TemplateSet

    t = TemplateSet()
    cal = tmp_path / "calibration.json"
    cal.write_text(json.dumps({"verifier": "v", "engine": {"kind": "openai-batch", "model": "m",
                                                           "base_url": provider.url},
                               "template_version": t.version, "templates_active": list(t.active),
                               "urw": URW().fit([1, 0.5, 0, 1], [1, 1, 0, 1]).to_dict()}))
    URWReward(str(cal))(["Say hi."], ["hi"], criteria=[["Does it greet?"]])
    assert provider.chat == len(t.active)  # one verification per template, synchronously
    compute_score("d", "hi", ["Does it greet?"], {"prompt": "Say hi.", "urw_calibration": str(cal)})
    assert provider.chat == 2 * len(t.active)
    assert "the batch judge (m) verifies through the provider's synchronous endpoint" in capsys.readouterr().err
