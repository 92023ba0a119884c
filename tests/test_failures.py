"""Failed requests are not done: retried by the next run (attempts recorded), collect exits 3
with one summary line while any still fail, fit and evaluate refuse with the count and reason.
Also: --set overrides, and capability checks before any request is sent."""

import json
import os
import subprocess
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pyarrow.compute as pc
import pytest

from judgecal.pipeline import PartStore
from judgecal.workspace import Workspace

from conftest import ROOT, chat_completion, free_port, judgecal_cmd, send_json, write_config


class FakeJudge(BaseHTTPRequestHandler):
    """Answers "3"; while ``failing``, only the first request (collect's preflight) gets an
    answer and every later one a 500 (``withheld``: a 200 whose answer the provider's content
    filter withheld, content null), so the requests themselves fail."""

    failing = False
    withheld = False
    seen = 0

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        type(self).seen += 1
        if self.failing and (self.seen > 1 or self.withheld == "all") and self.withheld:
            answer = json.loads(chat_completion("", model=body["model"]))
            answer["choices"][0].update(finish_reason="content_filter", message={"role": "assistant", "content": None})
            send_json(self, json.dumps(answer).encode())
            return
        if self.failing and self.seen > 1:
            self.send_response(500)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        send_json(self, chat_completion("3", model=body["model"]))

    def log_message(self, *a):
        pass


def config(tmp_path, port, extra=""):
    out = tmp_path / "out"
    return out, write_config(tmp_path / "c.toml", f"""
[study]
output = "{out}"
[dataset]
max_groups = 4
max_items_per_group = 2
[probes]
attributes = ["length"]
[engine]
kind = "http"
base_url = "http://127.0.0.1:{port}/v1"
max_retries = 0
timeout_s = 2.0
logprobs = false
[fit]
folds = 2
inner_folds = 2
bootstrap = 100
{extra}""")


def cli(*args):
    env = {**os.environ, "RAY_AUTH_MODE": "disabled"}
    return subprocess.run(judgecal_cmd(*args), cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)


