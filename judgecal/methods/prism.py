"""PRISM as a study method: probes plan -> collect -> features -> PRISM / alpha-PRISM -> held-out table.

Workspace artefacts: ``items.parquet``, ``requests.parquet`` (the plan), ``responses/``,
``features.parquet``, ``models.json`` (fit on every item), ``predictions.parquet``,
``results.json`` (the log), ``report.html``.
"""

from __future__ import annotations

import math
import time
from dataclasses import replace

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from sklearn.base import clone

from judgecal.calibrate import PRISM, build_features
from judgecal.calibrate.features import MISSING_POLICIES, SCORE_FIELDS, on_target_scale
from judgecal.calibrate.baselines import OnColumns, RubricRidge, geval
from judgecal.calibrate.prism import REPRESENTATIONS
from judgecal.config import DiagnosticsConfig, StudyConfig, scale_range
from judgecal.datasets import (DEFAULT_TARGETS, TargetSpec, check_dataset_name, known_scale, load_dataset,
                               load_generic, subset_items)
from judgecal.datasets.loaders import USR_SCALES
from judgecal.datasets.items import check_draw, sample_line
from judgecal.datasets.layout import layout_warnings, said_warnings, sample_warnings, say_warnings, with_warnings
from judgecal.diagnostics import diagnostic_plans, plan_needs
from judgecal.diagnostics.base import own_plan_files
from judgecal.diagnostics.run import check_diagnostics, run_diagnostics
from judgecal.engines.base import SAMPLING, SCORE, EngineConfig, prompt_tokens_estimate
from judgecal.errors import InputError, unread_setting
from judgecal.evaluate import evaluate_prism
from judgecal.evaluate.prism_eval import default_estimators, one_item_per_group
from judgecal.ids import stable_hash
from judgecal.methods.base import DATA, PlanEstimate, completion_limit, data_spec, register, table_fingerprint
from judgecal.methods.runner import SETTINGS_FROM, StudyRun, check_context, log
from judgecal.pipeline import PlanSource
from judgecal.probes import ProbeRenderer, load_bank, template_for, write_plan
from judgecal.probes.bank import PROPERTY, TASK_TYPES, criterion_probes
from judgecal.probes.templates import PromptTemplate
from judgecal.scale import onto, slope
from judgecal.studies.design import held_out_count, resolve_design
from judgecal.studies.screening import MIN_GROUPS as SCREEN_MIN_GROUPS
from judgecal.studies.screening import check_screen_groups
from judgecal.studies.study import (averaged_items, confirmation_section, one_baseline, profile_section, select,
                                    subset_sections, tied_baselines)
from judgecal.studies.tune import check_tune, grid_runner

PLAN, STORE = "requests.parquet", "responses"
# The response columns the study's answered view carries: what the feature table, the
# diagnostics (diagnostics.base.long_responses) and ``response_facts`` read. The answers'
# text stays on disk (10^6 responses: benchmarks/bench_fit_scale.py).
ANSWERED_COLUMNS = ["score", "expected_score", "parse_status", "prompt_tokens", "computed_tokens",
                    "completion_tokens", "latency_s", "attempt"]


def target_spec(cfg: StudyConfig) -> TargetSpec:
    d = cfg.dataset
    check_dataset_name(d.name)  # "hana" was asked for a generic dataset's fields first (a user's finding)
    if d.target_scale is not None:
        lo, hi = scale_range(d.target_scale, "[dataset].target_scale", checked=True)
    elif (known := known_scale(d.name, d.target)) is not None:
        lo, hi = known
    elif d.name == "usr":
        ratings = ", ".join(f"{t} {lo:g}-{hi:g}" for t, (lo, hi) in USR_SCALES.items())
        if unknown := [t for t in d.target if t not in USR_SCALES]:  # "Overall" was asked for a target_scale
            raise InputError("[dataset].target", f"{unknown[0]!r} is no USR rating (known: {ratings})")
        raise InputError("[dataset].target_scale", f"needed: USR's {', '.join(d.target)} are rated on different "
                         f"scales ({ratings}); give the scale their mean is on")
    else:
        raise InputError("[dataset].target_scale", "needed for a generic dataset (e.g. \"1-5\")")
    if not d.target and d.name not in DEFAULT_TARGETS:
        raise InputError("[dataset].target", "needed for a generic dataset (the criteria to average)")
    return TargetSpec(tuple(d.target or DEFAULT_TARGETS[d.name]), lo, hi)


def scales(cfg: StudyConfig) -> tuple[tuple[float, float], tuple[float, float]]:
    """(the judge's scale, the target's), each as (lo, hi)."""
    target = target_spec(cfg)
    return (float(cfg.scale.lo), float(cfg.scale.hi)), (target.scale_min, target.scale_max)


def scale_mapping(cfg: StudyConfig) -> dict | None:
    """How the judge's scale maps onto the target's when they differ (a 1-4 target judged on
    1-5): stated in the results log and the report, None when they are the same scale."""
    judge, labels = scales(cfg)
    if judge == labels:
        return None
    (lo, _), (tlo, thi) = judge, labels
    k = slope(judge, labels)
    return {"judge": str(cfg.scale), "target": f"{tlo:g}-{thi:g}",
            "vanilla": f"Vanilla read linearly onto the target's range, t = {tlo:g} + {k:.4g} x (s - {lo:g}) (rank "
                       "correlations are the same on either scale)",
            "prism": f"PRISM and alpha-PRISM fitted on that reading (the baseline mapped, each probe's change times "
                     f"{k:.4g}; features.parquet, predictions.parquet and models.json hold it): PRISM adds its "
                     "intercept and probe weights to the mapped baseline (slope 1, the paper's model), alpha-PRISM "
                     "learns the baseline's slope too"}


