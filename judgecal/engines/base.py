"""The engine interface: typed configs that build Ray Data stages and engines.

A request reaches an engine as a :class:`JudgePrompt`: the rendered messages plus typed
sampling parameters (temperature, seed, max tokens, answer prefix) and the mode (``score``
on a scale, or ``generate`` free text). An engine returns one :class:`JudgeOutput` per
prompt, in order. Configs are frozen dataclasses (as ``ray.data.llm`` and vLLM type
theirs). A config

* names the judge (``identity``, part of every request id, so two judges never share ids),
* declares what its engine can do (``capabilities``), checked against what a study needs
  before any request is sent, and the resources one replica asks Ray for,
* builds the Ray Data stage that maps rendered request rows to response rows
  (``build_stage``): by default a pool of :class:`judgecal.engines.actor.EngineActor`; an
  engine with its own processor (vLLM through ``ray.data.llm``) returns that instead.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from dataclasses import dataclass, field, fields
from typing import ClassVar

import numpy as np

from judgecal.errors import InputError
from judgecal.ids import stable_hash
from judgecal.scale import ScoreScale

# What an engine can do; a method asks for a subset before collecting.
SCORE, GENERATE, SAMPLING, LOGPROBS, PREFILL = "score", "generate", "sampling", "logprobs", "prefill"
CAPABILITIES = (SCORE, GENERATE, SAMPLING, LOGPROBS, PREFILL)


@dataclass
class JudgePrompt:
    request_id: str
    system: str
    user: str
    answer_prefix: str = ""  # the start of the judge's turn (needs PREFILL to be honoured exactly)
    meta: dict = field(default_factory=dict)  # request keys and the judged text; never human labels
    temperature: float = 0.0  # 0: the most likely answer; > 0: a sample, seeded by ``seed``
    seed: int = 0
    max_tokens: int = 8


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
    streams_progress: bool = False  # calls ``on_answered(outputs)`` itself as answers come in
    on_answered = None  # set by the engine stage when a collect follows progress

    @abstractmethod
    def score(self, prompts: list[JudgePrompt], scale: ScoreScale) -> list[JudgeOutput]: ...

    def generate(self, prompts: list[JudgePrompt], max_tokens: int) -> list[JudgeOutput]:
        """Free text (e.g. rubric criteria); ``score`` fields stay empty."""
        raise NotImplementedError(f"{self.identity} does not generate text")

    def close(self) -> None:  # noqa: B027 - engines without resources need nothing
        pass


@dataclass(frozen=True)
class EngineResources:
    """What one replica of the engine stage asks Ray for."""

    num_cpus: float = 1.0
    num_gpus: float = 0.0
    accelerator_type: str | None = None


@dataclass(frozen=True)
class EngineConfig(ABC):
    kind: ClassVar[str]
    capabilities: ClassVar[frozenset[str]] = frozenset({SCORE})
    wants_meta: ClassVar[bool] = False  # only simulated judges read the request keys
    # Rough per-replica rate, as declared: caps a collect's first blocks; after them the rate the
    # replicas' reports measure sizes each block (pipeline/blocks.py), except for a stage that
    # reports nothing (vLLM's), whose blocks this sizes to ~part_seconds of work.
    requests_per_s: ClassVar[float] = 5.0
    reports_progress: ClassVar[bool] = True  # its stage reports each answered batch to the progress board
    # whether its answers' computed_tokens leave out what a prefix cache served (else they are
    # the prompt's tokens, or 0): the report says "not measured" instead of a reuse it never saw
    measures_prefix_reuse: ClassVar[bool] = False
    counts_words: ClassVar[bool] = False  # its "tokens" are the prompt's words: it has no tokenizer

    @property
    @abstractmethod
    def identity(self) -> str: ...

    @abstractmethod
    def build(self) -> Engine: ...

    @property
    def resources(self) -> EngineResources:
        return EngineResources(num_cpus=self.num_cpus)

    @property
    def longest_request_s(self) -> float:
        """The longest one request may take with its retries (0: unbounded or not known)."""
        return 0.0

    @property
    def num_cpus(self) -> float:
        return 1.0

    def cost(self, prompt_tokens: int, completion_tokens: int) -> float:
        """USD for these tokens at the config's prices; engines without prices cost nothing."""
        return 0.0

    def check_fields(self, where: str = "[engine]") -> None:
        """Checks of the config's own values (a range, a choice), wherever a config is read:
        ``show`` and the later stages too, which never call the judge (a user's finding: show
        printed a vLLM config with logprobs 0 that collect refused)."""

    def validate(self, where: str = "[engine]") -> None:
        """``check_fields`` and what running the engine here needs (a model file, a package),
        checked before a stage that calls the judge; engines that need nothing more keep this."""
        self.check_fields(where)

    def model_location(self) -> tuple[str, str] | None:
        """(config field, path) of the local file or folder that holds the judge's weights, whose
        content the study records at collect (``engines.model_content``); None: no local model
        (a hosted judge, a hub id, a simulated one)."""
        return None

    def with_truth(self, truth: dict) -> "EngineConfig":
        """A simulated judge takes its ground truth here; real engines never see labels."""
        return self

    def with_model_content(self, content: dict) -> "EngineConfig":
        """An engine that loads ``model_location()`` in its own replicas takes the driver's
        record of its content here (``engines.model_content``) and checks its node's copy."""
        return self

    def require(self, needs: set[str], where: str = "[engine]") -> None:
        missing = sorted(set(needs) - set(self.capabilities))
        if missing:
            raise InputError(f"{where}.kind", f"engine {self.kind!r} does not offer {', '.join(missing)}, which "
                             f"this study needs (it offers: {', '.join(sorted(self.capabilities))})")

    def preflight(self, prompt: JudgePrompt, mode: str, scale: ScoreScale | None) -> None:
        """One real request before a collect fans out (judge reachable, model there, answer
        readable on the scale); raises :class:`JudgeUnavailable` in one line. Engines that
        run in-process (llamacpp, simulated) or take minutes to start (vllm) check nothing here."""

    def build_stage(self, ds, replicas: int = 1, board=None):
        """Dataset of rendered rows -> Dataset of response rows (schemas.RESPONSES). ``board``:
        a :class:`judgecal.pipeline.progress.ProgressBoard` each replica reports batches to."""
        import ray.data

        from judgecal.engines.actor import EngineActor

        res = self.resources
        kw = {"accelerator_type": res.accelerator_type} if res.accelerator_type else {}
        return ds.map_batches(EngineActor, fn_constructor_kwargs={"cfg": self, "board": board}, batch_size=None,
                              batch_format="pyarrow", zero_copy_batch=True,
                              compute=ray.data.ActorPoolStrategy(size=replicas), num_cpus=res.num_cpus,
                              num_gpus=res.num_gpus or None, **kw)


