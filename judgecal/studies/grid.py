"""A study grid: several collected studies (datasets x judges, one folder each) times
variants that never re-collect (designs, representations, penalty grids).

    [grid]
    studies = ["hanna_smollm.toml", "hanna_http.toml"]   # each runs (collects) once, resumably
    [grid.vary]                                          # every combination is one variant
    "fit.representation" = ["paired", "half"]
    "design.families" = [[], ["role", "focus"]]

Each study runs whole once; then every variant is evaluated on its responses (the feature
table is rebuilt from the same store, nothing is planned or collected) and its results log is
kept as ``grid/<variant>.json`` in the study's folder. The summary is one row per (study,
variant): PRISM's held-out gain over Vanilla with its interval and n. Variants run one after
another in the driver; the large grids inside each (subsets x folds x penalties) are what
``[tune] mode`` sends to Ray Tune.
"""

from __future__ import annotations

import itertools
import json
from pathlib import Path

from judgecal.config import read_toml
from judgecal.errors import InputError, keeping_unread, set_key
from judgecal.report.sections import simulated_mark


def read_grid(path: str) -> tuple[list[str], list[list[str]]]:
    """(study configs, variants as --set lists) from a grid TOML; configs resolve beside it."""
    p = Path(path)
    if not p.is_file():
        raise InputError(path, "no such grid file")
    data = read_toml(p)
    # a misspelt table ([grids.vary]) was left unread and the grid ran the base study alone (a user's finding)
    if other := sorted(set(data) - {"grid"}):
        raise InputError(f"{path} [{other[0]}]", "unknown section: a grid file holds [grid] (studies) and [grid.vary]")
    grid = data.get("grid")
    if not isinstance(grid, dict) or not grid.get("studies"):
        raise InputError(f"{path} [grid].studies", "needed: the study configs to run")
    unknown = sorted(set(grid) - {"studies", "vary"})
    if unknown:
        raise InputError(f"{path} [grid].{unknown[0]}", "unknown field (known: studies, vary)")
    studies = [str((p.parent / s).resolve()) if not Path(s).is_absolute() else s for s in grid["studies"]]
    for i, s in enumerate(studies):
        if not Path(s).is_file():
            raise InputError(f"{path} [grid].studies", f"{s}: no such config file")
        if s in studies[:i]:
            raise InputError(f"{path} [grid].studies", f"{s} is listed twice")
    vary = grid.get("vary", {})
    for key, values in vary.items():
        if "." not in key or not isinstance(values, list) or not values:
            raise InputError(f"{path} [grid.vary].{key}", "write it as \"section.field\" = [value, ...]")
        if key.split(".")[0] in ("dataset", "pool", "engine", "study"):
            raise InputError(f"{path} [grid.vary].{key}", "a variant never re-collects: vary datasets, pools and "
                             "judges as separate studies in [grid].studies")
    keys = list(vary)
    variants = [[f"{k}={_toml(v)}" for k, v in zip(keys, combo)] for combo in itertools.product(*vary.values())]
    return studies, variants or [[]]


def _toml(v) -> str:
    return json.dumps(v)  # JSON lists, strings and numbers are TOML values too


def variant_name(sets: list[str]) -> str:
    """``["fit.representation=\"half\"", "design.attributes=[\"a\", \"b\"]"]`` ->
    ``representation-half__attributes-a+b`` (a file name)."""
    import re

    parts = []
    for item in sets:
        key, _, raw = item.partition("=")
        value = json.loads(raw)
        text = "+".join(map(str, value)) if isinstance(value, list) else str(value)
        parts.append(f"{key.split('.')[-1]}-{text or 'none'}")
    return re.sub(r"[^A-Za-z0-9._+-]+", "_", "__".join(parts)) or "base"


