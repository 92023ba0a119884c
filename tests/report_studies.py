"""Small simulated studies whose reports the figure and notebook tests read, run through the
CLI on a local Ray as a user would: a PRISM pool study with every kind of PRISM section
(screening, confirmation, subsets, omission, penalty, profile) and the URW demo. Run once per
pytest session (:func:`studies`), however many test modules read them."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from conftest import ROOT, judgecal_cmd, write_config

# The pool study of tests/test_studies.py, smaller, with diagnostics: 12 HANNA prompts x 4 stories
# x (31 probes + 2 joint + 3 injected) x 2 runs = 3,456 simulated requests (about 45 s, most of it Ray's start)
SMALLER = ["dataset.max_groups=12", "dataset.max_items_per_group=4", "fit.inner_folds=2", "fit.bootstrap=100",
           "fit.fold_seeds=1", 'diagnostics.run=["reliability", "injection", "order", "resolution"]', "diagnostics.bootstrap=200"]


def _run(*args: str) -> None:
    r = subprocess.run(judgecal_cmd(*args), cwd=ROOT, capture_output=True, text=True, timeout=600,
                       env={**os.environ, "RAY_AUTH_MODE": "disabled"})
    assert r.returncode == 0, r.stderr


def prism_study(folder: Path) -> Path:
    out = folder / "prism"
    from test_studies import POOL

    _run("run", str(write_config(folder / "pool.toml", POOL.format(out=out))),
         *[a for setting in SMALLER for a in ("--set", setting)])
    return out


def urw_study(folder: Path) -> Path:
    from judgecal.config import demo_config_path

    out = folder / "urw"
    _run("run", demo_config_path("urw_demo"), "--set", 'engine.kind="simulated"', "--set", f'study.output="{out}"')
    return out


_STUDIES: dict[str, Path] = {}


def studies(tmp_path_factory) -> dict[str, Path]:
    """{method: study folder}; the folders live in the session's temporary directory."""
    if not _STUDIES:
        base = tmp_path_factory.mktemp("report_studies")
        _STUDIES.update(prism=prism_study(base), urw=urw_study(base))
    return _STUDIES