def check_one_item_groups(cfg: StudyConfig, groups) -> None:
    """With one item in every group the table is over all items; the parts of a study that rank
    within groups (subset curve, screening, confirmation groups, diagnostics) are refused in one
    line, before any request, rather than run on nothing."""
    if not one_item_per_group(groups):
        return
    design = resolve_design(cfg)
    on = [(field_, what, off) for flag, field_, what, off in (
        (cfg.design.subsets, "[design].subsets", "the subset curve ranks within groups", "[design] subsets = false"),
        (design.screen, "[design].screen", "screening bootstraps over groups", "[design] screen = false"),
        (design.confirmation > 0, "[design].confirmation", "the confirmation table ranks within held-out groups",
         "[design] confirmation = 0"),
        (bool(cfg.diagnostics.run), "[diagnostics].run", "the diagnostics bootstrap over documents",
         "[diagnostics] run = []")) if flag]
    if on:  # all of them in one line: fixing one at a time met the next refusal (a user's finding)
        raise InputError(on[0][0], "every group has one item (one response per prompt), and "
                         + "; ".join(what for _, what, _ in on) + ": set " + ", ".join(off for *_, off in on))


def load_items(cfg: StudyConfig, warn: bool = True, said: list[str] | None = None) -> pa.Table:
    """The study's items: its dataset, ``max_groups`` groups sampled with ``[study] seed``.
    ``warn``: say the data's layout warnings (of the whole file, and of the sample where it is
    what counts); given ``said``, add them to it instead, for the caller to say once its own
    checks pass (a refusal is the one line)."""
    d, target = cfg.dataset, target_spec(cfg)
    warning = d.name == "generic" and (warn or said is not None)  # bundled data is laid out as it should be
    texts: list[str] = []
    if d.name == "generic":
        if d.task is None and d.template is None:
            raise InputError("[dataset].task", "needed for a generic dataset (or a [dataset].template file)")
        items = load_generic(d.path, d.columns, target, study_task(cfg), d.delimiter, d.records, d.where,
                             d.group_by)
        texts = layout_warnings(items, target) if warning else []
    else:
        items = load_dataset(d.name, d.path, target)
    if d.template and d.name != "generic":  # judged with the template file: its task names it
        items = items.set_column(items.schema.get_field_index("task"), "task",
                                 pa.array([study_task(cfg)] * items.num_rows, pa.string()))
    sample = subset_items(items, d.max_groups, d.max_items_per_group, seed=cfg.seed, draw=d.item_draw)
    if warning:
        texts += sample_warnings(sample)  # max_items_per_group = 2 makes pairs of any file's groups
    if said is not None:
        said.extend(texts)
    elif texts:
        say_warnings(texts, d.path)
    return sample


def check_source_shown(cfg: StudyConfig, items: pa.Table) -> None:
    """Refuses a generic table with no source text for any item, judged with a template that
    shows one: every prompt would ask about an empty question or article (a source column not
    mapped). Checked where work is planned (collect, show), not at later stages: a study
    collected before this check still fits and reports."""
    from judgecal.probes.templates import template_for

    d = cfg.dataset
    if d.name != "generic" or not items.num_rows or any(s.strip() for s in items.column("source").to_pylist()):
        return
    task = items.column("task")[0].as_py()
    t = template_for(task)
    if not t.shows_source() or t.source_optional:
        return
    if d.template:
        fix = "remove {{ source }} from the [dataset].template file"
    else:
        fix = "judge with a [dataset].template file without {{ source }}"
    col = d.columns.get("source")
    what = f"column {col!r} is empty in every row" if col else "no item has source text"
    raise InputError(f"{d.path}: source", f"{what} (the question, article or prompt the response answers), "
                     f"and the {'template file' if d.template else repr(task) + ' prompt template'} shows it; "
                     + ("" if col else "map the column that holds it ([dataset].columns.source), or ") + fix)


def items_sample_line(cfg: StudyConfig) -> str:
    d = cfg.dataset
    return sample_line(d.max_groups, d.max_items_per_group, cfg.seed, d.item_draw)


def items_data_spec(cfg: StudyConfig) -> dict | None:
    """The study's items (texts and targets, as collect wrote them to items.parquet) from a
    user's file, hashed: an edit after collect makes fit and evaluate refuse, never fit the
    collected copy. None for bundled data (fixed with judgecal)."""
    from judgecal.datasets.loaders import BUNDLED_PATHS

    d = cfg.dataset
    files = [] if d.path in BUNDLED_PATHS else [d.path]
    return data_spec(files, lambda: table_fingerprint(load_items(cfg, warn=False)))


DATASET_GROUPS = "the dataset has {n} (as [dataset] reads and draws it)"
FEATURE_GROUPS = "the study's answered items (after [fit].missing) are in {n}"  # evaluate counts these


