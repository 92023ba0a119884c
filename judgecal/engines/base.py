"""The engine interface: typed configs that build engines that score rendered prompts.

An engine turns a batch of :class:`JudgePrompt` into :class:`JudgeOutput` in the same
order. Configs are frozen dataclasses (as ``ray.data.llm`` and vLLM type theirs); a
config's ``identity`` names the judge in request ids, so two judges never share ids.
A GPU vLLM engine plugs in as one more config class with the same ``build()``.
"""

from __future__ import annotations

import hashlib
import math
from abc import ABC, abstractmethod
from dataclasses import dataclass, field, fields
from typing import ClassVar

import numpy as np

from judgecal.errors import InputError
from judgecal.scale import ScoreScale
from judgecal.schemas import PARSE_OK, PARSE_UNPARSED


@dataclass
class JudgePrompt:
    request_id: str
    system: str
    user: str
    answer_prefix: str = ""
    meta: dict = field(default_factory=dict)  # item / probe keys; only the simulated judges read them
    temperature: float = 0.0  # 0: the most likely answer; > 0: a sample, seeded by ``seed``
    seed: int = 0


@dataclass
class JudgeOutput:
    raw_text: str | None
    score: float | None
    parse_status: str
    expected_score: float | None = None
    prompt_tokens: int = 0
    computed_tokens: int = 0
    completion_tokens: int = 0
    latency_s: float = 0.0


class Engine(ABC):
    identity: str

    @abstractmethod
    def score(self, prompts: list[JudgePrompt], scale: ScoreScale) -> list[JudgeOutput]: ...

    def generate(self, prompts: list[JudgePrompt], max_tokens: int) -> list[JudgeOutput]:
        """Free text (e.g. rubric criteria); ``score`` fields stay empty."""
        raise NotImplementedError(f"{self.identity} does not generate text")

    def close(self) -> None:  # noqa: B027 - engines without resources need nothing
        pass


@dataclass(frozen=True)
class EngineConfig(ABC):
    kind: ClassVar[str]

    @property
    @abstractmethod
    def identity(self) -> str: ...

    @abstractmethod
    def build(self) -> Engine: ...

    # Resources one engine actor asks Ray for.
    @property
    def num_cpus(self) -> float:
        return 1.0


def seed_of(request_id: str, seed: int) -> int:
    """A per-request random seed, so a rerun draws the same sample."""
    return int(hashlib.sha256(f"{request_id}\x00{seed}".encode()).hexdigest()[:15], 16)


def expected_from_logprobs(logprobs: dict[int, float], scale: ScoreScale) -> float | None:
    """G-Eval style expected score: sum_k p(k) k over the scale's values, renormalised."""
    vals = [(v, lp) for v, lp in logprobs.items() if scale.lo <= v <= scale.hi and math.isfinite(lp)]
    if not vals:
        return None
    v = np.array([a for a, _ in vals], dtype=float)
    lp = np.array([b for _, b in vals], dtype=float)
    p = np.exp(lp - lp.max())
    return float((p * v).sum() / p.sum())


def parsed_output(text: str | None, scale: ScoreScale, **kw) -> JudgeOutput:
    score = scale.parse_score(text or "")
    return JudgeOutput(text, score, PARSE_OK if score is not None else PARSE_UNPARSED, **kw)


_REGISTRY: dict[str, type[EngineConfig]] = {}


def register(cls: type[EngineConfig]) -> type[EngineConfig]:
    _REGISTRY[cls.kind] = cls
    return cls


def engine_config_from_dict(data: dict, where: str = "engine") -> EngineConfig:
    """Build a typed engine config from a config-file table (``kind`` picks the class)."""
    data = dict(data)
    kind = data.pop("kind", None)
    if kind not in _REGISTRY:
        raise InputError(f"{where}.kind", f"unknown engine {kind!r} (known: {', '.join(sorted(_REGISTRY))})")
    cls = _REGISTRY[kind]
    names = {f.name for f in fields(cls)}
    unknown = sorted(set(data) - names)
    if unknown:
        raise InputError(f"{where}.{unknown[0]}", f"unknown field for engine {kind!r} (known: {', '.join(sorted(names))})")
    try:
        return cls(**data)
    except (TypeError, ValueError) as e:
        raise InputError(where, str(e)) from None
