"""A PRISM study's stages over one output folder: collect -> fit -> evaluate -> report.

Each stage reads the tables the previous one wrote (schemas in :mod:`judgecal.schemas`):

  <output>/study.json        the config and target definition this study ran with
  <output>/items.parquet     items table
  <output>/requests.parquet  request plan
  <output>/responses/        response parts (atomic, resumable)
  <output>/features.parquet  wide PRISM table
  <output>/models.json       PRISM / alpha-PRISM fitted on every item (coefficients)
  <output>/predictions.parquet, results.json   held-out evaluation
  <output>/report.html
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from judgecal.calibrate import PRISM, build_features
from judgecal.config import StudyConfig
from judgecal.datasets import SCALES, TargetSpec, load_dataset, load_generic, subset_items
from judgecal.errors import InputError
from judgecal.evaluate import evaluate_prism
from judgecal.io import write_json, write_parquet
from judgecal.pipeline import PartStore, collect
from judgecal.pipeline.collect import require_answered
from judgecal.probes import ProbeRenderer, build_plan, load_bank


def _log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def target_spec(cfg: StudyConfig) -> TargetSpec:
    d = cfg.dataset
    if d.target_scale is not None:
        lo, hi = (float(x) for x in d.target_scale.split("-"))
    elif d.name in SCALES:
        lo, hi = SCALES[d.name]
    else:
        raise InputError("[dataset].target_scale", "needed for a generic dataset (e.g. \"1-5\")")
    default = ("relevance",) if d.name == "summeval" else ("overall",)
    return TargetSpec(tuple(d.target or default), lo, hi)


def load_items(cfg: StudyConfig) -> pa.Table:
    d, target = cfg.dataset, target_spec(cfg)
    if d.name == "generic":
        items = load_generic(d.path, d.columns, target, d.task)
    else:
        items = load_dataset(d.name, d.path, target)
    return subset_items(items, d.max_groups, d.max_items_per_group)


def _check_scale(cfg: StudyConfig, target: TargetSpec) -> None:
    s = cfg.scale
    if (float(s.lo), float(s.hi)) != (target.scale_min, target.scale_max):
        raise InputError(
            "[probes].scale",
            f"judge scale {s} does not match the target scale {target.scale_min:g}-{target.scale_max:g} "
            f"of {target.describe()}",
        )


def _probes(cfg: StudyConfig):
    bank = load_bank(cfg.probes.bank)
    attrs = list(cfg.probes.attributes) if cfg.probes.attributes is not None else list(bank.attributes)
    return bank, attrs, bank.probes(attrs, cfg.probes.strengths)


def _record_study(cfg: StudyConfig, out: Path) -> None:
    """study.json pins what the folder holds; a different judge, bank or target is refused."""
    target = target_spec(cfg)
    info = {"config": cfg.to_dict(), "target": target.to_dict(), "target_description": target.describe(),
            "judge": cfg.engine.identity, "simulated_judge": cfg.engine.kind == "simulated"}
    path = out / "study.json"
    if path.exists():
        old = json.loads(path.read_text())
        for key in ("judge", "target"):
            if old.get(key) != info[key]:
                raise InputError(str(path), f"this folder holds a study with another {key} ({old.get(key)}); "
                                 "use a new output folder")
    write_json(info, path)


def run_collect(cfg: StudyConfig) -> dict:
    out = Path(cfg.output)
    target = target_spec(cfg)
    _check_scale(cfg, target)
    items = load_items(cfg)
    _, attrs, probes = _probes(cfg)
    plan = build_plan(items, probes, cfg.probes.runs, cfg.scale, cfg.engine.identity)
    _record_study(cfg, out)
    write_parquet(items, out / "items.parquet")
    write_parquet(plan, out / "requests.parquet")
    _log(f"[collect] {items.num_rows} items in {len(set(items['group_id'].to_pylist()))} groups x "
         f"{len(probes)} probes x {cfg.probes.runs} runs; target {target.describe()}")
    stats = collect(plan, ProbeRenderer(items, probes, cfg.scale), cfg.engine, PartStore(str(out / "responses")),
                    cfg.collect.block_rows, cfg.collect.num_actors)
    return stats.__dict__


def _features(cfg: StudyConfig):
    out = Path(cfg.output)
    for name in ("items.parquet", "requests.parquet"):
        if not (out / name).exists():
            raise InputError(str(out / name), "missing; run `judgecal collect` first")
    items = pq.read_table(out / "items.parquet")
    plan = pq.read_table(out / "requests.parquet")
    responses = PartStore(str(out / "responses")).read()
    require_answered(plan, responses, str(out / "responses"))
    _, attrs, _ = _probes(cfg)
    feats = build_features(responses, items, attrs, cfg.probes.strengths[0], cfg.fit.score_field)
    write_parquet(pa.Table.from_pandas(feats.frame.reset_index()), out / "features.parquet")
    return feats, responses


def run_fit(cfg: StudyConfig) -> dict:
    """Fit PRISM and alpha-PRISM on every item (the models a user applies to new items)."""
    feats, _ = _features(cfg)
    f = feats.frame
    models = {}
    for name, lb in (("PRISM", False), ("alpha-PRISM", True)):
        m = PRISM(gammas=cfg.fit.gammas, learn_baseline=lb, representation=cfg.fit.representation,
                  cv=cfg.fit.inner_folds).fit(feats.X, f["target"].to_numpy(), f["group_id"].to_numpy())
        models[name] = {"gamma": m.gamma_, "alpha": m.alpha_, "intercept": m.intercept_,
                        "coef": dict(zip(m.design_names_, m.coef_.tolist())), "penalty_scale": m.penalty_scale_}
    write_json(models, Path(cfg.output) / "models.json")
    return models


def run_evaluate(cfg: StudyConfig, collect_stats: dict | None = None) -> dict:
    out = Path(cfg.output)
    t0 = time.perf_counter()
    feats, responses = _features(cfg)
    results, preds = evaluate_prism(feats, cfg.fit.gammas, cfg.fit.representation, cfg.fit.folds,
                                    cfg.fit.inner_folds, cfg.fit.bootstrap, cfg.seed)
    f = feats.frame
    pred_df = pd.DataFrame({"item_id": f.index, "group_id": f["group_id"].to_numpy(), "target": f["target"].to_numpy(),
                            **{k: v for k, v in preds.items()}})
    write_parquet(pa.Table.from_pandas(pred_df, preserve_index=False), out / "predictions.parquet")
    status = responses["parse_status"].value_counts().to_pylist()
    summary = {
        "study": cfg.name,
        "judge": cfg.engine.identity,
        "simulated_judge": cfg.engine.kind == "simulated",
        "target": target_spec(cfg).describe(),
        "items": int(len(f)),
        "groups": int(f["group_id"].nunique()),
        "attributes": feats.attributes,
        "dropped_items": feats.dropped_items,
        "filled_deltas": feats.filled_deltas,
        "requests": int(responses.num_rows),
        "parse_status": {s["values"]: int(s["counts"]) for s in status},
        "prompt_tokens": int(np.sum(responses["prompt_tokens"].to_numpy())),
        "computed_tokens": int(np.sum(responses["computed_tokens"].to_numpy())),
        "judge_seconds": float(np.sum(responses["latency_s"].to_numpy())),
        "results": [r.to_dict() for r in results],
        "evaluate_seconds": time.perf_counter() - t0,
    }
    if collect_stats:
        summary["collect"] = collect_stats
    write_json(summary, out / "results.json")
    return summary


def run_report(cfg: StudyConfig) -> Path:
    from judgecal.report import write_html

    path = Path(cfg.output) / "results.json"
    if not path.exists():
        raise InputError(str(path), "missing; run `judgecal evaluate` first")
    return write_html(json.loads(path.read_text()), Path(cfg.output) / "report.html")


def run_all(cfg: StudyConfig) -> dict:
    t0 = time.perf_counter()
    stats = run_collect(cfg)
    run_fit(cfg)
    summary = run_evaluate(cfg, stats)
    summary["wall_seconds"] = time.perf_counter() - t0
    write_json(summary, Path(cfg.output) / "results.json")
    run_report(cfg)
    return summary
