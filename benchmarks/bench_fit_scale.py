"""Benchmark: a PRISM study of 10^6 responses through features, fit, evaluate and report.

No LLM: the set-up writes a real study folder (issue 15, item 8):
* a generic dataset of ``ceil(N / 34)`` items in groups of 16 (a CSV), and its study config
  (style bank: baseline + 8 attributes x more/less = 17 probes, 2 runs, simulated judge);
* ``study.json`` through the runner's own record, ``items.parquet`` from the dataset loader,
  the plan through :func:`judgecal.probes.write_plan` (the collect's plan writer);
* the responses as parts in ``responses/`` committed with :meth:`PartStore.write_part`
  (10,000 rows a part, as a collect with the default ``part_rows`` cuts them), each a
  simulated judge's score: the target plus a planted bias, probe shifts and noise.

Then each stage runs in its own process, as ``judgecal fit DIR``, ``judgecal evaluate DIR``
and ``judgecal report DIR`` run it (the same :class:`StudyRunner` calls; the feature table,
answered view and all, is timed on its own in each): ``features_s``, ``fit_s``,
``evaluate_s`` (after its features), ``report_s``, and each stage's peak RSS
(``getrusage``). ``peak_rss_mb`` is the largest of the stages' (the set-up that writes the
study is not the system's figure and is reported apart). Target: < 2,048 MB.

``--responses N`` sizes the study (default 1,000,000; CI runs it small). Writes
benchmarks/results/fit_scale.json (``--no-save``: print only).
"""

from __future__ import annotations

import argparse
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

RUNS, ITEMS_PER_GROUP = 2, 16
PART_ROWS = 10_000


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux: KiB


def config_text(folder: str, data: str) -> str:
    return f"""[study]
name = "fit_scale"
output = "{folder}"
seed = 0

[dataset]
name = "generic"
path = "{data}"
task = "summary"
target = ["quality"]
target_scale = "1-5"
columns = {{item_id = "id", group_id = "doc", content = "text"}}

[pool]
bank = "style"
strengths = ["standard"]
runs = {RUNS}
scale = "1-5"

[engine]
kind = "simulated"
"""


def write_dataset(path: str, n_items: int, seed: int = 0) -> None:
    rng = np.random.default_rng(seed)
    quality = np.round(rng.uniform(1, 5, n_items) * 3) / 3  # the mean of three 1-5 ratings
    words = rng.integers(20, 80, n_items)
    with open(path, "w", encoding="utf-8") as f:
        f.write("id,doc,text,quality\n")
        for k in range(n_items):
            f.write(f"item{k},doc{k // ITEMS_PER_GROUP},{' '.join(['word'] * int(words[k]))} {k},{quality[k]:.6f}\n")


def simulated_responses(plan: pa.Table, targets: dict, item_ix: dict, judge: str, seed: int = 0) -> pa.Table:
    """One response per plan row: s0 = target + 0.6 f_length + noise, a property probe
    moves it by 0.5 f_attribute, every probe adds noise; score the rounded, expected_score
    the continuous value, both clipped to 1-5. Deterministic in the item and the row."""
    from judgecal.schemas import RESPONSES

    n = plan.num_rows
    ix = np.array([item_ix[i] for i in plan["item_id"].to_pylist()], np.int64)
    rng = np.random.default_rng([seed, int(ix[0]) if n else 0])
    feats = np.random.default_rng([seed, 1]).normal(size=(max(item_ix.values()) + 1, 8))
    attrs = {a: j for j, a in enumerate(sorted(set(a for a in plan["attribute"].to_pylist() if a)))}
    attr = np.array([attrs.get(a, -1) for a in plan["attribute"].to_pylist()])
    direction = np.array([{"more": 1.0, "less": -1.0}.get(d, 0.0) for d in plan["direction"].to_pylist()])
    y = np.array([targets[i] for i in plan["item_id"].to_pylist()])
    s = y + 0.6 * feats[ix, attrs.get("length", 0)] + 0.4 * np.random.default_rng([seed, 2]).normal(
        size=len(feats))[ix]
    s = s + direction * 0.5 * feats[ix, np.maximum(attr, 0)] + 0.2 * (attr >= 0) * rng.normal(size=n)
    s = np.clip(s, 1, 5)
    tokens = rng.integers(300, 900, n).astype(np.int32)
    sha = rng.bytes(32 * n).hex()  # a sha256 hex digest a row, as the collect stores the prompt's
    return pa.Table.from_pydict({
        "request_id": plan["request_id"], "item_id": plan["item_id"], "group_id": plan["group_id"],
        "probe_id": plan["probe_id"], "run": plan["run"],
        "judge": pa.array([judge] * n, pa.string()),
        "prompt_sha": pa.array([sha[64 * k:64 * (k + 1)] for k in range(n)], pa.string()),
        "raw_text": pa.array([f"{v:.0f}" for v in np.round(s)], pa.string()),
        "score": np.round(s), "parse_status": pa.array(["ok"] * n, pa.string()), "expected_score": s,
        "prompt_tokens": tokens, "computed_tokens": tokens, "completion_tokens": np.ones(n, np.int32),
        "latency_s": np.full(n, 0.01), "attempt": np.ones(n, np.int32),
    }, schema=RESPONSES)


