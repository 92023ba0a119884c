"""Criteria for responses whose dataset has none: K yes/no questions per prompt, written by
an LLM through the engine layer (a prompt template, a parser, and a cache of responses keyed
like any request). Every criterion records its source: human | generated | fallback.
"""

from __future__ import annotations

import hashlib
import re
import sys

import pyarrow as pa

from judgecal.engines.base import Engine, JudgePrompt
from judgecal.pipeline.store import PartStore
from judgecal.probes.plan import request_id
from judgecal.schemas import RESPONSES, RUBRIC

SYSTEM = "You write short evaluation checklists."
USER = ("Instruction:\n{prompt}\n\nWrite {k} yes/no questions that check whether a response follows this "
        "instruction well. One question per line, numbered.")
ANSWER_PREFIX = "1. Does the response"
FALLBACK = "Does the response follow the instruction completely and correctly?"
_LINE = re.compile(r"^\s*\d+\s*[.)]\s*(.+?)\s*$")


def fingerprint(k: int) -> str:
    return hashlib.sha256(f"{SYSTEM}\x00{USER}\x00{ANSWER_PREFIX}\x00{k}".encode()).hexdigest()[:16]


def parse_criteria(text: str, k: int) -> list[str]:
    """Numbered lines of at least three words, de-duplicated, the first ``k``."""
    out: list[str] = []
    for line in (text or "").splitlines():
        m = _LINE.match(line)
        q = m.group(1) if m else ""
        if len(q.split()) >= 3 and q.lower() not in (x.lower() for x in out):
            out.append(q if q.endswith("?") else q + "?")
        if len(out) == k:
            break
    return out


def generate_criteria(engine: Engine, prompts: dict[str, str], k: int, cache: PartStore,
                      max_tokens: int = 96) -> dict[str, tuple[list[str], str]]:
    """group_id -> (criteria, source). Answers already in ``cache`` are not asked again."""
    fp = fingerprint(k)
    ids = {g: request_id(engine.identity, fp, g, hashlib.sha256(p.encode()).hexdigest()[:16], "criteria", 0, 0)
           for g, p in prompts.items()}
    have = {r["request_id"]: r["raw_text"] for r in cache.read(["request_id", "raw_text"]).to_pylist()}
    todo = [g for g in prompts if ids[g] not in have]
    if todo:
        print(f"[criteria] writing {k} criteria for {len(todo)} prompts with {engine.identity} "
              f"({len(prompts) - len(todo)} cached)", file=sys.stderr, flush=True)
        asks = [JudgePrompt(ids[g], SYSTEM, USER.format(prompt=prompts[g], k=k), ANSWER_PREFIX) for g in todo]
        outs = engine.generate(asks, max_tokens)
        rows = {n: [] for n in RESPONSES.names}
        for g, p, o in zip(todo, asks, outs):
            vals = {"request_id": p.request_id, "item_id": g, "group_id": g, "probe_id": "criteria", "run": 0,
                    "judge": engine.identity, "prompt_sha": fp, **{f: getattr(o, f) for f in RESPONSES.names[7:]}}
            for n in RESPONSES.names:
                rows[n].append(vals[n])
            have[p.request_id] = o.raw_text
        cache.write_part(pa.Table.from_pydict(rows, schema=RESPONSES))
    out = {}
    for g in prompts:
        crit = parse_criteria(have[ids[g]], k)
        out[g] = (crit, "generated") if crit else ([FALLBACK], "fallback")
    return out


def rubric_for_pairs(responses: dict[str, tuple[str, str, str]], criteria: dict[str, tuple[list[str], str]]) -> pa.Table:
    """Every response of a prompt is checked against that prompt's criteria."""
    rows = {f.name: [] for f in RUBRIC}
    for item, (group, prompt, text) in responses.items():
        crit, source = criteria[group]
        for j, c in enumerate(crit):
            for n, v in zip(RUBRIC.names, (item, group, prompt, text, f"g{j}", c, source, None)):
                rows[n].append(v)
    return pa.Table.from_pydict(rows, schema=RUBRIC)
