"""``judgecal compare LOG...``: several studies' correction profiles side by side (several
judges on one task, or one judge on two tasks), aligned by probe column."""

from __future__ import annotations

import json
from pathlib import Path

from judgecal.errors import InputError
from judgecal.report.table import grid
from judgecal.studies.study import sign_held_text

PROFILE = "profile"


def read_log(target: str) -> dict:
    """A results log: the file itself, or a study's folder / URI (its ``results.json``). A log
    inside a study folder (its results.json, or a grid variant's under ``grid/``) evaluated on
    an earlier collect of that folder is refused, as ``report`` refuses it: compare laid the
    old labels' profile beside the others without a word (a second reader's finding)."""
    from judgecal.config import STUDY_FILE
    from judgecal.methods.runner import check_log_current
    from judgecal.workspace import Workspace

    p = Path(target)
    if p.is_file():
        try:
            log = json.loads(p.read_text(encoding="utf-8"))
        except (json.JSONDecodeError, UnicodeDecodeError) as e:
            raise InputError(target, f"is not a results log (JSON: {e})") from None
        folder = p.parent if (p.parent / STUDY_FILE).is_file() else p.parent.parent if p.parent.name == "grid" \
            else None  # a study's own log, or a grid variant's under its grid/ (a study may be named grid)
        if isinstance(log, dict) and folder is not None and (folder / STUDY_FILE).is_file():
            check_log_current(Workspace(str(folder)), log, target)
        return log
    ws = Workspace(target)
    if not ws.exists("results.json") and ws.exists("urw_results.json"):
        raise InputError(target, "a URW study (urw_results.json); compare reads PRISM correction profiles")
    ws.require("results.json", "not a PRISM study folder that has been evaluated")
    log = ws.read_json("results.json")
    if ws.exists(STUDY_FILE):
        check_log_current(ws, log, ws.join("results.json"))
    return log


def _profile(log: dict, where: str) -> dict:
    for s in log.get("results", {}).get("sections", []):
        if s.get("name") == PROFILE:
            return s["data"]
    raise InputError(where, "holds no correction profile (a PRISM results log from `judgecal evaluate` with a "
                     "paired or half representation)")


def _data(log: dict) -> str:
    d = log.get("spec", {}).get("config", {}).get("dataset", {})
    # a generic dataset is its file: two studies of "dataset generic" were told apart by nothing (a user's finding)
    path = f" ({d['path']})" if d.get("name") == "generic" and d.get("path") else ""
    # the target too: profiles fitted to other labels of one file read as one study (a user's finding)
    target = d.get("target") or []
    said = target[0] if len(target) == 1 else f"mean({', '.join(target)})" if target else ""
    return (f"dataset {d.get('name', '?')}{path}" + (f", task {d['task']}" if d.get("task") else "")
            + (f", target {said}" if said else ""))


def compare_profiles(targets: list[str]) -> str:
    if len(targets) < 2:
        raise InputError("compare", "give two or more results logs or study folders")
    logs = [(t, read_log(t)) for t in targets]
    seen: dict[str, str] = {}
    for t, log in logs:  # a study against itself (its folder and its results.json) compares nothing
        key = json.dumps(log, sort_keys=True, default=str)
        if key in seen:
            raise InputError("compare", f"{t} is the same results log as {seen[key]}; give other studies")
        seen[key] = t
    profiles = [(t, log, _profile(log, t)) for t, log in logs]
    names = [f"{log.get('study', '?')} ({log['results'].get('judge', '?')})" for _, log, _ in profiles]
    if len(set(names)) < len(names):  # a grid variant beside its study: tell the columns apart by what was given
        names = [f"{n} [{t}]" if names.count(n) > 1 else n for n, t in zip(names, targets)]
    columns = list(dict.fromkeys(c for _, _, p in profiles for c in p["columns"]))
    rows = [["column", *names]]
    for c in columns:
        cells = []
        for _, _, p in profiles:
            if c in p["columns"]:
                j = p["columns"].index(c)
                cells.append(f"{p['mean'][j]:+.3f} ({sign_held_text(p['sign_held'][j], p['folds'])})")
            else:
                cells.append("-")
        rows.append([c, *cells])
    sim = [n for n, (_, log, _) in zip(names, profiles) if log.get("simulated_judge")]
    foot = ["cells: mean normalised coefficient over the outer folds (folds whose sign agreed with the mean / folds); "
            "'-': the study did not fit that column",
            # shares are normalised within each study: over other pools they are not on one footing
            "each study's shares are normalised over its own columns: " + "; ".join(
                f"{n}: {_data(log)}, {len(p['columns'])} columns" for n, (_, log, p) in zip(names, profiles))]
    if sim:
        foot.append(f"SIMULATED judge: {', '.join(sim)}")
    return "\n".join(grid(rows) + [""] + foot)
