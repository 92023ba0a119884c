"""A judge that costs nothing: every request gets the middle of its scale (or a fixed text).

For measuring the pipeline's own cost (benchmarks/bench_pipeline.py): plan, render, engine
stage, commit, with no model in the way. Its identity says ``null``; never a real study's judge.
"""

from __future__ import annotations

from dataclasses import dataclass

from judgecal.engines.base import GENERATE, SCORE, Engine, EngineConfig, JudgeOutput, register
from judgecal.schemas import PARSE_OK


@register
@dataclass(frozen=True)
class NullEngineConfig(EngineConfig):
    kind = "null"
    capabilities = frozenset({SCORE, GENERATE})  # a constant is no sample: a study that samples is refused
    requests_per_s = 1e9  # parts are bounded by [collect] part_rows

    @property
    def identity(self) -> str:
        return "null:constant"

    def build(self) -> Engine:
        return NullEngine()


class NullEngine(Engine):
    identity = "null:constant"

    def score(self, prompts, scale):
        mid = (scale.lo + scale.hi) / 2
        out = JudgeOutput(str(mid), mid, PARSE_OK, mid, 0, 0, 1, 0.0)
        return [out] * len(prompts)

    def generate(self, prompts, max_tokens):
        return [JudgeOutput("1. Does the response answer?", None, PARSE_OK)] * len(prompts)
