"""What the Ray collect costs the CPU judge (benchmark (i)'s gap, third part).

The prompts of benchmark (i) (2 SummEval articles x 16 summaries x 17 probes, parallel path)
scored four times in one run, in the order bare, Ray, Ray, bare: *bare* is the engine in this
process, an item per ``score`` call as the engine actor hands them, with Ray up and idle;
*Ray* is the real collect through the engine stage (``bench_cpu_judge.run_collect``). Both
sample llama.cpp's 512-token rate in the engine's own process before every 4th call
(``bench_cpu_judge.RooflineSampled``: a second instance of the model), so each mode's ratio
divides by the rate measured at the same moments, under the same contention, as its work.
``ray_over_bare``: the Ray collect's engine tokens per second over the bare engine's (a
paired reading of what the collect adds, the rate it is divided by set aside);
``ratio_ray_over_bare``: the same on the in-process ratios.

``cpu_seconds``: for each Ray collect, the CPU seconds each process used while it ran (read
from ``/proc`` every half second, a process's last reading kept, so an actor that exits
before the collect returns is counted), by process: the engine actor, Ray Data's own actors,
judgecal's progress board and commit workers, Ray's daemons, this driver.
``python benchmarks/check_ray_cost.py`` -> ``results/ray_cost.json`` (Linux only)."""

import dataclasses
import os
import statistics
import tempfile
import threading
import time

os.environ.setdefault("RAY_AUTH_MODE", "disabled")

import ray  # noqa: E402

import bench_cpu_judge as bench  # noqa: E402
from _common import SCALE, rendered, save, summeval_probe_set  # noqa: E402
from judgecal.engines import LlamaCppEngineConfig  # noqa: E402

ORDER = ["bare", "ray", "ray", "bare"]
TICK = os.sysconf("SC_CLK_TCK")


def process_kind(pid: int, cmd: str) -> str:
    """A process's role, from its command line."""
    if pid == os.getpid():
        return "driver (this script: Ray Data's executor, judgecal's progress)"
    if cmd.startswith("ray::"):
        name = cmd.split()[0][5:]
        return "engine actor" if "EngineActor" in name else name
    for daemon in ("raylet", "gcs_server", "dashboard/agent", "log_monitor", "runtime_env", "monitor.py"):
        if daemon in cmd:
            return daemon
    return "other (outside Ray)"


class CpuWatch:
    """CPU seconds by :func:`process_kind` between :meth:`start` and :meth:`stop`."""

    def __init__(self):
        self.first: dict[int, float] = {}
        self.last: dict[int, tuple[str, float]] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    @staticmethod
    def _read() -> dict[int, tuple[str, float]]:
        out = {}
        for pid in filter(str.isdigit, os.listdir("/proc")):
            try:
                with open(f"/proc/{pid}/stat") as f:
                    stat = f.read()
                with open(f"/proc/{pid}/cmdline") as f:
                    cmd = f.read().replace("\0", " ").strip()
            except OSError:  # ended between listdir and open
                continue
            fields = stat[stat.rfind(")") + 2:].split()
            out[int(pid)] = (cmd, (int(fields[11]) + int(fields[12])) / TICK)
        return out

    def start(self) -> "CpuWatch":
        self.first = {pid: cpu for pid, (_, cpu) in self._read().items()}
        self._t0 = time.perf_counter()
        self._thread.start()
        return self

    def _run(self) -> None:
        while not self._stop.wait(0.5):
            self.last.update(self._read())

    def stop(self) -> dict:
        self._stop.set()
        self._thread.join()
        self.last.update(self._read())
        wall = time.perf_counter() - self._t0
        by_kind: dict[str, float] = {}
        for pid, (cmd, cpu) in self.last.items():
            used = cpu - self.first.get(pid, 0.0)
            if used > 0:
                kind = process_kind(pid, cmd)
                by_kind[kind] = by_kind.get(kind, 0.0) + used
        return {"wall_s": wall, "by_process": dict(sorted(by_kind.items(), key=lambda kv: -kv[1])),
                "share_of_machine": {k: v / (wall * os.cpu_count()) for k, v in by_kind.items()}}


def bare(cfg: bench.RooflineSampled, prompts, per: int) -> dict:
    """The engine in this process, an item per call; its time the sum of the answers' latencies
    (the engine's own, as in the collect: the roofline samples are outside them)."""
    with tempfile.TemporaryDirectory() as d:
        cfg = dataclasses.replace(cfg, log=os.path.join(d, "roofline.txt"))
        eng = cfg.build()
        engine_s, computed = 0.0, 0
        for i in range(0, len(prompts), per):
            out = eng.score(prompts[i:i + per], SCALE)
            engine_s += sum(o.latency_s for o in out)
            computed += sum(o.computed_tokens for o in out)
        eng.close()
        samples = [float(x) for x in open(cfg.log).read().split()]
    roof = statistics.mean(samples)
    return {"engine_s": engine_s, "computed_tokens": computed, "judge_tok_s": computed / engine_s,
            "in_process_roofline_tok_s": roof, "in_process_samples": len(samples),
            "in_process_ratio": computed / engine_s / roof}


def main():
    plain = LlamaCppEngineConfig()
    items, probes, plan = summeval_probe_set(2, 16, plain.identity)
    prompts = rendered(items, probes, plan)
    eng = plain.build()
    tokens = [t for p in prompts[::len(probes)][:2] for t in eng.prompt_tokens(p)]
    eng.close()
    cfg = bench.RooflineSampled(roof_tokens=tuple(tokens[:bench.BATCH]))  # parallel path, the default
    ray.init(num_cpus=2, include_dashboard=False, configure_logging=False)
    runs: dict[str, list[dict]] = {"bare": [], "ray": []}
    for mode in ORDER:
        if mode == "bare":
            runs[mode].append(bare(cfg, prompts, len(probes)))
            continue
        watch = CpuWatch().start()
        res, _ = bench.run_collect(cfg, items, probes, plan)
        runs[mode].append({"engine_s": res["engine_s"], "computed_tokens": res["computed_tokens"],
                           "judge_tok_s": res["judge_tok_s"],
                           "in_process_roofline_tok_s": res["in_actor_roofline_tok_s"],
                           "in_process_samples": res["in_actor_samples"],
                           "in_process_ratio": res["in_actor_ratio"], "collect_wall_s": res["collect_wall_s"],
                           "cpu_seconds": watch.stop()})
        print(f"{mode}: {runs[mode][-1]['judge_tok_s']:.1f} tok/s", flush=True)
    ray.shutdown()
    mean = {m: {k: statistics.mean(r[k] for r in rs) for k in ("judge_tok_s", "in_process_roofline_tok_s",
                                                                "in_process_ratio")} for m, rs in runs.items()}
    save("ray_cost", {
        "prompts": len(plan), "order": ORDER, "path": "parallel", "modes": mean, "runs": runs,
        "ray_over_bare": mean["ray"]["judge_tok_s"] / mean["bare"]["judge_tok_s"],
        "roofline_ray_over_bare": mean["ray"]["in_process_roofline_tok_s"] / mean["bare"]["in_process_roofline_tok_s"],
        "ratio_ray_over_bare": mean["ray"]["in_process_ratio"] / mean["bare"]["in_process_ratio"],
        "load_average_1m": os.getloadavg()[0]})


if __name__ == "__main__":
    main()
