"""The Ray Data judge stage on a local Ray instance: resume, atomic parts, planted-bias recovery."""

import json
import os
import signal
import subprocess
import time

import pyarrow as pa
import pyarrow.parquet as pq

from judgecal.config import parse_config
from judgecal.datasets import load_dataset, subset_items
from judgecal.engines import SimulatedEngineConfig
from judgecal.pipeline import PartStore, collect, item_aligned_blocks
from judgecal.probes import ProbeRenderer, build_plan, load_bank
from judgecal.scale import ScoreScale
from judgecal.study import run_all

from conftest import ROOT, judgecal_cmd, write_config

SIM = SimulatedEngineConfig(biases={"length": 0.8})


def small_plan(groups=3, per_group=4):
    items = subset_items(load_dataset("summeval"), groups, per_group)
    probes = load_bank("style").probes(["length", "hedging", "formality"])
    return items, probes, build_plan(items, probes, 1, ScoreScale(1, 5), SIM.identity)


def test_blocks_never_split_an_item():
    _, _, plan = small_plan()
    blocks = item_aligned_blocks(plan, 10)
    assert sum(b.num_rows for b in blocks) == plan.num_rows
    for a, b in zip(blocks, blocks[1:]):
        assert a["item_id"][-1].as_py() != b["item_id"][0].as_py()


def test_collect_then_rerun_computes_only_what_is_missing(ray_local, tmp_path):
    items, probes, plan = small_plan()
    store = PartStore(str(tmp_path / "responses"))
    # A run that got through part of the plan before it stopped:
    first = collect(plan.slice(0, 21), ProbeRenderer(items, probes, ScoreScale(1, 5)), SIM, store, block_rows=7)
    assert first.computed == 21
    # A killed writer leaves a temporary file; readers ignore it and the next run sweeps it.
    (tmp_path / "responses" / "_tmp").mkdir(exist_ok=True)
    (tmp_path / "responses" / "_tmp" / "part-dead.parquet").write_bytes(b"PAR1 half a file")
    assert len(store) == 21
    second = collect(plan, ProbeRenderer(items, probes, ScoreScale(1, 5)), SIM, store, block_rows=7)
    assert second.already_done == 21 and second.computed == plan.num_rows - 21
    table = store.read()
    assert sorted(table["request_id"].to_pylist()) == sorted(plan["request_id"].to_pylist())
    assert not list((tmp_path / "responses" / "_tmp").iterdir())
    third = collect(plan, ProbeRenderer(items, probes, ScoreScale(1, 5)), SIM, store)
    assert third.computed == 0


def test_killed_job_resumes_without_loss_or_duplicates(tmp_path):
    """SIGKILL the real CLI mid-collection, rerun it, and check every id is there once."""
    out = tmp_path / "out"
    cfg = write_config(tmp_path / "c.toml", f"""
[study]
output = "{out}"
[dataset]
max_groups = 40
[engine]
kind = "simulated"
[collect]
block_rows = 17
""")
    env = {**os.environ, "RAY_AUTH_MODE": "disabled"}
    proc = subprocess.Popen(judgecal_cmd("collect", str(cfg)), cwd=ROOT, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    parts = out / "responses"
    deadline = time.time() + 120
    while time.time() < deadline and len(list(parts.glob("part-*.parquet"))) < 3:
        time.sleep(0.05)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    committed_before = len(PartStore(str(parts)))
    planned = pq.read_table(out / "requests.parquet")
    assert 0 < committed_before < planned.num_rows
    done = subprocess.run(judgecal_cmd("collect", str(cfg)), cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert f"{committed_before} already committed" in done.stderr
    ids = PartStore(str(parts)).read()["request_id"].to_pylist()
    assert len(ids) == len(set(ids)) == planned.num_rows


def test_planted_length_bias_is_corrected(ray_local, tmp_path):
    cfg = parse_config({
        "study": {"name": "planted", "output": str(tmp_path / "s")},
        "dataset": {"max_groups": 30},
        "engine": {"kind": "simulated", "biases": {"length": 0.8}},
        "collect": {"block_rows": 170},
        "fit": {"bootstrap": 1000},
    })
    summary = run_all(cfg)
    res = {r["method"]: r for r in summary["results"]}
    assert summary["simulated_judge"] is True
    for m in ("PRISM", "alpha-PRISM"):
        assert res[m]["diff_low"] > 0, res[m]  # held-out gain whose 95% interval excludes 0
    report = (tmp_path / "s" / "report.html").read_text()
    assert "SIMULATED" in report
    saved = json.loads((tmp_path / "s" / "results.json").read_text())
    assert saved["requests"] == 30 * 16 * 17
    models = json.loads((tmp_path / "s" / "models.json").read_text())
    # the correction leans on the length probes, where the bias is
    coef = models["PRISM"]["coef"]
    assert max(coef, key=lambda k: abs(coef[k])).startswith("length:")
    preds = pq.read_table(tmp_path / "s" / "predictions.parquet")
    assert preds.num_rows == 480 and {"Vanilla", "PRISM", "alpha-PRISM"} <= set(preds.column_names)
    assert isinstance(preds, pa.Table)
