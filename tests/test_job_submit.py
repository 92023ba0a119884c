"""`ray job submit` of jobs/prism_study.py to a real two-node Ray cluster on 127.0.0.1."""

import json
import os
import shutil
import subprocess
import tempfile
import sys
from pathlib import Path

import pytest

from conftest import ROOT, free_port, write_config

RAY = str(Path(sys.executable).parent / "ray")


@pytest.fixture
def two_node_cluster(tmp_path):
    env = {**os.environ, "RAY_AUTH_MODE": "disabled"}
    port, dash = free_port(), free_port()
    temp = tempfile.mkdtemp(prefix="rj", dir="/tmp")  # Ray's socket paths must stay short
    head = [RAY, "start", "--head", "--node-ip-address", "127.0.0.1", "--port", str(port), "--num-cpus", "1",
            "--include-dashboard", "true", "--dashboard-host", "127.0.0.1", "--dashboard-port", str(dash),
            "--temp-dir", temp, "--disable-usage-stats"]
    worker = [RAY, "start", "--address", f"127.0.0.1:{port}", "--node-ip-address", "127.0.0.1", "--num-cpus", "1",
              "--disable-usage-stats"]
    try:
        subprocess.run(head, env=env, check=True, capture_output=True, timeout=120)
        subprocess.run(worker, env=env, check=True, capture_output=True, timeout=120)
        yield env, f"http://127.0.0.1:{dash}", f"127.0.0.1:{port}"
    finally:
        subprocess.run([RAY, "stop", "--force"], env=env, capture_output=True, timeout=120)
        shutil.rmtree(temp, ignore_errors=True)


def test_prism_study_job_runs_on_a_two_node_cluster(two_node_cluster, tmp_path):
    env, dashboard, gcs = two_node_cluster
    import ray

    ray.init(address=gcs)
    try:
        alive = [n for n in ray.nodes() if n["Alive"]]
    finally:
        ray.shutdown()
    assert len(alive) == 2
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
    r = subprocess.run(
        [RAY, "job", "submit", "--address", dashboard, "--",
         sys.executable, str(ROOT / "jobs" / "prism_study.py"), str(cfg)],
        env=env, capture_output=True, text=True, timeout=400,
    )
    assert r.returncode == 0, (r.stdout + r.stderr)[-3000:]
    assert "succeeded" in (r.stdout + r.stderr).lower()
    summary = json.loads((out / "results.json").read_text())
    assert summary["requests"] == 10 * 6 * 17 and summary["simulated_judge"]
    assert {x["method"] for x in summary["results"]} == {"Vanilla", "PRISM", "alpha-PRISM"}
