"""Benchmark: a subset study over every subset of a 16-attribute bank (2^16 - 1 non-empty
subsets), the paired representation (32 columns), 1,600 SummEval items in 100 groups,
5 outer folds, the penalty chosen by 5-fold inner grouped CV over the 13 default gammas.

Features come from the project's SIMULATED judge (planted length and hedging biases), its
answers computed in process (no collect): the plan, render and ``build_features`` a study
uses, so the columns are what a study would fit.

Measures the whole grid solved serially (one process, one BLAS thread: ``serial_s``) and as
Ray Tune trials on a local Ray of 2 CPUs, started before the clock, workers single-threaded
too (``tune_s``); ``tune_efficiency`` = serial_s / (2 tune_s), and the largest difference
between the two paths' gains (0: the same chunks through the same function).

    .venv/bin/python benchmarks/bench_subsets.py            # the full grid -> results/subsets.json
    .venv/bin/python benchmarks/bench_subsets.py --quick    # 10 attributes, printed, nothing saved
"""

import os

THREADS = {v: "1" for v in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")}
os.environ.update(THREADS)  # before numpy is imported
os.environ.setdefault("RAY_AUTH_MODE", "disabled")

import argparse  # noqa: E402
import json  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402
import pyarrow as pa  # noqa: E402

from _common import SCALE, save  # noqa: E402
from judgecal.calibrate import DEFAULT_GAMMAS  # noqa: E402
from judgecal.calibrate.features import build_features  # noqa: E402
from judgecal.datasets import load_dataset, subset_items  # noqa: E402
from judgecal.engines.simulated import SimulatedEngineConfig  # noqa: E402
from judgecal.pipeline.render import judge_prompts  # noqa: E402
from judgecal.probes import ProbeRenderer, build_plan, load_bank  # noqa: E402
from judgecal.studies.subsets import chunks, enumerate_subsets, prepare, run_local  # noqa: E402

BIASES = {"length": 0.8, "hedging": 0.3}


def simulated_features(n_attrs: int, groups: int = 100, per_group: int = 16):
    """(s0, D, y, groups, unit_columns, attributes): the simulated judge's answers to the
    baseline and more/less probes of ``n_attrs`` attributes of the expanded bank."""
    items = subset_items(load_dataset("summeval"), groups, per_group)
    bank = load_bank("expanded")
    attrs = list(dict.fromkeys(["length", "hedging", *bank.attributes]))[:n_attrs]
    probes = bank.probes(attrs)
    cfg = SimulatedEngineConfig(biases=BIASES)
    plan = build_plan(items, probes, 1, SCALE, cfg.identity)
    prompts = judge_prompts(ProbeRenderer(items, probes, SCALE), plan, with_meta=True)
    truth = dict(zip(items["item_id"].to_pylist(), items["target"].to_pylist()))
    outs = cfg.with_truth(truth).build().score(prompts, SCALE)
    answered = plan.append_column("score", pa.array([o.score for o in outs], pa.float64())) \
        .append_column("expected_score", pa.array([o.expected_score for o in outs], pa.float64())) \
        .append_column("parse_status", pa.array([o.parse_status for o in outs]))
    f = build_features(answered, items).frame
    cols = [f"{a}:{d}" for a in attrs for d in ("more", "less")]
    return (f["baseline"].to_numpy(), f[cols].to_numpy(), f["target"].to_numpy(float), f["group_id"].to_numpy(),
            [[2 * u, 2 * u + 1] for u in range(len(attrs))], attrs)


def machine() -> dict:
    model = next((ln.split(":", 1)[1].strip() for ln in open("/proc/cpuinfo") if ln.startswith("model name")), "?")
    return {"cpu": model, "cores": os.cpu_count(), "load_avg_at_start": round(os.getloadavg()[0], 2)}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="10 attributes; print, save nothing")
    ap.add_argument("--attributes", type=int, default=None)
    args = ap.parse_args()
    n_attrs = args.attributes or (10 if args.quick else 16)
    info = machine()
    s0, D, y, groups, unit_columns, attrs = simulated_features(n_attrs)
    m = prepare(s0, D, y, groups, unit_columns, DEFAULT_GAMMAS, n_splits=5, inner_cv=5)
    work = chunks(enumerate_subsets(n_attrs))
    n_subsets = sum(len(s) for _, s in work)
    inner = len(m.inner[0])

    t0 = time.perf_counter()
    local = run_local(m, work)
    serial_s = time.perf_counter() - t0

    import ray

    from judgecal.studies.tune import run_tune

    ray.init(num_cpus=2, include_dashboard=False, configure_logging=False, log_to_driver=False,
             runtime_env={"env_vars": THREADS})
    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        tuned = run_tune(m, work, tmp, "subsets")
        tune_s = time.perf_counter() - t0
        trials = len([f for f in os.listdir(os.path.join(tmp, "subsets", "results")) if f.endswith(".npz")])
    ray.shutdown()
    diff = max(float(np.nanmax(np.abs(a["gain"] - b["gain"]))) for a, b in zip(local, tuned))
    fits = n_subsets * m.n_splits * (inner + 1) * len(m.gammas)
    best = max(range(len(work)), key=lambda i: np.nanmax(local[i]["gain"]))
    j = int(np.nanargmax(local[best]["gain"]))
    result = {
        "subsets": n_subsets,
        "attributes": attrs,
        "columns": D.shape[1],
        "items": len(y), "groups": len(np.unique(groups)),
        "outer_folds": m.n_splits, "inner_folds": inner, "gammas": len(m.gammas),
        "fits": fits,
        "chunks": len(work), "tune_trials": trials,
        "serial_s": round(serial_s, 2),
        "fits_per_s": round(fits / serial_s),
        "tune_s": round(tune_s, 2),
        "tune_cpus": 2,
        "tune_efficiency": round(serial_s / (2 * tune_s), 3),
        "max_abs_diff": diff,
        "best_subset": {"units": [attrs[u] for u in work[best][1][j]], "gain": float(local[best]["gain"][j])},
        "features": f"SIMULATED judge (biases {BIASES}), answers computed in process, build_features",
        "machine_info": info,
    }
    if args.quick:
        print(json.dumps(result, indent=2))
    else:
        save("subsets", result)


if __name__ == "__main__":
    main()