def check_groups(cfg: StudyConfig, items: pa.Table, counted: str = DATASET_GROUPS, starting: bool = True) -> None:
    """Refuse, before collection, a study whose groups cannot fill its design: groups of one
    item where groups are needed, a confirmation hold-out leaving fewer groups than outer
    folds (or, where a study starts, too few for its own intervals), outer and inner folds the
    groups cannot fill. ``counted`` says whose groups ``items`` holds, ``{n}`` their count;
    ``starting``: collect, show or a grid (evaluate re-reads a folder whose split is made)."""
    check_one_item_groups(cfg, items["group_id"].to_pylist())
    n_groups = len(set(items["group_id"].to_pylist()))
    if starting and "target" in items.column_names:  # collect and show (evaluate passes the groups alone)
        check_something_to_rank(cfg, items)
    if starting:
        check_confirmation_groups(cfg, n_groups)
    explore, held = explore_groups(cfg, n_groups)
    if held > 0 and explore < cfg.fit.folds:
        raise InputError("[design].confirmation", f"holding out {n_groups - explore} of {n_groups} groups leaves "
                         f"{explore} to explore, fewer than the {cfg.fit.folds} outer folds; lower it, lower "
                         "[fit].folds or add groups")
    if held > 0:  # "the dataset has 4 groups" of a dataset of 6, 2 held out for confirmation (a user's finding)
        counted = (counted.format(n=f"{n_groups} groups") + f", {n_groups - explore} held out by [design]."
                   f"confirmation = {held:g} (lower it to fold over more), {{n}} left for the folds")
    check_folds(explore, cfg.fit.folds, cfg.fit.inner_folds, counted)


def check_something_to_rank(cfg: StudyConfig, items: pa.Table) -> None:
    """Refuse a study whose human target never varies within a group (over all items, where
    every group has one): every group is left out of a within-group correlation, and a
    correction was fitted on constant labels, its table all NaN, its report a traceback (a
    user's finding)."""
    df = items.select(["group_id", "target"]).to_pandas()
    one_each = one_item_per_group(df["group_id"].to_numpy())
    if averaged_items(df)["target"].nunique() < 2:  # no group whose target varies (one each: all items alike)
        d = cfg.dataset
        where = f"{d.path}: target" if d.name == "generic" else f"[dataset].target ({d.name})"
        scope = "every item" if one_each else f"every item of each of the {df['group_id'].nunique()} groups"
        raise InputError(where, f"{target_spec(cfg).describe()} is the same for {scope}: there is nothing to rank "
                         "(every group would be left out); check the labels and [dataset].target")


def check_confirmation_groups(cfg: StudyConfig, n_groups: int) -> None:
    """Refuse a confirmation share whose split cannot serve: too few groups held out for the
    confirmation table's intervals (every cell read "too few groups" after the whole collect:
    a user's finding at confirmation = 0.01), or too few left for the outer and inner folds
    and screening. The line gives the nearest share that serves both (searched, with the
    split's own rounding), or the groups the design needs: a fix of one half must not break
    the other (8 groups, 5 folds: "lower it", then "raise it")."""
    from judgecal.evaluate.metrics import MIN_CLUSTERS

    design = resolve_design(cfg)
    share = design.confirmation
    if share <= 0:
        return
    explore_need = max(fewest_groups(cfg.fit.folds, cfg.fit.inner_folds), SCREEN_MIN_GROUPS if design.screen else 0)
    n_held = held_out_count(share, n_groups)
    if n_held >= MIN_CLUSTERS and n_groups - n_held >= explore_need:
        return
    serving = [k / 100 for k in range(1, 100)
               if held_out_count(k / 100, n_groups) >= MIN_CLUSTERS
               and n_groups - held_out_count(k / 100, n_groups) >= explore_need]
    fix = (f"set it to {min(serving, key=lambda x: abs(x - share)):g}" if serving
           else f"add groups: {MIN_CLUSTERS} to confirm and {explore_need} to explore")
    off = "set screen = false and confirmation = 0" if design.screen else "set it to 0"
    why = (f"the confirmation table's intervals need {MIN_CLUSTERS}" if n_held < MIN_CLUSTERS else
           f"{n_groups - n_held} are left to explore and the folds{' and screening' * design.screen} need "
           f"{explore_need} ([fit] folds = {cfg.fit.folds}, inner_folds = {cfg.fit.inner_folds})")
    raise InputError("[design].confirmation", f"{share:g} holds out {n_held} of {n_groups} groups; {why} ({fix}; "
                     f"or {off} for no confirmation table)")


def explore_groups(cfg: StudyConfig, n_groups: int) -> tuple[int, float]:
    """The groups left to explore after the confirmation hold-out, and the share held out;
    refused where screening's interval over them would not hold."""
    design = resolve_design(cfg)
    held = design.confirmation
    explore = n_groups - held_out_count(held, n_groups)
    if design.screen:
        check_screen_groups(explore)
    return explore, held


def check_fit_groups(cfg: StudyConfig, items: pa.Table) -> None:
    """What ``fit`` reads of the groups (a --set may ask for more than collect checked): the
    inner folds over every answered group (it fits on all of them; fewer groups ran fewer
    folds, unsaid) and screening's exploration groups; the outer folds are evaluate's."""
    n_groups = len(set(items["group_id"].to_pylist()))
    explore_groups(cfg, n_groups)
    if n_groups < cfg.fit.inner_folds:
        raise InputError("[fit].inner_folds", FEATURE_GROUPS.format(n=f"{n_groups} group{'s' * (n_groups != 1)}")
                         + f"; inner_folds = {cfg.fit.inner_folds} needs as many; lower it")


def fewest_groups(folds: int, inner_folds: int) -> int:
    """The fewest groups whose every outer training part holds ``inner_folds`` groups."""
    n = folds
    while n - math.ceil(n / folds) < inner_folds:
        n += 1
    return n


def check_folds(n_groups: int, folds: int, inner_folds: int, counted: str = DATASET_GROUPS) -> None:
    """Refuse, before collection, a study whose groups cannot fill its outer and inner folds, in
    one line that says what would fit (a tiny study was refused for folds, then for
    inner_folds, one at a time, and with 2 groups no setting fits: a user's finding)."""
    need = fewest_groups(folds, inner_folds)
    if n_groups >= need:
        return
    least = fewest_groups(2, 2)
    fix = (f"lower [fit].folds and [fit].inner_folds (2 and 2 need {least}) or add groups" if n_groups >= least
           else f"add groups: the fewest folds, folds = 2 with inner_folds = 2, need {least}")
    raise InputError("[fit].folds" if n_groups < folds else "[fit].inner_folds",
                     counted.format(n=f"{n_groups} group{'s' * (n_groups != 1)}") + "; "
                     f"folds = {folds} with inner_folds = {inner_folds} need at least {need} (each outer training "
                     f"part holds the inner folds' groups); {fix}")


