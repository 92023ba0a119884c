"""Criteria for responses whose dataset has none: K yes/no questions per prompt, written by
an LLM. Generation is a planned request set (one request per prompt, keyed like any
request) that goes through the same collect as every judge call, so it is resumable, runs on
any engine that can ``generate``, and its answers sit in their own part store. Every
criterion records its source: human | generated | fallback.
"""

from __future__ import annotations

import re

import pyarrow as pa

from judgecal.ids import stable_hash
from judgecal.pipeline.render import Rendered, RowRenderer
from judgecal.probes.plan import request_id
from judgecal.rubrics.data import criterion_ids
from judgecal.schemas import PARSE_USABLE, RUBRIC

SYSTEM = "You write short evaluation checklists."
USER = ("Instruction:\n{prompt}\n\nWrite {k} yes/no questions that check whether a response follows this "
        "instruction well. One question per line, numbered.")
ANSWER_PREFIX = "1. Does the response"
FALLBACK = "Does the response follow the instruction completely and correctly?"
MAX_TOKENS = 96
_LINE = re.compile(r"^\s*\d+\s*[.)]\s*(.+?)\s*$")
CRITERIA_PLAN = pa.schema([("request_id", pa.string()), ("item_id", pa.string()), ("group_id", pa.string()),
                           ("probe_id", pa.string()), ("run", pa.int32())])


def fingerprint(k: int) -> str:
    return stable_hash(SYSTEM, USER, ANSWER_PREFIX, k, MAX_TOKENS)


_GLUED = re.compile(re.escape(ANSWER_PREFIX) + r"(?=\s*\d+\s*[.)])")


def parse_criteria(text: str, k: int) -> list[str]:
    """Numbered lines of at least three words, de-duplicated, the first ``k``. An answer that an
    earlier judgecal stored with ``ANSWER_PREFIX`` glued before the judge's own "1. ..." (http
    and batch judges) is read without it: re-collecting is not needed."""
    out: list[str] = []
    for line in _GLUED.sub("", text or "", count=1).splitlines():
        m = _LINE.match(line)
        q = m.group(1) if m else ""
        if len(q.split()) >= 3 and q.lower() not in (x.lower() for x in out):
            out.append(q if q.endswith("?") else q + "?")
        if len(out) == k:
            break
    return out


def build_criteria_plan(prompts: dict[str, str], k: int, judge: str) -> pa.Table:
    """One generation request per prompt (group)."""
    fp = fingerprint(k)
    groups = sorted(prompts)
    ids = [request_id(judge, fp, g, stable_hash(prompts[g]), "criteria", 0, 0) for g in groups]
    return pa.Table.from_pydict({"request_id": ids, "item_id": groups, "group_id": groups,
                                 "probe_id": ["criteria"] * len(groups), "run": [0] * len(groups)},
                                schema=CRITERIA_PLAN)


class CriteriaRenderer(RowRenderer):
    def __init__(self, prompts: dict[str, str], k: int):
        self.prompts, self.k = prompts, k

    def subset(self, item_ids) -> "CriteriaRenderer":
        keep = set(item_ids.to_pylist() if hasattr(item_ids, "to_pylist") else item_ids)
        return CriteriaRenderer({g: p for g, p in self.prompts.items() if g in keep}, self.k)

    def render(self, rows: list[dict]) -> list[Rendered]:
        return [Rendered(SYSTEM, USER.format(prompt=self.prompts[r["item_id"]], k=self.k), ANSWER_PREFIX,
                         "generate", max_tokens=MAX_TOKENS) for r in rows]


def criteria_from_answers(answers: pa.Table, prompts: dict[str, str], k: int) -> dict[str, tuple[list[str], str]]:
    """group_id -> (criteria, source), from the answered criteria plan."""
    text = {r["group_id"]: r["raw_text"] for r in answers.select(["group_id", "raw_text", "parse_status"]).to_pylist()
            if r["parse_status"] in PARSE_USABLE}
    out = {}
    for g in prompts:
        crit = parse_criteria(text.get(g), k)
        out[g] = (crit, "generated") if crit else ([FALLBACK], "fallback")
    return out


def short_generation_line(generated: dict[str, tuple[list[str], str]], prompts: dict[str, str], k: int) -> str:
    """How many prompts got fewer than ``k`` distinct generated criteria, or "": a judge
    repeating a criterion left its prompt with fewer, without a word (a user's finding)."""
    short = [g for g, (crit, source) in generated.items() if source == "generated" and len(crit) < k]
    if not short:
        return ""
    return (f"{len(short)} of {len(generated)} prompts got fewer than {k} distinct criteria (the judge gave "
            f"fewer, repeated one, or was cut at {MAX_TOKENS} tokens; first: {prompts[short[0]][:60]!r}); "
            "each is checked against those it got")


# Criterion ids of generated criteria checked *beside* a prompt's human ones (``[urw]
# compare_criteria``): a prefix of their own, so the main tables never mix them in.
BESIDE_HUMAN = "b"


def rubric_for_pairs(responses: dict[str, tuple[str, str, str]], criteria: dict[str, tuple[list[str], str]],
                     id_prefix: str = "g") -> pa.Table:
    """Every response of a prompt is checked against that prompt's criteria (responses of
    prompts missing from ``criteria`` are left out)."""
    rows = {f.name: [] for f in RUBRIC}
    for item, (group, prompt, text) in responses.items():
        if group not in criteria:
            continue
        crit, source = criteria[group]
        for c_id, c in zip(criterion_ids(crit, id_prefix), crit):
            for n, v in zip(RUBRIC.names, (item, group, prompt, text, c_id, c, source, None)):
                rows[n].append(v)
    return pa.Table.from_pydict(rows, schema=RUBRIC)
