"""Prompts that show a judge several candidates of one document at once (PRISM §B.6).

Batched pointwise: every candidate of the document in one prompt, in a stated order, each
given its own score ("Summary k: score" lines, parsed by :func:`parse_batch`). Pairwise:
two candidates, "answer 1 or 2", read on the 1-2 scale like any score (so a logprob judge
gives P(second) as ``expected_score - 1``). The order plan (``schemas.ORDERS``) lists the
candidates as shown; order ``o`` is the same permutation of positions for every document
of a size (:func:`orders_for`), so an order's effect can be compared across documents.
"""

from __future__ import annotations

import re

import numpy as np
import pyarrow as pa

from judgecal.ids import stable_hash
from judgecal.pipeline.render import Rendered, RowRenderer
from judgecal.probes.templates import template_for
from judgecal.scale import ScoreScale
from judgecal.schemas import ORDERS

PAIR_SCALE = ScoreScale(1, 2)
BATCH, PAIR = "batch", "pair"
TOKENS_PER_SCORE_LINE = 8  # "Summary 12: 4\n" and some slack

# Per task: the candidate's noun (singular, plural) and how the source is shown, the wording of
# the single-item templates (probes/templates.py) so the formats differ only in what they show.
WORDS = {
    "summary": ("Summary", "summaries of the news article", "Article:\n{source}"),
    "story": ("Story", "stories written for the prompt", "Prompt:\n{source}"),
    "dialogue": ("Response", "next responses in the conversation", "{source}"),
    "conversation": ("Conversation", "whole conversations", "Context:\n{source}"),
    "reasoning": ("Reasoning", "reasonings written for the problem", "Problem:\n{source}"),
    "qa": ("Answer", "answers to the question", "Question:\n{source}"),
    "instruction": ("Response", "responses to the instruction", "Instruction:\n{source}"),
}


def _words(task: str):
    template_for(task)  # an unknown task is refused there, in one line
    return WORDS[task]


def batch_prompt(task: str, source: str, contents: list[str], scale: ScoreScale) -> Rendered:
    noun, plural, src = _words(task)
    lo, hi = scale.lo, scale.hi
    head = (f"Rate the overall quality of each of the {len(contents)} {plural} below on a scale from {lo} to {hi}, "
            f"where {lo} is the worst and {hi} is the best. Answer with one line per {noun.lower()}, in the form "
            f"\"{noun} k: score\", and nothing else.\n\n{src.format(source=source)}")
    body = "".join(f"\n\n{noun} {k}:\n{c}" for k, c in enumerate(contents, 1))
    return Rendered(template_for(task).system, head + body, f"{noun} 1:", mode="generate", scale=scale,
                    max_tokens=TOKENS_PER_SCORE_LINE * len(contents) + 4)


def pair_prompt(task: str, source: str, first: str, second: str) -> Rendered:
    noun, plural, src = _words(task)
    user = (f"Which of the two {plural} below is better overall? Answer 1 if {noun} 1 is better and 2 if {noun} 2 "
            f"is better. Answer with a single number.\n\n{src.format(source=source)}\n\n{noun} 1:\n{first}\n\n"
            f"{noun} 2:\n{second}")
    return Rendered(template_for(task).system, user, "Better: ", mode="score", scale=PAIR_SCALE)


_LINE = re.compile(r"^\W*(?:[A-Za-z]+\s*)?(\d+)\s*[:.)=\-]\s*(-?\d+(?:\.\d+)?)", re.M)


def parse_batch(text: str | None, n: int, scale: ScoreScale) -> list[float | None]:
    """Position k's score (1-based lines "<Noun> k: score"), first mention on the scale; None
    where the answer gives none."""
    out: list[float | None] = [None] * n
    for m in _LINE.finditer(text or ""):
        k, v = int(m.group(1)), float(m.group(2))
        if 1 <= k <= n and out[k - 1] is None and scale.lo <= v <= scale.hi:
            out[k - 1] = v
    return out


def orders_for(n: int, orders: int, seed: int) -> list[list[int]]:
    """``orders`` permutations of positions 0..n-1: as listed, reversed, then random ones
    drawn with ``seed`` over 8 slots and restricted to the first n (so every document of a
    size gets the same ones)."""
    rng = np.random.default_rng(seed)
    perms = [list(range(n)), list(range(n))[::-1]]
    while len(perms) < orders:
        full = rng.permutation(64)
        perms.append([int(i) for i in full if i < n])
    return perms[:orders]


