"""URW as a study method: criteria (generated where missing) -> verify plan -> collect ->
calibration -> every weighting method on the evaluation pairs.

Workspace artefacts: ``criteria_plan.parquet`` + ``criteria/`` (generated criteria, a
planned request set like any other), ``rubric.parquet``, ``pairs.parquet``,
``verify.parquet`` (the plan), ``responses/``, ``calibration.json`` (the fitted URW,
``URW.to_dict()``, which rewards load), ``urw_results.json`` (the log), ``urw_report.html``.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa

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
from judgecal.engines.base import GENERATE, SAMPLING, SCORE
from judgecal.errors import InputError
from judgecal.evaluate.metrics import bootstrap_mean
from judgecal.evaluate.pairwise import coverage_table, pair_outcomes, relative_improvement
from judgecal.methods.base import register
from judgecal.methods.prism import response_facts
from judgecal.methods.runner import StudyRun, log
from judgecal.rubrics import (
    CriteriaRenderer,
    PairSet,
    VerifierRenderer,
    build_criteria_plan,
    build_verify_plan,
    check_disjoint,
    criteria_from_answers,
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

PLAN, STORE = "verify.parquet", "responses"
CRITERIA_PLAN, CRITERIA_STORE = "criteria_plan.parquet", "criteria"


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
        pairs, responses = loaders[name](path).tables()
        for ds in dict.fromkeys(pairs["dataset"].to_pylist()):
            rows = [r for r in pairs.to_pylist() if r["dataset"] == ds][: u.max_pairs_per_dataset]
            for r in rows:
                for i in (r["item_a"], r["item_b"]):
                    merged.responses[i] = responses[i]
                for k in merged.pairs:
                    merged.pairs[k].append(r[k])
    return merged


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


class UrwMethod:
    name = "urw"
    results_name, report_name = "urw_results.json", "urw_report.html"

    def identity(self, cfg: StudyConfig) -> dict:
        u = cfg.urw
        return {
            "verifier": cfg.engine.identity,
            "template_version": load_template_set(u.templates_audit).version,
            "calibration": {"name": u.calibration, "path": u.calibration_path,
                            "columns": dict(u.calibration_columns)},
            "criteria_per_prompt": u.criteria_per_prompt,
            "sample_temperature": u.sample_temperature,
        }

    def plan_spec(self, cfg: StudyConfig) -> dict:
        u = cfg.urw
        return {"calibration_max_responses": u.calibration_max_responses, "evaluation": list(u.evaluation),
                "evaluation_paths": dict(u.evaluation_paths), "llmbar_subsets": u.llmbar_subsets and list(
                    u.llmbar_subsets), "max_pairs_per_dataset": u.max_pairs_per_dataset, "samples": u.samples}

    def needs(self, cfg: StudyConfig) -> set[str]:
        return {SCORE, GENERATE} | ({SAMPLING} if cfg.urw.samples else set())

    def collect(self, run: StudyRun) -> None:
        cfg, u, ws = run.cfg, run.cfg.urw, run.ws
        templates = load_template_set(u.templates_audit)
        cal = load_calibration(cfg)
        pairs, responses = load_pairs(cfg).tables()
        if pairs.num_rows == 0:
            raise InputError("[urw].evaluation", "no evaluation pairs")
        check_disjoint(cal, [p for _, p, _ in responses.values()], [r for _, _, r in responses.values()])
        prompts = {g: p for g, p, _ in responses.values()}
        cplan = build_criteria_plan(prompts, u.criteria_per_prompt, cfg.engine.identity)
        run.begin()
        ws.write_parquet(CRITERIA_PLAN, cplan)
        run.collect(CRITERIA_STORE, cplan, CriteriaRenderer(prompts, u.criteria_per_prompt))
        criteria = criteria_from_answers(run.answered(CRITERIA_STORE, CRITERIA_PLAN), prompts, u.criteria_per_prompt)
        ev = rubric_for_pairs(responses, criteria)
        rubric = pa.concat_tables([cal, ev])
        judge = cfg.engine.identity
        plan = pa.concat_tables([build_verify_plan(cal, templates, judge, 0),
                                 build_verify_plan(ev, templates, judge, u.samples, u.sample_temperature)])
        ws.write_parquet("rubric.parquet", rubric)
        ws.write_parquet("pairs.parquet", pairs)
        ws.write_parquet(PLAN, plan)
        src = pd.Series(ev["criterion_source"].to_pylist()).value_counts().to_dict()
        log(f"[urw] calibration: {cal.num_rows} labelled criteria on {len(set(cal['item_id'].to_pylist()))} "
            f"responses; evaluation: {pairs.num_rows} pairs, {ev.num_rows} criteria ({src}); "
            f"{plan.num_rows} verifier requests")
        truth = {f"{i}/{c}": lab for i, c, lab in zip(cal["item_id"].to_pylist(), cal["criterion_id"].to_pylist(),
                                                      cal["label"].to_pylist())}  # simulated verifiers only
        run.collect(STORE, plan, VerifierRenderer(rubric, templates), truth)

    def _votes(self, run: StudyRun):
        ws = run.ws
        templates = load_template_set(run.cfg.urw.templates_audit)
        ans = run.answered(STORE, PLAN)
        for name in ("rubric.parquet", "pairs.parquet"):
            ws.require(name, "run `judgecal collect` first")
        votes = soft_scores(ans, templates)
        meta = ws.read_parquet("rubric.parquet").select(
            ["item_id", "criterion_id", "criterion", "criterion_source", "label"]).to_pandas()
        votes = votes.merge(meta, on=["item_id", "criterion_id"], how="inner")
        votes["length"] = votes["criterion"].str.split().str.len().astype(float)
        pairs = ws.read_parquet("pairs.parquet").to_pandas()
        ev_items = set(pairs["item_a"]) | set(pairs["item_b"])
        cal = votes[~votes["item_id"].isin(ev_items) & votes["label"].notna()]
        ev = votes[votes["item_id"].isin(ev_items)]
        return cal, ev, pairs, ans, templates

    def fit(self, run: StudyRun) -> dict:
        cal, _, _, _, templates = self._votes(run)
        urw = URW().fit(cal["v_tmpl"], cal["label"])
        saved = {"verifier": run.cfg.engine.identity, "engine": run.cfg.to_dict()["engine"],
                 "template_version": templates.version, "templates_active": list(templates.active),
                 "urw": urw.to_dict()}
        run.ws.write_json("calibration.json", saved)
        return {"n_cal": urw.n_cal_, "calibration": run.ws.join("calibration.json")}

    def evaluate(self, run: StudyRun) -> tuple[dict, dict]:
        cfg, u = run.cfg, run.cfg.urw
        cal, ev, pairs, ans, templates = self._votes(run)
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
        section = {
            "verifier": cfg.engine.identity, "template_version": templates.version,
            "templates": list(templates.active), "datasets": list(families),
            "calibration_criteria": int(len(cal)), "evaluation_criteria": int(len(ev)), "pairs": int(len(pairs)),
            "criterion_sources": ev["criterion_source"].value_counts().to_dict(),
            "methods": table,
            "coverage": coverage_table(cal["v_tmpl"], cal["label"], u.coverage_alphas, seed=cfg.seed),
        }
        return section, response_facts(ans)

    def format_text(self, log_: dict) -> str:
        from judgecal.report.urw import format_urw_table

        return format_urw_table(log_)

    def render_html(self, log_: dict) -> str:
        from judgecal.report.urw import render_urw_html

        return render_urw_html(log_)


register(UrwMethod())
