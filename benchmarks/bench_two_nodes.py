"""Several nodes, one machine: the CPU judge (llamacpp, SmolLM2-135M) collecting the same
SummEval plan (2 articles x 8 summaries x 17 probes = 272 requests, one item per block) on

* one node with 2 CPUs, and
* two nodes with 1 CPU each (a head and a worker, both on 127.0.0.1),

each with two engine actors of 1 CPU (1 llama.cpp thread). Same total CPUs, same actors; what
differs is where the actors sit and that blocks cross between two nodes' object stores.
Each cluster is started before the clock (a blocking `ray start` per node in its own session,
every port explicit, killed by its process group afterwards: never `ray stop`); the driver
connects to it, then the clock runs over the whole collect (actor start, model load, render,
judge, commit). Steady state: rows committed after the first part over the time from the first
part to the last (part file times).

    .venv/bin/python benchmarks/bench_two_nodes.py [--latency-s 0.05]

``--latency-s`` swaps the judge for the SIMULATED one with that fixed CPU-bound cost per
request (no model), for machines where llama.cpp is too slow.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

os.environ.setdefault("RAY_AUTH_MODE", "disabled")

import ray  # noqa: E402

from _common import SCALE, save, summeval_probe_set  # noqa: E402
from judgecal.engines import LlamaCppEngineConfig, SimulatedEngineConfig  # noqa: E402
from judgecal.pipeline import CollectSettings, PartStore, collect  # noqa: E402
from judgecal.probes import ProbeRenderer  # noqa: E402
from judgecal.workspace import Workspace  # noqa: E402

RAY = str(Path(sys.executable).parent / "ray")
ACTORS, BLOCK = 2, 17


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class LocalCluster:
    """Nodes on 127.0.0.1, each a `ray start --block` in its own session."""

    def __init__(self, cpus_per_node: list[int]):
        self.env = {**os.environ, "RAY_AUTH_MODE": "disabled"}
        self.env.pop("RAY_ADDRESS", None)
        self.temp = tempfile.mkdtemp(prefix="rb", dir="/tmp")
        self.port, self.dash = free_port(), free_port()
        self.gcs = f"127.0.0.1:{self.port}"
        self.procs = []
        for i, cpus in enumerate(cpus_per_node):
            head = ["--head", "--port", str(self.port), "--ray-client-server-port", str(free_port()),
                    "--include-dashboard", "true", "--dashboard-host", "127.0.0.1", "--dashboard-port", str(self.dash)]
            ports = [x for p in ("--node-manager-port", "--object-manager-port", "--dashboard-agent-listen-port",
                                 "--dashboard-agent-grpc-port", "--runtime-env-agent-port", "--metrics-export-port")
                     for x in (p, str(free_port()))]
            temp = os.path.join(self.temp, f"n{i}")
            os.makedirs(temp)
            cmd = [RAY, "start", "--block", "--node-ip-address", "127.0.0.1", "--num-cpus", str(cpus),
                   "--object-store-memory", str(256 * 2**20), "--temp-dir", temp, "--disable-usage-stats", *ports,
                   *(head if i == 0 else ["--address", self.gcs])]
            self.procs.append(subprocess.Popen(cmd, env=self.env, start_new_session=True, stdout=subprocess.DEVNULL,
                                               stderr=subprocess.DEVNULL))
            self._wait_nodes(i + 1)

    def _wait_nodes(self, n: int, timeout: float = 240) -> None:
        from ray.util.state import list_nodes

        deadline = time.time() + timeout
        while time.time() < deadline:
            with contextlib.suppress(Exception):
                if len(list_nodes(address=f"http://127.0.0.1:{self.dash}", filters=[("state", "=", "ALIVE")],
                                  raise_on_missing_output=False)) >= n:
                    return
            time.sleep(1)
        raise RuntimeError(f"cluster did not reach {n} nodes")

    def close(self) -> None:
        for p in reversed(self.procs):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(p.pid, signal.SIGTERM)
        time.sleep(5)
        for p in self.procs:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(p.pid, signal.SIGKILL)
            with contextlib.suppress(subprocess.TimeoutExpired):
                p.wait(10)
        shutil.rmtree(self.temp, ignore_errors=True)


def engine_placement(dashboard: str) -> dict:
    """Engine actors (1 CPU each) per node, from Ray's state API (render and commit take 0 CPUs).
    The address is needed: other Ray instances may run on this machine."""
    from ray.util.state import list_actors

    with contextlib.suppress(Exception):
        actors = list_actors(address=dashboard, detail=True, limit=1000, raise_on_missing_output=False)
        nodes = Counter(a.node_id[:8] for a in actors
                        if "MapWorker" in (a.class_name or "") and (a.required_resources or {}).get("CPU", 0) >= 1)
        return dict(nodes)
    return {}


def run(cpus_per_node: list[int], engine, items, probes, plan) -> dict:
    cluster = LocalCluster(cpus_per_node)
    try:
        ray.init(address=cluster.gcs, configure_logging=False, log_to_driver=False)
        with tempfile.TemporaryDirectory() as d:
            t0 = time.perf_counter()
            stats = collect(plan, ProbeRenderer(items, probes, SCALE), engine, PartStore(Workspace(d)),
                            CollectSettings(block_rows=BLOCK, num_actors=ACTORS), log=lambda m: None)
            wall = time.perf_counter() - t0
            parts = sorted((p.stat().st_mtime, p) for p in Path(d).glob("part-*.parquet"))
            import pyarrow.parquet as pq

            first_rows = pq.read_metadata(parts[0][1]).num_rows
            steady_s = parts[-1][0] - parts[0][0]
        placement = engine_placement(f"http://127.0.0.1:{cluster.dash}")
        ray.shutdown()
    finally:
        with contextlib.suppress(Exception):
            ray.shutdown()
        cluster.close()
    assert stats.computed == plan.num_rows, stats
    return {"nodes": len(cpus_per_node), "cpus_per_node": cpus_per_node, "wall_s": round(wall, 2),
            "requests_per_s": round(stats.computed / wall, 3), "parts": stats.parts,
            "steady_requests_per_s": round((stats.computed - first_rows) / steady_s, 3) if steady_s > 0 else None,
            "engine_actors_per_node": placement}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--latency-s", type=float, default=None, help="SIMULATED judge with this CPU cost a request")
    args = ap.parse_args()
    if args.latency_s:
        engine = SimulatedEngineConfig(latency_s=args.latency_s, cpu_bound=True)
    else:
        engine = LlamaCppEngineConfig(actor_cpus=1.0)  # one llama.cpp thread per actor
    items, probes, plan = summeval_probe_set(2, 8, engine.identity)
    if args.latency_s:
        engine = engine.with_truth(dict(zip(items["item_id"].to_pylist(), items["target"].to_pylist())))
    load_before = os.getloadavg()
    one = run([2], engine, items, probes, plan)
    two = run([1, 1], engine, items, probes, plan)
    save("two_nodes", {
        "judge": engine.identity, "requests": plan.num_rows, "engine_actors": ACTORS, "block_rows": BLOCK,
        "physical_cores": os.cpu_count(), "load_average_before": [round(x, 2) for x in load_before],
        "load_average_after": [round(x, 2) for x in os.getloadavg()],
        "one_node": one, "two_nodes": two,
        "ratio_two_over_one": round(two["requests_per_s"] / one["requests_per_s"], 3),
        "steady_ratio_two_over_one": (round(two["steady_requests_per_s"] / one["steady_requests_per_s"], 3)
                                      if two["steady_requests_per_s"] and one["steady_requests_per_s"] else None),
        "note": ("Both layouts share the same 2 physical cores, so a second node adds no compute: it adds a "
                 "second raylet, object store and dashboard agent competing for those cores, and every block "
                 "rendered on one node and judged on the other crosses between the two object stores "
                 "(small here: a block is 17 prompts). Render and commit are one 0-CPU worker each, placed "
                 "by Ray on either node; the two 1-CPU engine actors land one per node on the two-node "
                 "cluster and both on the one node otherwise. One run each on a shared machine: read the "
                 "ratio, not the absolute rates."),
    })


if __name__ == "__main__":
    main()