def pairs_for(n: int, per_group: int, seed: int, group: str) -> list[tuple[int, int]]:
    """Up to ``per_group`` distinct unordered pairs of 0..n-1, drawn with the study's seed."""
    all_pairs = [(i, j) for i in range(n) for j in range(i + 1, n)]
    rng = np.random.default_rng([seed, int(stable_hash(group, n=8), 16)])
    pick = rng.permutation(len(all_pairs))[:per_group]
    return [all_pairs[k] for k in sorted(pick)]


def order_plan(items: pa.Table, judge: str, scale: ScoreScale, orders: int, pairs_per_group: int, runs: int,
               temperature: float, seed: int, study_seed: int) -> pa.Table:
    """Batched requests (every document x order x run) and pairwise ones (pairs x both orders
    x run). The id hashes the judge, the rendered prompt (texts, their order, wording, scale),
    the run and the sampling settings: a changed text, order or wording is a new request."""
    renderer = OrderRenderer(items, scale)
    rows = []
    by_group: dict[str, list[dict]] = {}
    for r in items.select(["item_id", "group_id", "source", "content"]).to_pylist():
        by_group.setdefault(r["group_id"], []).append(r)
    for g, members in sorted(by_group.items()):
        n = len(members)
        plans = [(BATCH, o, [members[i] for i in perm]) for o, perm in enumerate(orders_for(n, orders, study_seed))]
        for i, j in pairs_for(n, pairs_per_group, study_seed, g):
            a, b = members[i], members[j]
            plans += [(PAIR, 0, [a, b]), (PAIR, 1, [b, a])]
        for kind, order, shown in plans:
            item = g if kind == BATCH else "|".join(sorted((shown[0]["item_id"], shown[1]["item_id"])))
            p = renderer.rendered(kind, [m["item_id"] for m in shown])
            prompt = stable_hash(p.system, p.user, p.answer_prefix, p.mode, p.scale, p.max_tokens)
            for run in range(runs):
                # the order and the shown ids too: two candidates with the same text (SummEval has
                # some) render one prompt in both orders, yet are two requests
                rid = stable_hash(judge, prompt, order, *(m["item_id"] for m in shown), run, temperature, seed, n=32)
                rows.append({"request_id": rid, "item_id": item, "group_id": g, "probe_id": kind, "run": run,
                             "order": order, "shown": [m["item_id"] for m in shown], "temperature": float(temperature),
                             "seed": seed + run})
    return pa.Table.from_pylist(rows, schema=ORDERS)


class OrderRenderer(RowRenderer):
    """Renders the order plan: each row shows its ``shown`` items of one document."""

    def __init__(self, items: pa.Table, scale: ScoreScale):
        self.items = {r["item_id"]: r for r in items.select(["item_id", "group_id", "task", "source",
                                                               "content"]).to_pylist()}
        self.scale = scale

    def subset(self, item_ids) -> "OrderRenderer":
        return self  # a row names its candidates in ``shown``; the items of a study are few

    def rendered(self, kind: str, shown: list[str]) -> Rendered:
        rows = [self.items[i] for i in shown]
        task, source = rows[0]["task"], rows[0]["source"]
        if kind == BATCH:
            return batch_prompt(task, source, [r["content"] for r in rows], self.scale)
        return pair_prompt(task, source, rows[0]["content"], rows[1]["content"])

    def render(self, rows: list[dict]) -> list[Rendered]:
        out = []
        for r in rows:
            p = self.rendered(r["probe_id"], r["shown"])
            p.temperature, p.seed = float(r["temperature"]), int(r["seed"])
            p.meta = {"format": r["probe_id"], "contents": [self.items[i]["content"] for i in r["shown"]],
                      "scale": [p.scale.lo, p.scale.hi]}
            out.append(p)
        return out

    def longest_prompts(self):
        """Per document, its batched prompt (the longest this plan sends), for the context check."""
        by_group: dict[str, list[str]] = {}
        for i, r in self.items.items():
            by_group.setdefault(r["group_id"], []).append(i)
        for ids in by_group.values():
            p = self.rendered(BATCH, ids)
            yield ids[0], p.system, p.user, p.answer_prefix