def serve(port, handler):
    server = ThreadingHTTPServer(("127.0.0.1", port), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def failing_judge(port, withheld=False):
    return serve(port, type("Failing", (FakeJudge,), {"failing": True, "seen": 0, "withheld": withheld}))


# "all": the preflight's answer withheld too (the judge is there: it stopped every rerun, a second reader's finding)
@pytest.mark.parametrize("withheld", [False, True, "all"], ids=["http-500", "content-filter", "filtered-preflight"])
def test_failed_requests_are_retried_and_refused_until_answered(tmp_path, withheld):
    port = free_port()
    out, cfg = config(tmp_path, port)
    server = failing_judge(port, withheld)  # the preflight is answered, then every request fails
    try:
        r = cli("collect", str(cfg))
    finally:
        server.shutdown()
        server.server_close()
    assert r.returncode == 3, r.stderr[-2000:]
    last = r.stderr.strip().splitlines()[-1]
    reason = "content filter withheld" if withheld else "500"
    assert last.startswith("judgecal: collect:") and "24 of 24 requests failed" in last and reason in last
    for stage in ("fit", "evaluate"):
        f = cli(stage, str(cfg))
        assert f.returncode == 2 and len(f.stderr.strip().splitlines()) == 1
        assert "24 of 24 requests failed" in f.stderr and "rerun `judgecal collect`" in f.stderr
    if withheld is False:  # while another process collects into the folder: said so, not "rerun collect"
        import sys

        held = subprocess.Popen([sys.executable, "-c", (
            "import time\nfrom judgecal.pipeline.folder_lock import one_collect_at_a_time\n"
            f"with one_collect_at_a_time({str(out)!r}, print):\n    print('held', flush=True)\n    time.sleep(60)\n")],
            stdout=subprocess.PIPE, text=True)
        try:
            assert held.stdout.readline().strip() == "held"
            f = cli("fit", str(cfg))
        finally:
            held.kill()
            held.wait(timeout=30)
        assert f.returncode == 2 and len(f.stderr.strip().splitlines()) == 1, f.stderr
        assert f"a collect is running in this folder (pid {held.pid} on " in f.stderr and "rerun `judgecal collect`" \
            not in f.stderr
    server = serve(port, FakeJudge)
    try:
        r = cli("run", str(cfg))
    finally:
        server.shutdown()
    assert r.returncode == 0, r.stderr[-2000:]
    assert "24 retries of failed requests" in r.stderr
    best = PartStore(Workspace(out / "responses")).read()
    assert best.num_rows == 24 and set(best["parse_status"].to_pylist()) == {"ok"}
    assert set(best["attempt"].to_pylist()) == {2}  # the attempt that succeeded is recorded
    log = json.loads((out / "results.json").read_text())
    assert log["stats"]["responses"]["attempts"] == 2


def test_a_request_that_failed_max_attempts_times_is_not_retried(tmp_path):
    port = free_port()
    out, cfg = config(tmp_path, port, "[collect]\nmax_attempts = 1\n")
    server = failing_judge(port)
    try:
        assert cli("collect", str(cfg)).returncode == 3
    finally:
        server.shutdown()
    again = cli("collect", str(cfg))  # nothing to ask: no preflight, no request
    assert again.returncode == 3 and "24 failed 1 times and are not retried" in again.stderr
    errors = PartStore(Workspace(out / "responses")).read_all()
    assert errors.num_rows == 24 and pc.all(pc.equal(errors["attempt"], 1)).as_py()


def test_set_overrides_any_field_and_is_checked(tmp_path):
    out, cfg = config(tmp_path, free_port())
    bad = cli("collect", str(cfg), "--set", "dataset.max_groups=abc")
    assert bad.returncode == 2 and "--set dataset.max_groups: must be an int or nothing, not 'abc'" in bad.stderr
    neg = cli("collect", str(cfg), "--set", "collect.block_rows=-3")
    assert neg.returncode == 2 and "--set collect.block_rows: must be at least 1" in neg.stderr
    ok = cli("collect", str(cfg), "--set", "engine.kind=simulated", "--set", "engine.base_url=x")
    assert ok.returncode == 2 and "unknown field for engine 'simulated'" in ok.stderr
    sim = write_config(tmp_path / "s.toml", f'[study]\noutput = "{out}"\n[dataset]\nmax_groups = 4\n'
                                            '[fit]\nfolds = 2\ninner_folds = 2\n')
    r = cli("collect", str(sim), "--set", "engine.kind=simulated", "--set", "probes.attributes=[\"length\"]")
    assert r.returncode == 0, r.stderr[-2000:]
    saved = json.loads((out / "study.json").read_text())
    assert saved["config"]["engine"]["kind"] == "simulated" and saved["config"]["pool"]["attributes"] == ["length"]


def test_an_engine_that_cannot_generate_is_refused_before_any_request(tmp_path, monkeypatch):
    """URW with generated criteria needs ``generate``: an engine without it stops at once,
    with one line, and nothing is written."""
    from judgecal.config import load_config
    from judgecal.engines import NullEngineConfig
    from judgecal.errors import InputError
    from judgecal.methods.runner import StudyRunner

    out = tmp_path / "u"
    cfg = load_config(str(write_config(tmp_path / "u.toml", f'[study]\noutput = "{out}"\nmethod = "urw"\n[urw]\n'
                                                             'calibration = "infobench"\n[engine]\nkind = "null"\n')))
    monkeypatch.setattr(NullEngineConfig, "capabilities", frozenset({"score"}))
    try:
        StudyRunner(cfg).collect()
    except InputError as e:
        assert "engine 'null' does not offer generate, sampling, which this study needs" in str(e)
    else:
        raise AssertionError("collect did not refuse")
    assert not out.exists()
