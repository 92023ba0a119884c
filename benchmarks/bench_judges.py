"""Benchmark (j): every small judge that installs from the package registries, on the same data.

For each local judge (``judgecal/engines/local_judges.py``; one not installed is recorded as
such) and each set, the baseline prompt only (no probe), 1-5, temperature 0, through the
llama.cpp engine in this process (the engine a collect's actors run; prompts in plan order, so
a document's summaries reuse its article's prefix):

* SummEval: 50 of the 100 bundled documents drawn with seed 0, all 16 summaries of each (800
  prompts), target relevance (the demo's);
* HANNA: 30 of the 96 prompts drawn with seed 0, all 11 stories of each (330 prompts), target
  the mean of its six criteria.

Recorded per judge and set: Vanilla (the judge's expected score, ``[fit] score_field``'s
default) within-group Spearman with its 95% bootstrap-t interval over groups and n; the same
for the greedy score; the parse rate (the model's own first token is the score); computed
tokens per second of engine time (as loaded as the machine was then); the model's licence
and file size. Run one judge with ``--only NAME``; each judge's rows are saved as soon as they
are measured. ``--speed`` times the judges against each other instead, back to back on the
same 48 prompts (3 SummEval documents x 16 summaries, baseline), in the order A B B A, and
records each judge's computed tokens per second (the mean of its two runs) and the load
average around them: a ratio between judges that a shared machine's drift cannot fake."""

import argparse
import json
import os
import time
from pathlib import Path

import numpy as np

from _common import RESULTS, SCALE, save
from judgecal.datasets import load_dataset, subset_items
from judgecal.engines import LlamaCppEngineConfig
from judgecal.engines.local_judges import DEFAULT_JUDGE, LOCAL_JUDGES
from judgecal.errors import InputError
from judgecal.evaluate.metrics import bootstrap_mean, within_group
from judgecal.pipeline.render import judge_prompts
from judgecal.probes import ProbeRenderer, build_plan, load_bank

SETS = {"summeval": 50, "hanna": 30}  # documents / story prompts, drawn with seed 0
SEED = 0
CHUNK = 16  # prompts a score call: progress lines, and the engine's prefix reuse within a call


def spearman(pred, target, groups) -> dict:
    corr = within_group(pred, target, groups)
    iv = bootstrap_mean(corr.values, seed=SEED, bounds=(-1.0, 1.0))
    return {"spearman": iv.estimate, "low": iv.low, "high": iv.high, "n_groups": iv.n, "note": iv.note,
            "groups_left_out": corr.left_out}


def judge_config(name: str) -> LlamaCppEngineConfig:
    # one prompt at a time, as the README's table was measured: on SmolLM2 the parallel path
    # answers the same bit for bit, on Gemma 3's Q4_K_M not (README, the llamacpp engine)
    return LlamaCppEngineConfig(model=name, parallel_probes=False)


def measure(name: str, dataset: str, n_groups: int) -> dict:
    cfg = judge_config(name)
    items = subset_items(load_dataset(dataset), n_groups, None, seed=SEED)
    baseline = load_bank("style").probes()[:1]
    plan = build_plan(items, baseline, 1, SCALE, cfg.identity)
    prompts = judge_prompts(ProbeRenderer(items, baseline, SCALE), plan)
    t0 = time.perf_counter()
    engine = cfg.build()
    load_s = time.perf_counter() - t0
    outs, engine_s = [], 0.0
    for k in range(0, len(prompts), CHUNK):
        t = time.perf_counter()
        outs += engine.score(prompts[k:k + CHUNK], SCALE)
        engine_s += time.perf_counter() - t
        print(f"{name} {dataset}: {len(outs)}/{len(prompts)} prompts, {engine_s:.0f} s", flush=True)
    engine.close()
    target = dict(zip(items["item_id"].to_pylist(), items["target"].to_pylist()))
    group = dict(zip(items["item_id"].to_pylist(), items["group_id"].to_pylist()))
    ids = plan["item_id"].to_pylist()
    y = [target[i] for i in ids]
    g = [group[i] for i in ids]
    expected = [o.expected_score for o in outs]
    greedy = [np.nan if o.score is None else o.score for o in outs]
    computed = sum(o.computed_tokens for o in outs)
    return {
        "judge": name, "dataset": dataset, "identity": cfg.identity, "prompts": len(prompts),
        "groups": int(len(set(g))), "vanilla_expected": spearman(expected, y, g),
        "vanilla_greedy": spearman(greedy, y, g),
        "parse_ok": float(np.mean([o.parse_status == "ok" for o in outs])),
        "prompt_tokens": int(sum(o.prompt_tokens for o in outs)), "computed_tokens": int(computed),
        "engine_s": round(engine_s, 1), "computed_tok_s": round(computed / engine_s, 1), "load_s": round(load_s, 2),
    }


def speed(names: list[str]) -> dict:
    """Computed tokens per second of each judge on the same prompts, in the order A B B A."""
    rates: dict[str, list[float]] = {n: [] for n in names}
    load = [os.getloadavg()[0]]
    for name in names + names[::-1]:
        cfg = judge_config(name)
        items = subset_items(load_dataset("summeval"), 3, None, seed=SEED)
        baseline = load_bank("style").probes()[:1]
        prompts = judge_prompts(ProbeRenderer(items, baseline, SCALE), build_plan(items, baseline, 1, SCALE,
                                                                                   cfg.identity))
        engine = cfg.build()
        t = time.perf_counter()
        outs = engine.score(prompts, SCALE)
        rates[name].append(sum(o.computed_tokens for o in outs) / (time.perf_counter() - t))
        engine.close()
        load.append(os.getloadavg()[0])
    return {"prompts": 48, "order": names + names[::-1], "load_average_1m": [round(x, 2) for x in load],
            "computed_tok_s": {n: round(float(np.mean(r)), 1) for n, r in rates.items()},
            "runs_tok_s": {n: [round(x, 1) for x in r] for n, r in rates.items()}}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", choices=tuple(LOCAL_JUDGES), help="measure one judge (the others' rows are kept)")
    ap.add_argument("--speed", action="store_true", help="only time the installed judges against each other")
    args = ap.parse_args()
    path = RESULTS / "judges.json"
    old = json.loads(path.read_text()) if path.exists() else {}
    if args.speed:
        installed = [n for n, info in old.get("judges", {}).items() if "not_installed" not in info]
        save("judges", old | {"speed": speed(installed)})
        return
    rows = {(r["judge"], r["dataset"]): r for r in old.get("rows", [])}
    judges = {}
    for name, judge in LOCAL_JUDGES.items():
        info = {"licence": judge.licence, "install": judge.install, "default": name == DEFAULT_JUDGE}
        try:
            info["file_mb"] = round(Path(LlamaCppEngineConfig(model=name).gguf_path()).stat().st_size / 2**20, 1)
        except InputError as e:
            info["not_installed"] = e.problem
        judges[name] = info
        if "not_installed" in info or (args.only and args.only != name):
            continue
        for dataset, n in SETS.items():
            rows[(name, dataset)] = measure(name, dataset, n)
            save("judges", old | {"sets": {k: f"{v} groups drawn with seed {SEED}, every item of each"
                                           for k, v in SETS.items()}, "scale": "1-5", "judges": judges,
                                  "rows": list(rows.values())})


if __name__ == "__main__":
    main()
