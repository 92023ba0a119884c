"""Benchmark (c): the Ray Data judge stage against the bare engine on the same prompts
(SummEval, 2 articles x 4 summaries x 17 probes = 136 prompts, prefix reuse on).
The stage's time includes starting its actor (and the model load) and committing
the Parquet parts; Ray itself is started before the clock. Target: at least 0.9x
the bare engine's throughput."""

import os
import tempfile
import time

os.environ.setdefault("RAY_AUTH_MODE", "disabled")

import ray  # noqa: E402

from _common import SCALE, rendered, save, summeval_probe_set  # noqa: E402
from judgecal.engines import LlamaCppEngineConfig  # noqa: E402
from judgecal.pipeline import PartStore, collect  # noqa: E402


def main():
    cfg = LlamaCppEngineConfig()
    items, probes, plan = summeval_probe_set(2, 4, cfg.identity)
    prompts = rendered(items, probes, plan)

    t0 = time.perf_counter()
    eng = cfg.build()
    eng.score(prompts, SCALE)
    bare = time.perf_counter() - t0
    eng.close()

    ray.init(num_cpus=2, include_dashboard=False, configure_logging=False)
    with tempfile.TemporaryDirectory() as d:
        t0 = time.perf_counter()
        stats = collect(items, plan, probes, cfg, PartStore(d), SCALE, block_rows=68, log=lambda m: None)
        stage = time.perf_counter() - t0
    ray.shutdown()
    assert stats.computed == len(prompts)
    save("ray_stage", {
        "prompts": len(prompts), "bare_engine_s": bare, "ray_stage_s": stage,
        "bare_prompts_per_s": len(prompts) / bare, "ray_prompts_per_s": len(prompts) / stage,
        "throughput_ratio": bare / stage, "target_ratio": 0.9,
    })


if __name__ == "__main__":
    main()
