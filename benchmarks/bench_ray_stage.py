"""Benchmark (c): the Ray Data judge stage against the bare engine on the same prompts
(SummEval, 4 articles x 4 summaries x 17 probes = 272 prompts, prefix reuse on).
End to end, the stage's time includes starting its actor (a worker process, imports,
the model load) and committing the Parquet parts; Ray itself is started before the
clock. Steady state compares the blocks after the first one with the bare engine's time
on the same prompts. Target: at least 0.9x the bare engine's throughput."""

import glob
import os
import tempfile
import time

os.environ.setdefault("RAY_AUTH_MODE", "disabled")

import ray  # noqa: E402

from _common import SCALE, rendered, save, summeval_probe_set  # noqa: E402
from judgecal.engines import LlamaCppEngineConfig  # noqa: E402
from judgecal.pipeline import CollectSettings, PartStore, collect  # noqa: E402
from judgecal.probes import ProbeRenderer  # noqa: E402
from judgecal.workspace import Workspace  # noqa: E402


def main():
    cfg = LlamaCppEngineConfig()
    items, probes, plan = summeval_probe_set(4, 4, cfg.identity)
    prompts = rendered(items, probes, plan)

    t0 = time.perf_counter()
    eng = cfg.build()
    outs = eng.score(prompts, SCALE)
    bare = time.perf_counter() - t0
    eng.close()
    block = 17  # one item per block: the steady state starts after the first item
    bare_rest = sum(o.latency_s for o in outs[block:])

    ray.init(num_cpus=2, include_dashboard=False, configure_logging=False)
    with tempfile.TemporaryDirectory() as d:
        t0, wall0 = time.perf_counter(), time.time()
        stats = collect(plan, ProbeRenderer(items, probes, SCALE), cfg, PartStore(Workspace(d)),
                        CollectSettings(block_rows=block), log=lambda m: None)
        stage = time.perf_counter() - t0
        # when each block's part was committed: the parts' modification times (one machine)
        stamps = sorted(os.path.getmtime(p) - wall0 for p in glob.glob(os.path.join(d, "part-*")))
    ray.shutdown()
    assert stats.computed == len(prompts)
    save("ray_stage", {
        "prompts": len(prompts), "bare_engine_s": bare, "ray_stage_s": stage,
        "bare_prompts_per_s": len(prompts) / bare, "ray_prompts_per_s": len(prompts) / stage,
        "throughput_ratio": bare / stage,
        "first_block_s": stamps[0], "steady_state_ratio": bare_rest / (stamps[-1] - stamps[0]),
        "target_ratio": 0.9,
    })


if __name__ == "__main__":
    main()