def prism_gain(res: dict) -> list[str]:
    """The summary cells: PRISM's gain over Vanilla on held-out groups, from the confirmation
    table when there is one (screening chose the units on the exploration groups, so the
    cross-fitted figure leans optimistic), else the cross-fitted one."""
    from judgecal.report.sections import cell_text
    from judgecal.report.table import _ci  # the table's rule: a note beside (or instead of) the interval

    for s in res.get("sections", []):
        if s["name"] == "confirmation":
            row = next((r for r in s["rows"] if r[0] == "PRISM"), None)
            cell = row[2] if row and isinstance(row[2], dict) else None
            # the groups the difference averages: confirmation groups with tied labels are left
            # out of it, and the column said 6 beside "n=4" (a second reader's finding)
            n = (cell.get("metric") or {}).get("n") if cell else None
            return [cell_text(cell) if cell else "-", "confirmation",
                    str(n if n is not None else len(s["data"]["confirmation_groups"]))]
    prism = next((m for m in res["methods"] if m["method"] == "PRISM"), None)
    cell = "-" if prism is None else _ci(prism["diff"], prism["diff_low"], prism["diff_high"], prism["groups"],
                                         prism.get("diff_note", ""))  # n beside it, as the study's own table
    return [cell, "cross-fitted", str(res["groups"] if prism is None else prism["groups"])]


def summary_lines(rows: list[list[str]]) -> list[str]:
    """The grid's summary table, and what a choice made from it costs: every variant of a study
    is scored on the same held-out groups, so the best-looking one was chosen on them (the
    table said "confirmation" under a chosen variant's figure unqualified; a second reader's finding)."""
    from judgecal.report.table import grid

    lines = grid(rows)
    studies = [r[0] for r in rows[1:]]
    several = any(studies.count(s) > 1 for s in studies)
    lines.append("groups: the n each difference averages." + (
        " Every variant of a study is scored on the same held-out groups: a variant picked from this table is "
        "picked on them, and its figure is no longer held out (leans optimistic); confirm the chosen one on groups "
        "no variant saw" if several else ""))
    return lines


def check_grid(path: str, studies: list[str], variants: list[list[str]]) -> list:
    """Every (study, variant) read and checked as its config would be, before any study runs:
    a variant the pool cannot serve, or a misspelt field, stopped the grid after the studies
    before it had run (a user's finding). Returns the studies' configs, as the run takes them."""
    from judgecal.config import load_study
    from judgecal.methods.prism import check_groups, load_items

    outputs: dict[str, str] = {}
    configs = []
    for config in studies:
        try:
            cfg = load_study(config, reads_data=True)  # as the run will: the judge's model file or vLLM there too
            items = load_items(cfg, warn=False) if cfg.method == "prism" else None  # a variant never re-collects:
        except InputError as e:  # the study's items serve every variant
            if e.where.startswith("["):  # a field found where the items load: "[dataset].target" named no study
                raise InputError(f"{config} {e.where}", e.problem) from None
            raise
        if cfg.method != "prism":
            raise InputError(f"{path} [grid].studies", f"{config} is a {cfg.method} study; a grid runs PRISM studies")
        if cfg.output in outputs:
            raise InputError(f"{path} [grid].studies", f"{config} and {outputs[cfg.output]} write to one output "
                             f"folder ({cfg.output}); give each study its own [study].output")
        outputs[cfg.output] = config
        configs.append(cfg)
        for sets in variants:
            try:
                with keeping_unread(""):  # the study's own config serves every variant (one may turn a part off)
                    # and the folds and design its groups must fill (folds = 12 on 10 groups stopped the
                    # grid after the variants before it had run: a user's finding)
                    check_groups(load_study(config, sets, runtime=False), items)
            except InputError as e:
                where = e.where
                if where.startswith("--set "):  # the variant's field, not a flag anyone typed
                    section, _, name = set_key(where[len("--set "):]).partition(".")
                    where = f"[{section}].{name}"
                raise InputError(f"{path} [grid.vary] variant {variant_name(sets)} of {Path(config).name}",
                                 f"{where}: {e.problem}") from None
    return configs


def run_grid_file(path: str, log=print) -> list[list[str]]:
    from judgecal.config import load_study
    from judgecal.methods.runner import StudyRunner

    studies, variants = read_grid(path)
    configs = check_grid(path, studies, variants)
    rows = [["study", "variant", "PRISM diff vs Vanilla [95% CI]", "table", "groups"]]
    for config, cfg in zip(studies, configs):
        runner = StudyRunner(cfg)
        log(f"[grid] {config}: run")
        runner.run_all()
        for sets in variants:
            name = variant_name(sets)
            log(f"[grid] {config}: variant {name}")
            with keeping_unread(""):  # as check_grid read it: evaluate reads the design again (a user's finding)
                v = StudyRunner(load_study(runner.ws.uri, sets, runtime=False))
                result = v.evaluate(results_name=f"grid/{name}.json")
            study = result["study"] + simulated_mark(result)
            rows.append([study, name, *prism_gain(result["results"])])
    return rows