def longest_prompts(items: pa.Table, probes, scale):
    """Per item, its longest prompt (the item's head and the longest probe clause), for
    :func:`judgecal.methods.runner.check_context`: (item id, system, user, answer prefix)."""
    tail = max((PromptTemplate.clause_text(p.clause) for p in probes), key=len, default="")
    for r in items.select(["item_id", "task", "source", "content"]).to_pylist():
        t = template_for(r["task"])
        yield r["item_id"], t.system, t.render_head(r["source"], r["content"], scale) + tail, t.answer_prefix


def study_task(cfg: StudyConfig) -> str:
    """The task the study's items are judged as: a built-in template's name, or
    ``custom:<hash>`` for a template file (read, checked and registered here)."""
    from judgecal.datasets.loaders import TASKS

    if cfg.dataset.template:
        from judgecal.probes.template_file import load_template_file
        from judgecal.probes.templates import register_templates

        t = load_template_file(cfg.dataset.template)
        register_templates({t.task: t})
        return t.task
    return TASKS.get(cfg.dataset.name) or cfg.dataset.task


def pool_probes(cfg: StudyConfig):
    """The pool's bank and the probes a collect plans: properties (all that fit the task when
    none are named), the one-sided families asked for, the neutral controls, the rubric
    criteria, and what the study's diagnostics need (:func:`judgecal.diagnostics.plan_needs`)."""
    pool, needs = cfg.pool, plan_needs(cfg)
    bank = load_bank(pool.bank)
    attrs = list(pool.attributes) if pool.attributes is not None else None
    task = study_task(cfg)  # banks say which units fit summary, story, dialogue; other tasks get them all
    probes = bank.probes(attrs, pool.strengths, neutral=pool.neutral or needs.neutral, families=pool.families,
                         task=task if task in TASK_TYPES else None)
    if needs.joint_pairs:
        props = list(dict.fromkeys(p.attribute for p in probes if p.family == PROPERTY))
        k = len(props) // 2  # disjoint pairs
        if needs.joint_pairs > k and cfg.diagnostics.joint_pairs != DiagnosticsConfig.joint_pairs:
            # set by the user and cut without a word to what the pool holds (a user's finding)
            raise InputError("[diagnostics].joint_pairs", f"{needs.joint_pairs} pairs, but the pool's "
                             f"{len(props)} properties make {k} disjoint pair{'' if k == 1 else 's'}; give at most "
                             f"{k}")
        probes += bank.joint_probes(props, pool.strengths[0], needs.joint_pairs)
    if needs.injection:
        from judgecal.diagnostics.injection import injection_probes

        probes += injection_probes()
    return bank, probes + (criterion_probes(study_task(cfg)) if pool.criteria else [])


def pool_runs(cfg: StudyConfig) -> int:
    """Runs of every probe: the pool's, or more where a diagnostic needs repeats."""
    return max(cfg.pool.runs, plan_needs(cfg).runs)


def runs_text(cfg: StudyConfig) -> str:
    """``2 runs``, and why where a diagnostic raised [pool] runs (the plan doubled without a word
    beside ``runs = 1``: a user's finding)."""
    runs = pool_runs(cfg)
    return f"{runs} runs" + (f" ([pool] runs = {cfg.pool.runs}, raised: a diagnostic needs repeats)"
                             if runs > cfg.pool.runs else "")


def estimators(fc) -> dict[str, PRISM]:
    """The fitted methods of a PRISM study, each cloned per fit (a new variant is one entry)."""
    return default_estimators(fc.gammas, fc.representation, fc.inner_folds, fc.fit_intercept)


def table_methods(fc, sel, criteria: list[str]) -> tuple[dict, dict]:
    """The rows of a study's tables: fitted estimators (each reads its own columns of the one
    feature frame) and unfitted baselines ({name: frame -> prediction}), in PRISM's Table 2
    order: G-Eval, SAJA, PRISM, alpha-PRISM."""
    fitted, fixed = {}, {}
    if criteria:
        fixed["G-Eval"] = lambda frame: geval(frame, criteria)
        fitted["SAJA (rubric ridge)"] = OnColumns(RubricRidge(tuple(criteria), fc.gammas, fc.inner_folds),
                                                  ["baseline", *criteria])
    if sel.columns:  # none passed screening: the baselines alone
        fitted |= {name: OnColumns(est, ["baseline", *sel.columns]) for name, est in estimators(fc).items()}
    return fitted, fixed


