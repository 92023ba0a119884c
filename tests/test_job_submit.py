"""`ray job submit` of jobs/study.py to a real two-node Ray cluster on 127.0.0.1."""

import contextlib
import json
import os
import signal
import shutil
import subprocess
import tempfile
import time
import sys
from pathlib import Path

import pytest

from conftest import ROOT, free_port, write_config

RAY = str(Path(sys.executable).parent / "ray")


def _start(args, env):
    """A blocking `ray start` in its own session: killing that session stops exactly this node
    (never `ray stop`, which would stop every Ray instance on the machine)."""
    return subprocess.Popen([RAY, "start", "--block", *args], env=env, start_new_session=True,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def _alive_nodes(gcs: str, env) -> int:
    code = f"import ray; ray.init(address='{gcs}'); print(sum(n['Alive'] for n in ray.nodes()))"
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)
    return int(r.stdout.strip().splitlines()[-1]) if r.returncode == 0 and r.stdout.strip() else 0


@pytest.fixture
def two_node_cluster():
    env = {**os.environ, "RAY_AUTH_MODE": "disabled"}
    port, dash = free_port(), free_port()
    temp = tempfile.mkdtemp(prefix="rj", dir="/tmp")  # Ray's socket paths must stay short
    gcs = f"127.0.0.1:{port}"
    nodes = [_start(["--head", "--node-ip-address", "127.0.0.1", "--port", str(port), "--num-cpus", "1",
                     "--include-dashboard", "true", "--dashboard-host", "127.0.0.1", "--dashboard-port", str(dash),
                     "--temp-dir", temp, "--disable-usage-stats"], env)]
    try:
        deadline = time.time() + 90
        while _alive_nodes(gcs, env) < 1 and time.time() < deadline:
            time.sleep(1)
        nodes.append(_start(["--address", gcs, "--node-ip-address", "127.0.0.1", "--num-cpus", "1",
                             "--disable-usage-stats"], env))
        while _alive_nodes(gcs, env) < 2 and time.time() < deadline:
            time.sleep(1)
        yield env, f"http://127.0.0.1:{dash}", gcs
    finally:
        for proc in reversed(nodes):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGTERM)
        for proc in nodes:
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
        shutil.rmtree(temp, ignore_errors=True)


def test_prism_study_job_runs_on_a_two_node_cluster(two_node_cluster, tmp_path):
    env, dashboard, gcs = two_node_cluster
    assert _alive_nodes(gcs, env) == 2
    out = tmp_path / "study"
    cfg = write_config(tmp_path / "job.toml", f"""
[study]
name = "job"
output = "{out}"
[dataset]
max_groups = 10
max_items_per_group = 6
[engine]
kind = "simulated"
[collect]
num_actors = 2
block_rows = 34
[fit]
inner_folds = 4
bootstrap = 500
""")
    submit = [RAY, "job", "submit", "--address", dashboard, "--",
              sys.executable, str(ROOT / "jobs" / "study.py"), str(cfg),
              "--set", "fit.folds=5"]
    for _ in range(30):  # the head's job agent can take a while to come up on 2 busy cores
        r = subprocess.run(submit, env=env, capture_output=True, text=True, timeout=240)
        if "No available agent" not in r.stdout + r.stderr:
            break
        time.sleep(2)
    assert r.returncode == 0, (r.stdout + r.stderr)[-3000:]
    assert "succeeded" in (r.stdout + r.stderr).lower()
    log = json.loads((out / "results.json").read_text())
    assert log["stats"]["responses"]["requests"] == 10 * 6 * 17 and log["simulated_judge"]
    assert {x["method"] for x in log["results"]["methods"]} == {"Vanilla", "PRISM", "alpha-PRISM"}
