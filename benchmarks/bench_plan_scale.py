"""Benchmark: plans at 10^7 requests (100,000 items x 25 probes x 4 runs).

Measures (issue 8, item 6), in one process on this machine:
* planning and writing the plan file in batches (vectorised ids): ``requests_per_s``;
* the peak RSS of planning and of the resume scan, each phase in its own process
  (``plan_peak_rss_mb``, ``scan_peak_rss_mb``; ``peak_rss_mb`` the larger); the set-up that
  writes answers for every id runs in a third process and is not the system's figure;
* a resume scan over 10^7 committed ids: the done index built from the committed parts plus
  one pass over the plan's ids that finds nothing left to do: ``resume_scan_s``.
Targets: >= 100,000 requests/s, < 2 GB, resume scan < 30 s.
With ``--collect`` it also streams the whole plan through the collect pipeline with the
``null`` judge (minutes) and records that run's rate and the driver's RSS.
Writes benchmarks/results/plan_scale.json.
"""

import json
import os
import resource
import subprocess
import sys
import tempfile
import time

os.environ.setdefault("RAY_AUTH_MODE", "disabled")

import numpy as np  # noqa: E402
import pyarrow as pa  # noqa: E402
import pyarrow.parquet as pq  # noqa: E402

from _common import SCALE, save  # noqa: E402
from judgecal.datasets import load_dataset  # noqa: E402
from judgecal.engines import NullEngineConfig  # noqa: E402
from judgecal.pipeline import PartStore, PendingIndex, PlanSource, scan_plan  # noqa: E402
from judgecal.probes import load_bank, write_plan  # noqa: E402
from judgecal.workspace import Workspace  # noqa: E402

ITEMS, PROBES, RUNS = 100_000, 25, 4


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux: KiB


def many_items(n: int) -> pa.Table:
    """n items over 1,000 documents, their texts taken round-robin from SummEval's."""
    base = load_dataset("summeval")
    take = pa.array(np.arange(n) % base.num_rows)
    t = base.take(take)
    ids = pa.array([f"item{k}" for k in range(n)])
    groups = pa.array([f"doc{k % 1000}" for k in range(n)])
    return t.set_column(t.schema.get_field_index("item_id"), "item_id", ids).set_column(
        t.schema.get_field_index("group_id"), "group_id", groups)


def commit_all(source: PlanSource, store: PartStore, parts: int = 100) -> None:
    """Committed answers for every planned id (only the columns the resume scan reads)."""
    ids = source.column("request_id").combine_chunks()
    step = -(-len(ids) // parts)
    for k in range(parts):
        chunk = ids.slice(k * step, step)
        t = pa.table({"request_id": chunk, "parse_status": pa.array(["ok"] * len(chunk)),
                      "attempt": pa.array(np.ones(len(chunk), np.int32))})
        store.ws.write_parquet(f"part-{k:05d}.parquet", t)


def phase(name: str, tmp: str) -> dict:
    """One phase in this process (its own peak RSS)."""
    ws = Workspace(tmp)
    engine = NullEngineConfig()
    if name == "plan":
        items = many_items(ITEMS)
        probes = load_bank("style").probes(strengths=("slight", "standard", "strong"))[:PROBES]
        t0 = time.perf_counter()
        rows = write_plan(ws, "requests.parquet", items, probes, RUNS, SCALE, engine.identity)
        plan_s = time.perf_counter() - t0
        assert rows == ITEMS * PROBES * RUNS
        first = pq.ParquetFile(os.path.join(tmp, "requests.parquet")).read_row_group(0, columns=["request_id"])
        assert len(set(first["request_id"].to_pylist())) == first.num_rows  # ids distinct
        return {"plan_write_s": round(plan_s, 1), "requests_per_s": round(rows / plan_s),
                "plan_file_mb": round(os.path.getsize(os.path.join(tmp, "requests.parquet")) / 2**20),
                "row_groups": PlanSource(ws=ws, name="requests.parquet").num_row_groups,
                "plan_peak_rss_mb": round(peak_rss_mb())}
    source = PlanSource(ws=ws, name="requests.parquet")
    store = PartStore(ws.child("responses"))
    if name == "commit":  # the benchmark's own set-up: answers for every planned id
        commit_all(source, store)
        return {"setup_peak_rss_mb": round(peak_rss_mb())}
    if name == "scan":
        t1 = time.perf_counter()
        index = PendingIndex.from_store(store, 3)
        scan = scan_plan(source, index, 10_000)
        resume_s = time.perf_counter() - t1
        assert scan.todo == 0 and not scan.blocks
        return {"resume_scan_s": round(resume_s, 1), "committed_ids": len(index.skip),
                "scan_peak_rss_mb": round(peak_rss_mb())}
    items = many_items(ITEMS)
    probes = load_bank("style").probes(strengths=("slight", "standard", "strong"))[:PROBES]
    return stream_through_collect(ws, items, probes, engine)


def main():
    if "--phase" in sys.argv:
        name, tmp = sys.argv[sys.argv.index("--phase") + 1], sys.argv[sys.argv.index("--phase") + 2]
        print("RESULT " + json.dumps(phase(name, tmp)))
        return
    result = {"requests": ITEMS * PROBES * RUNS, "items": ITEMS, "probes": PROBES, "runs": RUNS}
    phases = ["plan", "commit", "scan"] + (["collect"] if "--collect" in sys.argv else [])
    with tempfile.TemporaryDirectory() as tmp:
        for name in phases:
            r = subprocess.run([sys.executable, __file__, "--phase", name, tmp], capture_output=True, text=True)
            line = [ln for ln in r.stdout.splitlines() if ln.startswith("RESULT ")]
            if not line:
                sys.exit(f"phase {name} failed: {r.stderr[-2000:]}")
            result |= json.loads(line[-1][7:])
    save("plan_scale", result | {
        "peak_rss_mb": max(result["plan_peak_rss_mb"], result["scan_peak_rss_mb"]),
        "cores": os.cpu_count(),
        "targets": {"requests_per_s": ">= 100000", "peak_rss_mb": "< 2048 (planning; resume scan)",
                    "resume_scan_s": "< 30"},
    })


def stream_through_collect(ws, items, probes, engine) -> dict:
    import ray

    from judgecal.pipeline import CollectSettings, collect
    from judgecal.probes import ProbeRenderer

    ray.init(num_cpus=os.cpu_count(), include_dashboard=False, configure_logging=False, log_to_driver=False)
    store = PartStore(ws.child("streamed"))
    before = peak_rss_mb()
    stats = collect(PlanSource(ws=ws, name="requests.parquet"), ProbeRenderer(items, probes, SCALE), engine, store,
                    CollectSettings(), lambda msg: None)
    return {"collect_requests_per_s": round(stats.computed / stats.wall_s), "collect_parts": stats.parts,
            "peak_rss_mb_before_collect": round(before), "peak_rss_mb_after_collect": round(peak_rss_mb())}


if __name__ == "__main__":
    main()