class JudgeUnavailable(Exception):
    """The preflight request failed: the judge cannot answer (one line: endpoint and reason)."""

    exit_code = 3


# Error types (the first word of an error row's text) that mean "the judge is not there",
# as opposed to one request's bad luck: the fail-fast rule stops on these.
UNSENT = "JudgeGone"  # the error of a request never sent (http.ReachWatch: the judge found gone)
CONNECTION_ERRORS = ("APIConnectionError", "APITimeoutError", "ConnectionError", "ConnectionRefusedError",
                     "ConnectionResetError", "ConnectError", "TimeoutError", "ReadTimeout", "ConnectTimeout", UNSENT)


def is_connection_error(text: str | None) -> bool:
    return bool(text) and text.split(":")[0].strip().split(".")[-1] in CONNECTION_ERRORS


def prompt_tokens_estimate(chars: int, requests: int = 1) -> int:
    """Prompt tokens of ``requests`` prompts of ``chars`` characters in all, before any
    tokenizer is at hand: about four characters a token and 8 for the chat framing."""
    return -(-chars // 4) + 8 * requests


def seed_of(request_id: str, seed: int) -> int:
    """A per-request random seed, so a rerun draws the same sample."""
    return int(stable_hash(request_id, seed, n=15), 16)


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
    if text is not None:  # a lone surrogate (a JSON "\udc80") cannot reach Parquet; U+FFFD can, and says why
        text = text.encode("utf-8", "surrogatepass").decode("utf-8", "replace")
    score, status = scale.read(text)
    return JudgeOutput(text, score, status, **kw)


_REGISTRY: dict[str, type[EngineConfig]] = {}


def register(cls: type[EngineConfig]) -> type[EngineConfig]:
    _REGISTRY[cls.kind] = cls
    return cls


RUNTIME = {"runtime": True}  # field metadata: set by the study as it runs (a simulated judge's truth), never in a config


def config_fields(cls) -> list:
    """The fields of an engine config (class or instance) a config file may set: not the RUNTIME ones."""
    return [f for f in fields(cls) if f.init and not f.metadata.get("runtime")]


def engine_config_from_dict(data: dict, where: str = "engine", validate: bool = True) -> EngineConfig:
    """Build a typed engine config from a config-file table (``kind`` picks the class)."""
    data = dict(data)
    kind = data.pop("kind", None)
    if kind is None:  # an [engine] with no kind read as "unknown engine None" (a user's finding)
        raise InputError(f"{where}.kind", f"missing: an [engine] section names its engine (known: "
                         f"{', '.join(sorted(_REGISTRY))}; kind = \"llamacpp\" is the embedded judge)")
    if kind not in _REGISTRY:
        raise InputError(f"{where}.kind", f"unknown engine {kind!r} (known: {', '.join(sorted(_REGISTRY))})")
    cls = _REGISTRY[kind]
    names = {f.name for f in config_fields(cls)}
    unknown = sorted(set(data) - names)
    if unknown:
        raise InputError(f"{where}.{unknown[0]}", f"unknown field for engine {kind!r} (known: {', '.join(sorted(names))})")
    from judgecal.config import typed_value  # config imports this module

    types = {f.name: str(f.type) for f in fields(cls)}
    data = {k: typed_value(v, types[k], f"{where}.{k}") for k, v in data.items()}  # "maybe" for a bool: one line
    try:
        cfg = cls(**data)
        if validate:
            cfg.validate(where)
        else:
            cfg.check_fields(where)
    except (TypeError, ValueError) as e:  # a wrong type ("abc" for a number): still one line
        if isinstance(e, InputError):
            raise
        raise InputError(where, f"a field has the wrong type ({e})") from None
    return cfg
