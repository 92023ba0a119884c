"""Benchmark: the pipeline's own cost. 10^6 planned requests (all 100 SummEval articles x 16
summaries x 17 style probes x 37 runs, cut to 10^6) through plan -> render -> a judge that
costs nothing (the ``null`` engine) -> commit by the workers, on this machine's cores.

Measures: requests/s end to end (plan + collect, Ray started before the clock), parts
written, the driver's peak RSS, and resume (a rerun of collect with everything committed).
Targets (issue 6): >= 50,000 requests/s, <= 100 parts, driver peak RSS < 1 GB, resume < 10 s.
Writes benchmarks/results/pipeline.json.
"""

import os
import resource
import sys
import tempfile
import time

os.environ.setdefault("RAY_AUTH_MODE", "disabled")

import ray  # noqa: E402

from _common import SCALE, save  # noqa: E402
from judgecal.datasets import load_dataset  # noqa: E402
from judgecal.engines import NullEngineConfig  # noqa: E402
from judgecal.pipeline import CollectSettings, PartStore, PlanSource, collect  # noqa: E402
from judgecal.probes import ProbeRenderer, load_bank, write_plan  # noqa: E402
from judgecal.workspace import Workspace  # noqa: E402

N = int(sys.argv[1]) if len(sys.argv) > 1 else 1_000_000


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux: KiB


def main():
    ray.init(num_cpus=os.cpu_count(), include_dashboard=False, configure_logging=False, log_to_driver=False)
    engine = NullEngineConfig()
    items = load_dataset("summeval")
    probes = load_bank("style").probes()
    runs = -(-N // (items.num_rows * len(probes)))
    quiet = lambda msg: None  # noqa: E731
    with tempfile.TemporaryDirectory() as tmp:
        store = PartStore(Workspace(os.path.join(tmp, "responses")))
        ws = Workspace(tmp)
        t0 = time.perf_counter()
        # As a study does: the plan is written in batches and the workers read it (N is whole items)
        write_plan(ws, "requests.parquet", items.slice(0, -(-N // (runs * len(probes)))), probes, runs, SCALE,
                   engine.identity)
        plan = PlanSource(ws=ws, name="requests.parquet")
        t_plan = time.perf_counter() - t0
        stats = collect(plan, ProbeRenderer(items, probes, SCALE), engine, store, CollectSettings(), quiet)
        total = time.perf_counter() - t0
        t1 = time.perf_counter()
        again = collect(plan, ProbeRenderer(items, probes, SCALE), engine, store, CollectSettings(), quiet)
        resume = time.perf_counter() - t1
        n = plan.num_rows  # whole items: N rounded up to the next item
        assert again.computed == 0 and stats.computed == n and len(store) == n
        parts = len(store.parts())
    save("pipeline", {
        "requests": n,
        "requests_per_s": round(n / total),
        "parts": parts,
        "driver_peak_rss_mb": round(peak_rss_mb()),
        "resume_s": round(resume, 2),
        "plan_s": round(t_plan, 2),
        "collect_s": round(stats.wall_s, 2),
        "cores": os.cpu_count(),
        "targets": {"requests_per_s": ">= 50000", "parts": "<= 100", "driver_peak_rss_mb": "< 1024",
                    "resume_s": "< 10"},
    })


if __name__ == "__main__":
    main()