class PrismMethod:
    name = "prism"
    results_name, report_name = "results.json", "report.html"
    outputs = ("features.parquet", "models.json", "predictions.parquet", results_name, report_name)
    sections = ("dataset", "pool", "design", "fit", "tune", "diagnostics")
    data_section = "dataset"
    # a new or removed item changes them too: every answer was asked anew (a user's finding)
    simulated_truth = "the sample's labels (an item added or removed changes them too)"
    data_hint = ('name = "summeval" or "hanna" (bundled), or name = "generic" with path, task and target_scale '
                 '(and target, columns as your file names them)')
    demo = "demo"
    # fit fits every item on the screened design: folds, resamples, the subset curve and the
    # diagnostics are evaluate's
    fit_ignores = ("fit.folds", "fit.bootstrap", "fit.fold_seeds", "design.subsets", "design.subsets_per_size",
                   "tune.", "diagnostics.")

    def request_sets(self, cfg: StudyConfig) -> list[tuple[str, str, str]]:
        """The probes, then each diagnostic's own plan (``[diagnostics] run`` order)."""
        own = [(p[0], *own_plan_files(p[0])[::-1]) for p in plan_needs(cfg).own_plans]
        return [("probes", PLAN, STORE), *own]

    def identity(self, cfg: StudyConfig) -> dict:
        d, target = cfg.dataset, target_spec(cfg)
        bank, _ = pool_probes(cfg)
        task = study_task(cfg)
        tmpl = template_for(task)
        return {
            "judge": cfg.engine.identity,
            "dataset": {"name": d.name, "path": d.path, "columns": dict(d.columns), "task": task,
                        **{k: v for k, v in (("delimiter", d.delimiter), ("records", d.records),
                                             ("where", dict(d.where)), ("group_by", d.group_by))
                           if v}},  # only when set: older studies match
            "target": target.to_dict(),
            "scale": str(cfg.scale),
            "bank": {"name": bank.name, "contents": bank.contents_hash()},
            "template": stable_hash(tmpl.system, tmpl.user, tmpl.answer_prefix, tmpl.version),
        }

    def plan_spec(self, cfg: StudyConfig) -> dict:
        d, p = cfg.dataset, cfg.pool
        spec = {"max_groups": d.max_groups, "max_items_per_group": d.max_items_per_group, "runs": pool_runs(cfg),
                "attributes": list(p.attributes) if p.attributes is not None else None,
                "strengths": list(p.strengths)}
        if p.families:  # only when set: studies collected before pools compare equal
            spec["families"] = list(p.families)
        if p.neutral:
            spec["neutral"] = True
        if p.criteria:
            spec["criteria"] = True
        if d.max_groups is not None:
            spec["group_sample_seed"] = cfg.seed  # which groups max_groups draws
        if d.max_items_per_group is not None and d.item_draw != "first":  # absent: first rows, as before
            spec["item_draw"] = {"draw": d.item_draw, "seed": cfg.seed}
        if p.temperature or p.seed:
            spec["sampling"] = {"temperature": p.temperature, "seed": p.seed}
        needs = plan_needs(cfg)
        if needs.neutral and not p.neutral:
            spec["neutral"] = True
        if needs.joint_pairs:
            spec["joint_pairs"] = needs.joint_pairs
        if needs.injection:
            spec["injection"] = True
        if needs.own_plans:
            spec["diagnostic_plans"] = [list(p) for p in needs.own_plans]
        data = items_data_spec(cfg)
        if data is not None:
            spec[DATA] = data
        return spec

    def check_config(self, cfg: StudyConfig, where: str) -> None:
        """Its sections: the dataset's task, the judge's scale, the fit's numbers, and a design
        that selects from the pool (one line naming the field when it cannot)."""
        from judgecal.datasets.loaders import TASKS
        from judgecal.probes.templates import TEMPLATES

        d, known = cfg.dataset, ", ".join(TEMPLATES)
        if d.template is not None:
            if d.task is not None:
                raise InputError(f"{where} [dataset].template", f"and task = {d.task!r} both name a prompt; keep one")
            study_task(cfg)  # the file read and checked: one line naming the file and slot
            if "order" in cfg.diagnostics.run:
                raise InputError(f"{where} [diagnostics].run", "the order diagnostic writes its batched and pairwise "
                                 "prompts per built-in task; with [dataset].template leave it out")
        elif d.name == "generic" and d.task is None:
            raise InputError(f"{where} [dataset].task", f"needed for a generic dataset: the prompt template to "
                             f"judge it with (known: {known})")
        if d.task is not None and d.task not in TEMPLATES:
            raise InputError(f"{where} [dataset].task", f"unknown task {d.task!r} (known: {known}; or give a "
                             "[dataset].template file)")
        if d.name != "generic" and (given := [k for k in ("columns", "delimiter", "records", "where", "group_by")
                                              if getattr(d, k)]):
            unread_setting(f"{where} [dataset].{given[0]}", f"is for a generic dataset's file (name = \"generic\"), "
                             f"not {d.name}" + (" ([dataset].name defaults to summeval)" if d.name == "summeval" else ""))
        if d.delimiter is not None and len(d.delimiter) != 1:
            raise InputError(f"{where} [dataset].delimiter", f"must be one character, not {d.delimiter!r}")
        for k, v in d.where.items():
            if not all(isinstance(x, (str, int, float, bool)) for x in (v if isinstance(v, list) else [v])) or v == []:
                raise InputError(f"{where} [dataset].where.{k}", f"must be a value or a list of values, not {v!r}")
        if d.task is not None and d.name in TASKS and d.task != TASKS[d.name]:
            raise InputError(f"{where} [dataset].task", f"{d.name} is judged as {TASKS[d.name]!r}; task is only "
                             "for a generic dataset")
        try:
            cfg.scale  # noqa: B018 - validates the scale early
        except InputError as e:
            raise InputError(f"{where} [pool].scale", e.problem) from None
        known = None if d.target_scale is None or d.name == "generic" else known_scale(d.name, d.target)
        given = None if known is None else scale_range(d.target_scale, f"{where} [dataset].target_scale",
                                                       checked=True)
        if given is not None and given != known:
            # read as given, every label was mapped onto another range and every number moved (a user's finding)
            unread_setting(f"{where} [dataset].target_scale", f"{d.name}'s labels are on {known[0]:g}-{known[1]:g}, "
                           f"not {given[0]:g}-{given[1]:g}; target_scale is for a generic dataset (or a USR rating "
                           "judgecal does not know)")  # a folder collected so stays readable (kept with a warning)
        if cfg.fit.representation not in REPRESENTATIONS:
            raise InputError(f"{where} [fit].representation", f"unknown value {cfg.fit.representation!r} (use "
                             f"{', '.join(REPRESENTATIONS)})")
        if cfg.fit.score_field not in SCORE_FIELDS:  # refused by fit before: after a whole collect (a user's finding)
            raise InputError(f"{where} [fit].score_field", f"unknown value {cfg.fit.score_field!r} (use "
                             f"{', '.join(SCORE_FIELDS)})")
        check_draw(d.item_draw, f"{where} [dataset].item_draw")
        if cfg.fit.missing not in MISSING_POLICIES:
            raise InputError(f"{where} [fit].missing", f"unknown policy {cfg.fit.missing!r} (use "
                             f"{' or '.join(MISSING_POLICIES)})")
        # its numbers (and every section's): judgecal.config.RULES; a PRISM study's one grid is the subset curve
        check_tune(cfg.tune, where, None if cfg.design.subsets else "[design].subsets = false (the subset curve is "
                   "the grid a PRISM study runs on Tune)")
        check_diagnostics(cfg, where)
        resolve_design(cfg, f"{where} [design]")

    def needs(self, cfg: StudyConfig) -> set[str]:
        return {SCORE} | ({SAMPLING} if cfg.pool.temperature > 0 else set())

    def estimate(self, cfg: StudyConfig) -> list[PlanEstimate]:
        said: list[str] = []
        items = load_items(cfg, said=said)
        check_groups(cfg, items)  # what collect would refuse, `show` refuses too
        check_source_shown(cfg, items)
        _, probes = pool_probes(cfg)
        own = diagnostic_plans(cfg, items)
        # prompts past the judge's context: collect refused them after show passed (a user's finding); a
        # judge whose model is not at hand is collect's to refuse or put together (show never needs the engine)
        if cfg.engine.kind == "llamacpp" and cfg.engine.model_here():
            check_context(cfg.engine, longest_prompts(items, probes, cfg.scale), "items")
            for dp in own:
                check_context(cfg.engine, dp.renderer.longest_prompts(), f"{dp.name} prompts")
        say_warnings(said, cfg.dataset.path)  # after the checks: a refusal is the one line
        runs, clauses = pool_runs(cfg), sum(len(PromptTemplate.clause_text(p.clause)) + len(p.inject) for p in probes)
        chars = 0
        for r in items.select(["task", "source", "content"]).to_pylist():
            t = template_for(r["task"])
            head = len(t.system) + len(t.render_head(r["source"], r["content"], cfg.scale)) + len(t.answer_prefix)
            chars += runs * (len(probes) * head + clauses)
        n = items.num_rows * len(probes) * runs
        return [PlanEstimate(*self.request_sets(cfg)[0], n, prompt_tokens_estimate(chars, n), n * completion_limit(cfg.engine),
                             f"{items.num_rows} items x {len(probes)} probes x {runs_text(cfg)}")] + [
            PlanEstimate(dp.name, dp.plan_file, dp.store, dp.table.num_rows,
                         prompt_tokens_estimate(dp.prompt_chars, dp.table.num_rows), dp.completion_tokens,
                         dp.note) for dp in own]

    def collect(self, run: StudyRun) -> None:
        cfg = run.cfg
        target = target_spec(cfg)
        said: list[str] = []
        items = load_items(cfg, said=said)
        check_groups(cfg, items)
        check_source_shown(cfg, items)
        if (mapping := scale_mapping(cfg)) is not None:  # after the data's checks: a refusal is the one line
            log(f"[{run.tag}] judge scale {mapping['judge']}, target scale {mapping['target']}: {mapping['vanilla']}")
        # simulated judges only: the target read onto the judge's scale (a 2-10 label is no score on
        # 1-5); given before the plans, whose request ids it enters (engines.simulated)
        judge, labels = scales(cfg)
        truth = {i: t if judge == labels else onto(t, labels, judge)
                 for i, t in zip(items["item_id"].to_pylist(), items["target"].to_pylist())}
        cfg = replace(cfg, engine=cfg.engine.with_truth(truth))
        _, probes = pool_probes(cfg)
        check_context(cfg.engine, longest_prompts(items, probes, cfg.scale), "items")
        own = diagnostic_plans(cfg, items)
        for dp in own:
            check_context(cfg.engine, dp.renderer.longest_prompts(), f"{dp.name} prompts")
        say_warnings(said, cfg.dataset.path)
        run.begin()
        run.write_checked_parquet("items.parquet", with_warnings(items, said))
        # written in batches and read back row group by row group: a 10^7-request plan is never
        # whole in memory (benchmarks/bench_plan_scale.py)
        write_plan(run.ws, PLAN, items, probes, pool_runs(cfg), cfg.scale, cfg.engine.identity,
                   temperature=cfg.pool.temperature, seed=cfg.pool.seed)
        plan = PlanSource(ws=run.ws, name=PLAN)
        log(f"[{run.tag}] {items.num_rows} items in {len(set(items['group_id'].to_pylist()))} groups x "
            f"{len(probes)} probes x {runs_text(cfg)}; target {target.describe()}")
        if line := items_sample_line(cfg):
            log(f"[{run.tag}] {line}")
        run.collect(STORE, plan, ProbeRenderer(items, probes, cfg.scale), truth)
        for dp in own:  # the diagnostics' own request sets, after the study's (its results come first)
            run.ws.write_parquet(dp.plan_file, dp.table)
            log(f"[{run.tag}] {dp.name}: {dp.note}")
            run.collect(dp.store, dp.table, dp.renderer, truth)

    def _features(self, run: StudyRun):
        """The feature table, built once per run (the response store is read once) and written
        once (``features.parquet``: every collected column, whatever the design)."""
        if "features" not in run.memo:
            ans = run.answered(STORE, PLAN, ANSWERED_COLUMNS)
            run.ws.require("items.parquet", "run `judgecal collect` first")
            items = run.read_checked_parquet("items.parquet")
            fc = run.cfg.fit
            feats = build_features(ans, items, fc.score_field, fc.missing, fc.max_missing)
            feats = on_target_scale(feats, *scales(run.cfg))  # fitted on the target's scale: scale_mapping
            run.ws.write_parquet("features.parquet", pa.Table.from_pandas(feats.frame.reset_index()))
            run.memo["features"] = (feats, ans)
        return run.memo["features"]

    def _selection(self, run: StudyRun):
        """The design's columns after screening on the exploration groups (once per run)."""
        if "selection" not in run.memo:
            cfg, d = run.cfg, run.cfg.design
            feats, _ = self._features(run)
            judge, target = scales(cfg)
            scale_note = "" if judge == target else f"on the target's {target[0]:g}-{target[1]:g} scale, the judge's " \
                f"changes times {slope(judge, target):.4g}; the reliability diagnostic's are on the judge's"
            run.memo["selection"] = select(feats, resolve_design(cfg), cfg.seed, d.screen_bootstrap, d.screen_rule,
                                           d.screen_threshold, scale_note)
        return run.memo["selection"]

    def fitted_settings(self, ws) -> tuple[str, dict | None]:
        try:
            models = ws.read_json("models.json") if ws.exists("models.json") else None
        except Exception:  # noqa: BLE001 - a damaged models.json is fit's to rewrite
            return "models.json", None
        fitted = [m["settings"] for m in (models.values() if isinstance(models, dict) else ())
                  if isinstance(m, dict) and isinstance(m.get("settings"), dict)]
        return "models.json", fitted[0] if fitted else None

    def fit(self, run: StudyRun) -> dict:
        """PRISM and alpha-PRISM on every item (the models a user applies to new items), on the
        design's columns that passed screening."""
        feats, _ = self._features(run)
        check_fit_groups(run.cfg, pa.table({"group_id": feats.frame["group_id"].to_numpy()}))
        sel = self._selection(run)
        f = feats.frame
        models = {}
        (lo, hi), (tlo, thi) = judge, target = scales(run.cfg)
        k = slope(judge, target)
        # what a user applying a model to new raw scores must do first (features are on the target's scale)
        # whose scores it corrects: a model of a SIMULATED judge's answers said nothing of it (a user's finding)
        inputs = {"judge": run.cfg.engine.identity, "simulated_judge": run.cfg.engine.kind == "simulated",
                  "judge_scale": [lo, hi], "target_scale": [tlo, thi], "slope": k, "reading": run.cfg.fit.score_field,
                  "apply": (f"baseline as {tlo:g} + {k:.6g} x (s - {lo:g}), each probe column (a score change) "
                            f"times {k:.6g}" if judge != target else "scores as they are (the judge's scale is the "
                            "target's)") + "; then alpha x baseline - intercept - sum of coef x design column "
                           "(the columns coef names, built from the probe columns by fit.representation)"}
        # the settings fit ran with: evaluate with others says so (a user's finding: fit --set
        # fit.representation=half, then a plain evaluate, and models.json disagreed without a word)
        fitted_with = {k: v for k, v in run.cfg.to_dict().items() if k in SETTINGS_FROM or k == "seed"}
        for name, est in (estimators(run.cfg.fit) if sel.columns else {}).items():  # none passed: nothing to fit
            m = clone(est).fit(f[["baseline", *sel.columns]], f["target"].to_numpy(), f["group_id"].to_numpy())
            models[name] = {"gamma": m.gamma_, "alpha": m.alpha_, "intercept": m.intercept_,
                            "coef": dict(zip(m.design_names_, m.coef_.tolist())), "penalty_scale": m.penalty_scale_,
                            "inputs": inputs, "settings": fitted_with}
            if m.shift_ is not None:  # taylor: the emphasis shift per attribute behind the coefficients
                attrs = [n[: -len(":more")] for n in m.design_names_ if n.endswith(":more")]
                models[name]["shift"] = dict(zip(attrs, m.shift_.tolist()))
        run.ws.write_json("models.json", models)
        return models

    def evaluate(self, run: StudyRun) -> tuple[dict, dict]:
        cfg, fc, d = run.cfg, run.cfg.fit, run.cfg.design
        feats, ans = self._features(run)
        # what collect checks, again for the folds given now (`evaluate --set fit.folds=12` stopped
        # in the cross-fit with a line naming no field: a user's finding)
        check_groups(cfg, pa.table({"group_id": feats.frame["group_id"].to_numpy()}), FEATURE_GROUPS,
                     starting=_confirmation_changed(run))
        sel = self._selection(run)
        collected = run.read_checked_parquet("items.parquet")
        # the diagnostics' own request sets collect wrote (a resolution study on its own scale plans none),
        # read before the cross-fit: one left unanswered (a study answered by hand, set by set) was
        # refused only after the whole main analysis
        own = {dp.name: run.answered(*own_plan_files(dp.name)) for dp in diagnostic_plans(cfg, collected)}
        explore = feats.select(sel.columns, sel.explore)
        fitted, fixed = table_methods(fc, sel, feats.criteria)
        # the cross-fit is most of a large evaluate: ~50 s said nothing before "[subsets]" (a user's finding)
        t0 = time.perf_counter()
        log(f"[evaluate] cross-fitting {len(fitted)} fitted rows on {len(explore.frame)} items: {fc.fold_seeds} fold "
            f"assignments x {fc.folds} folds by group, " + (f"the penalty by {fc.inner_folds}-fold inner CV over "
                                                             f"{len(fc.gammas)} values" if len(fc.gammas) > 1 else
                                                             f"the one penalty {fc.gammas[0]:g}"))
        results, preds = evaluate_prism(explore, fc.gammas, fc.representation, fc.folds, fc.inner_folds,
                                        fc.bootstrap, cfg.seed, fc.fold_seeds, fc.fit_intercept, fitted,
                                        {name: fn(explore.frame) for name, fn in fixed.items()})
        log(f"[evaluate] cross-fit in {time.perf_counter() - t0:.1f}s; then the design's sections")
        f = explore.frame
        sections = [sel.screening] if sel.screening else []
        if len(sel.confirm):
            if sel.screening is not None:  # what screening bought: the same fit on every unit
                fitted["PRISM (all units, unscreened)"] = OnColumns(estimators(fc)["PRISM"],
                                                                    ["baseline", *sel.design_columns])
            sections.append(confirmation_section(feats, sel, fc, cfg.seed, fitted, fixed))
        if d.subsets:
            sections += subset_sections(feats, sel, fc, cfg.seed, d.subsets_per_size, grid_runner(cfg.tune, run.ws, "subsets", log))
        sections.append(profile_section(feats, sel, fc, cfg.seed))
        sections += run_diagnostics(cfg, ans, lambda name: own[name] if name in own else
                                    run.answered(*own_plan_files(name)), collected)
        section = {
            "judge": cfg.engine.identity,
            "target": target_spec(cfg).describe(),
            **({"scale_mapping": m} if (m := scale_mapping(cfg)) else {}),
            "items": int(len(f)),
            "groups": int(f["group_id"].nunique()),
            **({"sample": line} if (line := items_sample_line(cfg)) else {}),
            **({"data_warnings": w} if (w := said_warnings(collected)) else {}),
            "folds": fc.folds,
            "inner_folds": fc.inner_folds,
            "fold_seeds": fc.fold_seeds,
            "unit": "items" if one_item_per_group(f["group_id"].to_numpy()) else "groups",
            "representation": fc.representation,
            "fit_intercept": fc.fit_intercept,
            "runs": pool_runs(cfg),
            "temperature": cfg.pool.temperature,
            "reading": feats.reading,
            "features": explore.probe_columns,
            "attributes": explore.attributes,
            "dropped_items": feats.dropped_items,
            "filled_deltas": feats.filled_deltas,
            "missing_scores": feats.missing,
            "vanilla_ties": tied_baselines(f),
            "vanilla_ties_of": len(averaged_items(f)),  # the items of the groups the table averages
            **({"vanilla_one_value": v} if (v := one_baseline(f)) is not None else {}),
            "other_baseline_filled": feats.other_filled,
            "design": {"columns": sel.design_columns, "fitted": sel.columns, "screened": sel.screening is not None,
                       "exploration_groups": len(sel.explore), "confirmation_groups": len(sel.confirm),
                       "split_seed": cfg.seed},
            "methods": [r.to_dict() for r in results],
            "sections": [s.to_dict() for s in sections if s is not None],
        }
        # written last, beside the results log that follows: written before the sections, an
        # evaluate stopped in them left predictions of the new settings beside the old log (a
        # user's finding)
        run.ws.write_parquet(run.memo.get("output_prefix", "") + "predictions.parquet",
                             pa.Table.from_pandas(preds, preserve_index=False))
        return section, response_facts(ans, cfg.engine)

    def format_text(self, log_: dict) -> str:
        from judgecal.report.table import format_table

        return format_table(log_)

    def render_html(self, log_: dict) -> str:
        from judgecal.report.html import render_html

        return render_html(log_)