def setup(folder: str, responses: int) -> dict:
    """The study folder as a collect would leave it (see the module docstring)."""
    from judgecal.config import load_study
    from judgecal.methods.prism import PLAN, STORE, load_items, pool_probes, pool_runs
    from judgecal.methods.runner import StudyRunner
    from judgecal.pipeline import PartStore, PlanSource
    from judgecal.probes import write_plan

    t0 = time.perf_counter()
    os.makedirs(folder, exist_ok=True)
    probes_per_item = 17 * RUNS
    n_items = -(-responses // probes_per_item)
    data, cfg_path = os.path.join(folder, "items.csv"), os.path.join(folder, "study.toml")
    write_dataset(data, n_items)
    with open(cfg_path, "w", encoding="utf-8") as f:
        f.write(config_text(os.path.join(folder, "study"), data))
    cfg = load_study(cfg_path)
    runner = StudyRunner(cfg)
    items = load_items(cfg)
    _, probes = pool_probes(cfg)
    assert len(probes) * pool_runs(cfg) == probes_per_item, (len(probes), pool_runs(cfg))
    runner.run.begin()  # study.json, as collect records it
    ws = runner.ws
    ws.write_parquet("items.parquet", items)
    rows = write_plan(ws, PLAN, items, probes, pool_runs(cfg), cfg.scale, cfg.engine.identity,
                      temperature=cfg.pool.temperature, seed=cfg.pool.seed)
    targets = dict(zip(items["item_id"].to_pylist(), items["target"].to_pylist()))
    item_ix = {i: k for k, i in enumerate(items["item_id"].to_pylist())}
    source, store = PlanSource(ws=ws, name=PLAN), PartStore(ws.child(STORE))
    parts = 0
    for g in range(source.num_row_groups):
        group = source.row_group(g)
        for start in range(0, group.num_rows, PART_ROWS):
            part = group.slice(start, PART_ROWS)
            parts += store.write_part(simulated_responses(part, targets, item_ix, cfg.engine.identity)) is not None
    return {"responses": rows, "items": items.num_rows, "groups": len(set(items["group_id"].to_pylist())),
            "probes": len(probes), "runs": pool_runs(cfg), "parts": parts,
            "setup_s": round(time.perf_counter() - t0, 1), "setup_peak_rss_mb": round(peak_rss_mb())}


def stage(name: str, folder: str) -> dict:
    """One stage in this process, with the runner the CLI builds from the study folder."""
    from judgecal.config import load_study
    from judgecal.methods.runner import StudyRunner

    study = os.path.join(folder, "study")
    runner = StudyRunner(load_study(study, runtime=False))
    out: dict = {}
    if name in ("fit", "evaluate"):
        runner.check_identity(write=False)
        t0 = time.perf_counter()
        feats, _ = runner.method._features(runner.run)  # the answered view and the feature table
        out[f"{name}_features_s"] = round(time.perf_counter() - t0, 2)
        out["feature_rows"], out["feature_columns"] = len(feats.frame), len(feats.probe_columns)
        out[f"{name}_features_peak_rss_mb"] = round(peak_rss_mb())
    t0 = time.perf_counter()
    if name == "fit":
        models = runner.fit()
        out["gamma"] = models["PRISM"]["gamma"]
    elif name == "evaluate":
        log_ = runner.evaluate()
        methods = {m["method"]: m for m in log_["results"]["methods"]}
        out["spearman"] = {k: round(v["spearman"], 4) for k, v in methods.items()}
    else:
        runner.report()
    out[f"{name}_s"] = round(time.perf_counter() - t0, 2)
    out[f"{name}_peak_rss_mb"] = round(peak_rss_mb())
    return out


def in_process(what: str, folder: str, responses: int) -> dict:
    r = subprocess.run([sys.executable, __file__, "--phase", what, folder, "--responses", str(responses)],
                       capture_output=True, text=True)
    line = [ln for ln in r.stdout.splitlines() if ln.startswith("RESULT ")]
    if r.returncode or not line:
        sys.exit(f"phase {what} failed (exit {r.returncode}): {r.stderr[-3000:]}")
    return json.loads(line[-1][7:])


def main(argv=None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--responses", type=int, default=1_000_000)
    p.add_argument("--phase", nargs=2, metavar=("NAME", "FOLDER"), help=argparse.SUPPRESS)
    p.add_argument("--no-save", action="store_true", help="print the result, do not write results/fit_scale.json")
    p.add_argument("--keep", metavar="FOLDER", help="build the study in FOLDER and keep it")
    args = p.parse_args(argv)
    if args.phase:
        name, folder = args.phase
        print("RESULT " + json.dumps(setup(folder, args.responses) if name == "setup" else stage(name, folder)))
        return {}
    result: dict = {"load_before": round(os.getloadavg()[0], 2)}  # a shared machine: times need the load
    with tempfile.TemporaryDirectory() as tmp:
        folder = args.keep or tmp
        for what in ("setup", "fit", "evaluate", "report"):
            t0 = time.perf_counter()
            result |= in_process(what, folder, args.responses)
            print(f"{what}: {time.perf_counter() - t0:.1f} s", file=sys.stderr, flush=True)
    stages = ("fit", "evaluate", "report")
    result |= {
        "features_s": result["fit_features_s"],
        "peak_rss_mb": max(result[f"{s}_peak_rss_mb"] for s in stages),
        "cores": os.cpu_count(),
        "load_after": round(os.getloadavg()[0], 2),
        "target": {"peak_rss_mb": "< 2048 (each of fit, evaluate, report in its own process, as the CLI runs them)"},
    }
    if args.no_save:
        print(json.dumps(result, indent=2))
    else:
        sys.path.insert(0, os.path.dirname(__file__))
        from _common import save

        save("fit_scale", result)
    return result


if __name__ == "__main__":
    main()
