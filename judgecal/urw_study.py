"""A URW study over one output folder: collect -> calibrate -> evaluate -> report.

  <output>/study.json           config, verifier, template set version
  <output>/rubric.parquet       calibration + evaluation rubric rows (criteria with their source)
  <output>/pairs.parquet        evaluation pairs
  <output>/verify.parquet       request plan (response x criterion x template, + samples)
  <output>/criteria/            generated-criteria cache (keyed like any request)
  <output>/responses/           verifier answers (atomic, resumable parts)
  <output>/calibration.json     URW's calibration scores + template version (rewards load it)
  <output>/urw_results.json, urw_report.html
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

from judgecal.calibrate.urw import (
    METHODS,
    SCP,
    URW,
    BetaBinomial,
    MondrianSCP,
    SamplingEnsemble,
    TemplateVoteUniform,
    Uniform,
    URWSingleVote,
)
from judgecal.config import StudyConfig
from judgecal.errors import InputError
from judgecal.evaluate.metrics import bootstrap_mean
from judgecal.evaluate.pairwise import coverage_table, pair_outcomes, relative_improvement
from judgecal.io import write_json, write_parquet
from judgecal.pipeline import PartStore, collect
from judgecal.pipeline.collect import require_answered
from judgecal.rubrics import (
    PairSet,
    VerifierRenderer,
    build_verify_plan,
    check_disjoint,
    generate_criteria,
    load_generic_rubric,
    load_infobench,
    load_judgebench,
    load_llmbar,
    load_rmbench,
    load_template_set,
    rubric_for_pairs,
)
from judgecal.rubrics.data import LLMBAR_SUBSETS
from judgecal.rubrics.votes import soft_scores


def _log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def load_calibration(cfg: StudyConfig) -> pa.Table:
    u = cfg.urw
    if u.calibration == "infobench":
        t = load_infobench(u.calibration_path)
    elif u.calibration == "generic":
        t = load_generic_rubric(u.calibration_path, u.calibration_columns)
    else:
        raise InputError("[urw].calibration", f"unknown calibration set {u.calibration!r} (infobench, generic)")
    if t["label"].null_count:
        raise InputError("[urw].calibration", f"{t['label'].null_count} calibration criteria have no label")
    if u.calibration_max_responses is not None:
        keep = list(dict.fromkeys(t["item_id"].to_pylist()))[: u.calibration_max_responses]
        t = t.filter(pa.compute.is_in(t["item_id"], value_set=pa.array(keep)))
    return t


def load_pairs(cfg: StudyConfig) -> PairSet:
    u, merged = cfg.urw, PairSet()
    loaders = {"llmbar": lambda p: load_llmbar(p, u.llmbar_subsets or LLMBAR_SUBSETS),
               "rm-bench": load_rmbench, "judgebench": load_judgebench}
    for name in u.evaluation:
        if name not in loaders:
            raise InputError("[urw].evaluation", f"unknown pairwise set {name!r} (known: {', '.join(loaders)})")
        path = u.evaluation_paths.get(name, "bundled" if name == "llmbar" else None)
        if path is None:
            raise InputError(f"[urw].evaluation_paths.{name}", "not bundled; give its path")
        ps = loaders[name](path)
        pairs, responses = ps.tables()
        for ds in dict.fromkeys(pairs["dataset"].to_pylist()):
            rows = [r for r in pairs.to_pylist() if r["dataset"] == ds][: u.max_pairs_per_dataset]
            for r in rows:
                for i in (r["item_a"], r["item_b"]):
                    merged.responses[i] = responses[i]
                for k in merged.pairs:
                    merged.pairs[k].append(r[k])
    return merged


def _record(cfg: StudyConfig, out: Path, template_version: str) -> None:
    info = {"config": cfg.to_dict(), "method": "urw", "verifier": cfg.engine.identity,
            "template_version": template_version, "simulated_judge": cfg.engine.kind == "simulated"}
    path = out / "study.json"
    if path.exists():
        old = json.loads(path.read_text())
        for key in ("verifier", "template_version"):
            if old.get(key) != info[key]:
                raise InputError(str(path), f"this folder holds a study with another {key} ({old.get(key)}); "
                                 "use a new output folder")
    write_json(info, path)


def run_collect(cfg: StudyConfig) -> dict:
    out, u = Path(cfg.output), cfg.urw
    templates = load_template_set(u.templates_audit)
    cal = load_calibration(cfg)
    pairset = load_pairs(cfg)
    pairs, responses = pairset.tables()
    if pairs.num_rows == 0:
        raise InputError("[urw].evaluation", "no evaluation pairs")
    check_disjoint(cal, [p for _, p, _ in responses.values()], [r for _, _, r in responses.values()])
    _record(cfg, out, templates.version)
    engine = cfg.engine.build()
    try:
        prompts = {g: p for g, p, _ in responses.values()}
        criteria = generate_criteria(engine, prompts, u.criteria_per_prompt, PartStore(str(out / "criteria")))
    finally:
        engine.close()
    ev = rubric_for_pairs(responses, criteria)
    rubric = pa.concat_tables([cal, ev])
    plan = pa.concat_tables([build_verify_plan(cal, templates, cfg.engine.identity, 0),
                             build_verify_plan(ev, templates, cfg.engine.identity, u.samples, u.sample_temperature)])
    write_parquet(rubric, out / "rubric.parquet")
    write_parquet(pairs, out / "pairs.parquet")
    write_parquet(plan, out / "verify.parquet")
    src = pd.Series(ev["criterion_source"].to_pylist()).value_counts().to_dict()
    _log(f"[urw] calibration: {cal.num_rows} labelled criteria on {len(set(cal['item_id'].to_pylist()))} responses; "
         f"evaluation: {pairs.num_rows} pairs, {ev.num_rows} criteria ({src}); {plan.num_rows} verifier requests")
    stats = collect(plan, VerifierRenderer(rubric, templates), cfg.engine, PartStore(str(out / "responses")),
                    cfg.collect.block_rows, cfg.collect.num_actors)
    return stats.__dict__


def _votes(cfg: StudyConfig):
    out = Path(cfg.output)
    for name in ("rubric.parquet", "pairs.parquet", "verify.parquet"):
        if not (out / name).exists():
            raise InputError(str(out / name), "missing; run `judgecal collect` first")
    templates = load_template_set(cfg.urw.templates_audit)
    info = json.loads((out / "study.json").read_text())
    templates.check_same(info["template_version"], str(out / "study.json"))
    rubric = pq.read_table(out / "rubric.parquet")
    plan = pq.read_table(out / "verify.parquet")
    responses = PartStore(str(out / "responses")).read()
    require_answered(plan, responses, str(out / "responses"))
    votes = soft_scores(plan, responses, templates)
    meta = rubric.select(["item_id", "criterion_id", "criterion", "criterion_source", "label"]).to_pandas()
    votes = votes.merge(meta, on=["item_id", "criterion_id"], how="inner")
    votes["length"] = votes["criterion"].str.split().str.len().astype(float)
    return votes, pq.read_table(out / "pairs.parquet").to_pandas(), responses, templates


def _calibration_part(votes: pd.DataFrame, pairs: pd.DataFrame):
    ev_items = set(pairs["item_a"]) | set(pairs["item_b"])
    cal = votes[~votes["item_id"].isin(ev_items) & votes["label"].notna()]
    ev = votes[votes["item_id"].isin(ev_items)]
    return cal, ev


def run_calibrate(cfg: StudyConfig) -> dict:
    votes, pairs, _, templates = _votes(cfg)
    cal, _ = _calibration_part(votes, pairs)
    urw = URW().fit(cal["v_tmpl"], cal["label"])
    saved = {"verifier": cfg.engine.identity, "engine": cfg.to_dict()["engine"], "template_version": templates.version,
             "templates_active": list(templates.active), "n_cal": urw.n_cal_, "scores": urw.scores_.tolist()}
    write_json(saved, Path(cfg.output) / "calibration.json")
    return saved


def weighted_scores(cal: pd.DataFrame, ev: pd.DataFrame, u, n_templates: int) -> dict[str, pd.Series]:
    """Per method: score per evaluation response."""
    y = cal["label"].to_numpy(float)
    resp = ev["item_id"].to_numpy()
    fits = {
        "Uniform": (Uniform(), "v_base", {}),
        "Beta-Binomial": (BetaBinomial(n_templates), "v_tmpl", {}),
        "Sampling Ensemble": (SamplingEnsemble(), "v_samp", {}),
        "SCP": (SCP(u.alpha).fit(cal["v_tmpl"], y), "v_tmpl", {}),
        "Mondrian-SCP": (MondrianSCP(u.alpha, u.mondrian_bins).fit(cal["v_tmpl"], y, cal["length"]), "v_tmpl",
                         {"strata": ev["length"].to_numpy()}),
        "URW": (URW().fit(cal["v_tmpl"], y), "v_tmpl", {}),
        "URW†": (TemplateVoteUniform(), "v_tmpl", {}),
        "URW‡": (URWSingleVote().fit(cal["v_two"], y), "v_two", {"votes": ev["v_base"].to_numpy()}),
    }
    out = {}
    for name in METHODS:
        est, col, kw = fits[name]
        keys, scores = est.score(ev[col].to_numpy(), resp, **kw)
        out[name] = pd.Series(scores, index=keys)
    return out


def run_evaluate(cfg: StudyConfig, collect_stats: dict | None = None) -> dict:
    t0 = time.perf_counter()
    u = cfg.urw
    votes, pairs, responses, templates = _votes(cfg)
    cal, ev = _calibration_part(votes, pairs)
    scores = weighted_scores(cal, ev, u, len(templates.active))
    families = {"all": np.ones(len(pairs), bool)}
    for fam in dict.fromkeys(d.split("/")[0] for d in pairs["dataset"]):
        families[fam] = pairs["dataset"].str.split("/").str[0].to_numpy() == fam
    outcomes = {m: pair_outcomes(s.reindex(pairs["item_a"]).to_numpy(), s.reindex(pairs["item_b"]).to_numpy(),
                                 pairs["preferred"].to_numpy()) for m, s in scores.items()}
    table = []
    for m in METHODS:
        row = {"method": m}
        for fam, mask in families.items():
            acc = bootstrap_mean(outcomes[m][mask], u.bootstrap, cfg.seed)
            diff = bootstrap_mean(outcomes[m][mask] - outcomes["Uniform"][mask], u.bootstrap, cfg.seed)
            row[fam] = {"accuracy": acc.estimate, "low": acc.low, "high": acc.high, "pairs": int(mask.sum()),
                        "rel_improvement": relative_improvement(outcomes[m][mask], outcomes["Uniform"][mask]),
                        "diff": diff.estimate, "diff_low": diff.low, "diff_high": diff.high}
        table.append(row)
    status = responses["parse_status"].value_counts().to_pylist()
    summary = {
        "study": cfg.name, "method": "urw", "verifier": cfg.engine.identity,
        "simulated_judge": cfg.engine.kind == "simulated", "template_version": templates.version,
        "templates": list(templates.active), "datasets": list(families),
        "calibration_criteria": int(len(cal)), "evaluation_criteria": int(len(ev)), "pairs": int(len(pairs)),
        "criterion_sources": ev["criterion_source"].value_counts().to_dict(),
        "requests": int(responses.num_rows),
        "parse_status": {s["values"]: int(s["counts"]) for s in status},
        "prompt_tokens": int(np.sum(responses["prompt_tokens"].to_numpy())),
        "computed_tokens": int(np.sum(responses["computed_tokens"].to_numpy())),
        "results": table,
        "coverage": coverage_table(cal["v_tmpl"], cal["label"], u.coverage_alphas, seed=cfg.seed),
        "evaluate_seconds": time.perf_counter() - t0,
    }
    if collect_stats:
        summary["collect"] = collect_stats
    write_json(summary, Path(cfg.output) / "urw_results.json")
    return summary


def run_report(cfg: StudyConfig) -> Path:
    from judgecal.report.urw import write_urw_html

    path = Path(cfg.output) / "urw_results.json"
    if not path.exists():
        raise InputError(str(path), "missing; run `judgecal evaluate` first")
    return write_urw_html(json.loads(path.read_text()), Path(cfg.output) / "urw_report.html")


def run_all(cfg: StudyConfig) -> dict:
    t0 = time.perf_counter()
    stats = run_collect(cfg)
    run_calibrate(cfg)
    summary = run_evaluate(cfg, stats)
    summary["wall_seconds"] = time.perf_counter() - t0
    write_json(summary, Path(cfg.output) / "urw_results.json")
    run_report(cfg)
    return summary