def _confirmation_changed(run: StudyRun) -> bool:
    """Whether evaluate splits with another confirmation share than the collect recorded: then
    it is checked as collect checks it (``evaluate --set design.confirmation=0.05`` gave a table
    of "too few groups" cells where show and collect refuse it: a user's finding). The share
    collected with is not checked again: a folder collected before the check still evaluates."""
    from judgecal.config import STUDY_FILE, read_study, value_at

    saved = read_study(run.ws).get("config") if run.ws.exists(STUDY_FILE) else None
    return value_at(saved, "design.confirmation") != value_at(run.cfg.to_dict(), "design.confirmation")


def response_facts(ans: pa.Table, engine: EngineConfig) -> dict:
    """Run facts over the answered plan (the same units the results average); whether the
    engine measures the prompt tokens a prefix cache served (else computed = prompt tokens)."""
    status = ans["parse_status"].value_counts().to_pylist()
    return {
        "prefix_reuse_measured": bool(engine.measures_prefix_reuse),
        "tokens_are_words": bool(engine.counts_words),
        "requests": int(ans.num_rows),
        "parse_status": {s["values"]: int(s["counts"]) for s in status},
        "prompt_tokens": int(pc.sum(ans["prompt_tokens"]).as_py() or 0),
        "computed_tokens": int(pc.sum(ans["computed_tokens"]).as_py() or 0),
        "completion_tokens": int(pc.sum(ans["completion_tokens"]).as_py() or 0),
        "judge_seconds": float(np.sum(ans["latency_s"].to_numpy())),
        "attempts": int(pc.max(ans["attempt"]).as_py() or 1),
    }


register(PrismMethod())
