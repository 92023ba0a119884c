"""Shared set-up of the benchmark scripts: the same SummEval prompts for every engine run."""

from __future__ import annotations

import json
import platform
import sys
import time
from pathlib import Path

from judgecal.datasets import load_dataset, subset_items
from judgecal.engines import JudgePrompt
from judgecal.pipeline.render import judge_prompts
from judgecal.probes import ProbeRenderer, build_plan, load_bank
from judgecal.scale import ScoreScale

RESULTS = Path(__file__).parent / "results"
SCALE = ScoreScale(1, 5)


def summeval_probe_set(groups: int, per_group: int, judge: str):
    """Items, the 17 style probes (baseline + 8 attributes x more/less) and their plan."""
    items = subset_items(load_dataset("summeval"), groups, per_group)
    probes = load_bank("style").probes()
    return items, probes, build_plan(items, probes, 1, SCALE, judge)


def rendered(items, probes, plan) -> list[JudgePrompt]:
    return judge_prompts(ProbeRenderer(items, probes, SCALE), plan)


def save(name: str, result: dict) -> None:
    result |= {"python": sys.version.split()[0], "machine": platform.machine(), "when": time.strftime("%Y-%m-%d %H:%M")}
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / f"{name}.json").write_text(json.dumps(result, indent=2))
    print(json.dumps(result, indent=2))
