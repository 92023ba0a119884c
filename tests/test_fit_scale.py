"""A study's answered view in bounded memory (issue 15, item 8).

``answered`` joins ids and row positions only, and takes the plan whole when every request
is answered; ``best_per_request`` sorts the key columns only; ``completeness`` reads the
answers' text of the failed requests only; PRISM's view carries only the response columns it
reads. Each is checked here against what the code did before, on stores with duplicates,
retries, errors, unparsed answers, missing answers and another plan's answers, and the
fit-scale benchmark runs small end to end.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest

from judgecal.calibrate import build_features
from judgecal.methods.prism import ANSWERED_COLUMNS
from judgecal.pipeline.answered import answered, completeness, error_reason
from judgecal.pipeline.store import PartStore
from judgecal.probes import build_plan, load_bank
from judgecal.scale import ScoreScale
from judgecal.schemas import ITEMS, PARSE_ERROR, RESPONSES
from judgecal.workspace import Workspace

ROOT = Path(__file__).resolve().parents[1]
_KEYS = ("item_id", "group_id", "probe_id", "run")


def reference_answered(plan: pa.Table, store: PartStore) -> pa.Table:
    """``answered`` as it was before (every response column through the hash join)."""
    resp = store.read()
    ids = plan["request_id"]
    resp = resp.filter(pc.is_in(resp["request_id"], value_set=ids.combine_chunks()))
    resp = resp.drop_columns([c for c in _KEYS if c in resp.column_names])
    order = pa.array(range(plan.num_rows), pa.int64())
    keys = pa.table({"request_id": ids, "_order": order}).join(resp, keys="request_id", join_type="inner")
    keys = keys.sort_by("_order")
    rows = plan.take(keys["_order"])
    for name in keys.column_names:
        if name not in ("request_id", "_order"):
            rows = rows.append_column(keys.schema.field(name), keys[name])
    return rows


def reference_reasons(plan: pa.Table, store: PartStore) -> Counter:
    resp = store.read(["request_id", "parse_status", "raw_text", "attempt"])
    resp = resp.filter(pc.is_in(resp["request_id"], value_set=plan["request_id"].combine_chunks()))
    err = resp.filter(pc.equal(resp["parse_status"], PARSE_ERROR))
    return Counter(error_reason(t) for t in err["raw_text"].to_pylist())


def small_plan(n_items: int = 12, runs: int = 2) -> pa.Table:
    items = pa.Table.from_pylist([{"item_id": f"i{k}", "group_id": f"g{k % 3}", "task": "summary", "source": "a",
                                   "content": f"text {k}", "target": float(1 + k % 5)} for k in range(n_items)],
                                 schema=ITEMS)
    probes = load_bank("style").probes(["length", "hedging"])
    return build_plan(items, probes, runs, ScoreScale(1, 5), "simulated:test")


def commit_random(store: PartStore, plan: pa.Table, seed: int, answer_all: bool) -> None:
    """Parts of responses: some requests answered twice or retried after an error, some
    failed, some unparsed, some never answered (unless ``answer_all``), and answers of
    requests another plan holds."""
    rng = np.random.default_rng(seed)
    rows = []
    for r in plan.select(["request_id", "item_id", "group_id", "probe_id", "run"]).to_pylist():
        tries = 1 if answer_all else int(rng.choice([0, 1, 1, 2, 3]))
        for attempt in range(1, tries + 1):
            status = rng.choice(["ok", "ok", "ok", "unparsed", PARSE_ERROR])
            if answer_all and attempt == tries:
                status = rng.choice(["ok", "unparsed"])
            s = float(rng.uniform(1, 5))
            rows.append({**r, "judge": "simulated:test", "prompt_sha": "0" * 64,
                         "raw_text": f"RateLimit {rng.integers(3)}\ndetail" if status == PARSE_ERROR else f"{round(s)}",
                         "score": None if status != "ok" else float(round(s)), "parse_status": str(status),
                         "expected_score": None if status == PARSE_ERROR else s, "prompt_tokens": 10,
                         "computed_tokens": 10, "completion_tokens": 1, "latency_s": 0.1,
                         "attempt": int(rng.choice([attempt, 1]))})
    for k in range(5):  # another plan's answers in the same store
        rows.append({**rows[0], "request_id": f"other{k}", "parse_status": "ok"})
    order = rng.permutation(len(rows))
    for chunk in np.array_split(order, 4):
        store.write_part(pa.Table.from_pylist([rows[i] for i in chunk], schema=RESPONSES))


@pytest.mark.parametrize("seed", range(6))
def test_answered_and_completeness_match_the_whole_table_join(tmp_path, seed):
    plan = small_plan()
    store = PartStore(Workspace(str(tmp_path / "responses")))
    commit_random(store, plan, seed, answer_all=seed % 3 == 0)
    want = reference_answered(plan, store)
    got = answered(plan, store)
    assert got.equals(want) and got.schema.equals(want.schema)
    narrow = answered(plan, store, ANSWERED_COLUMNS)
    assert narrow.equals(want.select(narrow.column_names))
    assert narrow.column_names == plan.column_names + ANSWERED_COLUMNS
    if seed % 3 == 0:  # every request answered: features from the narrow view are the same table
        items = pa.table({"item_id": [f"i{k}" for k in range(12)], "group_id": [f"g{k % 3}" for k in range(12)],
                          "target": [float(1 + k % 5) for k in range(12)]})
        for field in ("expected", "parsed"):
            a, b = build_features(want, items, field), build_features(narrow, items, field)
            assert a.frame.equals(b.frame) and a.probe_columns == b.probe_columns
            assert (a.dropped_items, a.filled_deltas, a.other_filled) == (b.dropped_items, b.filled_deltas,
                                                                          b.other_filled)
    c = completeness(plan, store, max_attempts=2)
    reasons = reference_reasons(plan, store)
    top, count = reasons.most_common(1)[0] if reasons else (None, 0)
    assert (c.commonest_failure, c.commonest_count) == (top, count)
    assert c.failed == sum(reasons.values())
    assert c.answered + c.failed + c.missing == plan.num_rows


def test_answered_of_an_empty_store(tmp_path):
    plan = small_plan(2, 1)
    got = answered(plan, PartStore(Workspace(str(tmp_path / "responses"))))
    assert got.num_rows == 0 and got.column_names[: plan.num_columns] == plan.column_names


def test_fit_scale_benchmark_runs_small(tmp_path):
    """The benchmark end to end at 3,400 responses (100 items): the real plan writer, parts,
    and the fit, evaluate and report stages in their own processes."""
    r = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "bench_fit_scale.py"), "--responses", "3400",
                        "--no-save", "--keep", str(tmp_path / "study")], capture_output=True, text=True, cwd=ROOT,
                       timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    out = json.loads(r.stdout)
    assert out["responses"] == 3400 and out["items"] == 100 and out["probes"] == 17 and out["runs"] == 2
    assert out["feature_rows"] == 100 and out["feature_columns"] == 16
    assert 0 < out["peak_rss_mb"] < 2048 and out["fit_s"] > 0 and out["features_s"] > 0
    assert out["spearman"]["PRISM"] > out["spearman"]["Vanilla"]  # the planted length bias is corrected
    assert (tmp_path / "study" / "study" / "report.html").exists()
