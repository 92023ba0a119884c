"""OpenAI-compatible HTTP judges: hosted APIs, ``vllm serve``, ``llama_cpp.server``.

Uses the official ``openai`` client, whose retries back off exponentially (with jitter,
honouring Retry-After) on connection errors, 408, 409, 429 and 5xx. Concurrency is bounded
per engine by a thread pool of ``concurrency`` workers. A request that still fails after
``max_retries`` is kept with ``parse_status = "error"``, never dropped.

Each request sends the prompt's ``temperature`` and a seed derived from its request id
(``seed_of(request_id, seed) % 2**31``), so a sampled request (temperature > 0) draws the
same sample on a rerun where the server honours ``seed``.

``generate`` (free text) sends only the system and user messages: many OpenAI-compatible
servers do not continue a trailing assistant message, so ``answer_prefix`` is not sent.
It is prepended to the returned text instead, unless the text already starts with it.
"""

from __future__ import annotations

import os
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from judgecal.engines.base import (
    GENERATE,
    LOGPROBS,
    SAMPLING,
    SCORE,
    Engine,
    EngineConfig,
    JudgeOutput,
    JudgePrompt,
    expected_from_logprobs,
    parsed_output,
    register,
    seed_of,
)
from judgecal.errors import InputError
from judgecal.scale import ScoreScale
from judgecal.schemas import PARSE_ERROR, PARSE_OK


@register
@dataclass(frozen=True)
class HttpEngineConfig(EngineConfig):
    kind = "http"
    # No PREFILL: chat APIs do not continue a given assistant prefix; it is prepended to the text.
    capabilities = frozenset({SCORE, GENERATE, SAMPLING, LOGPROBS})
    base_url: str = "http://127.0.0.1:8000/v1"
    model: str = "judge"
    api_key_env: str = "OPENAI_API_KEY"  # name of the variable holding the key, never the key
    concurrency: int = 8
    max_retries: int = 5
    timeout_s: float = 60.0
    max_tokens: int = 8  # the most tokens one score may use (a request may ask for fewer)
    logprobs: bool = True
    top_logprobs: int = 10

    @property
    def identity(self) -> str:
        # What changes an answer is part of the judge: resuming with other logprob settings
        # must not mix expected scores with parsed ones.
        lp = f"lp{self.top_logprobs}" if self.logprobs else "nolp"
        return f"http:{self.model}@{self.base_url}[max_tokens={self.max_tokens};{lp}]"

    @property
    def num_cpus(self) -> float:
        return 0.25  # waits on the network, not the CPU

    @property
    def requests_per_s(self) -> float:
        return 2.0 * self.concurrency  # ~0.5 s a call; sizes parts to ~part_seconds of work

    def validate(self, where: str = "[engine]") -> None:
        if self.concurrency < 1 or self.max_retries < 0 or self.timeout_s <= 0:
            raise InputError(where, "concurrency must be >= 1, max_retries >= 0 and timeout_s > 0")

    def build(self) -> Engine:
        return HttpEngine(self)


class HttpEngine(Engine):
    def __init__(self, cfg: HttpEngineConfig):
        from openai import OpenAI

        self.cfg = cfg
        self.identity = cfg.identity
        self.client = OpenAI(
            base_url=cfg.base_url,
            api_key=os.environ.get(cfg.api_key_env, "not-needed"),
            max_retries=cfg.max_retries,
            timeout=cfg.timeout_s,
        )
        self.pool = ThreadPoolExecutor(max_workers=cfg.concurrency)

    def _create(self, p: JudgePrompt, max_tokens: int, **kw):
        return self.client.chat.completions.create(
            model=self.cfg.model,
            messages=[{"role": "system", "content": p.system}, {"role": "user", "content": p.user}],
            temperature=p.temperature,
            seed=seed_of(p.request_id, p.seed) % 2**31,  # servers take a 32-bit seed
            max_tokens=max_tokens,
            **kw,
        )

    @staticmethod
    def _error(e: Exception, t0: float) -> JudgeOutput:
        return JudgeOutput(f"{type(e).__name__}: {e}"[:300], None, PARSE_ERROR, latency_s=time.perf_counter() - t0)

    def _one(self, p: JudgePrompt, scale: ScoreScale) -> JudgeOutput:
        t0 = time.perf_counter()
        kw = {"logprobs": True, "top_logprobs": self.cfg.top_logprobs} if self.cfg.logprobs else {}
        try:
            r = self._create(p, min(p.max_tokens, self.cfg.max_tokens), **kw)
        except Exception as e:  # noqa: BLE001 - kept as a row with its reason, after the client's retries
            return self._error(e, t0)
        choice = r.choices[0]
        expected = None
        content_lp = getattr(getattr(choice, "logprobs", None), "content", None)
        if content_lp:
            first_digit = next((t for t in content_lp if scale.parse_score(t.token) is not None), None)
            if first_digit is not None:
                lps: dict[int, float] = {}
                for alt in first_digit.top_logprobs or []:
                    v = scale.parse_score(alt.token)
                    if v is not None and float(v).is_integer():
                        lps.setdefault(int(v), alt.logprob)
                expected = expected_from_logprobs(lps, scale)
        usage = r.usage
        pt = usage.prompt_tokens if usage else 0
        return parsed_output(
            choice.message.content,
            scale,
            expected_score=expected,
            prompt_tokens=pt,
            computed_tokens=pt,
            completion_tokens=usage.completion_tokens if usage else 0,
            latency_s=time.perf_counter() - t0,
        )

    def score(self, prompts: list[JudgePrompt], scale: ScoreScale) -> list[JudgeOutput]:
        return list(self.pool.map(lambda p: self._one(p, scale), prompts))

    def _generate_one(self, p: JudgePrompt, max_tokens: int) -> JudgeOutput:
        t0 = time.perf_counter()
        try:
            r = self._create(p, max_tokens)
        except Exception as e:  # noqa: BLE001 - kept as a row with its reason, after the client's retries
            return self._error(e, t0)
        text = r.choices[0].message.content or ""
        if not text.startswith(p.answer_prefix):  # the prefix is not sent; see the module docstring
            text = p.answer_prefix + text
        usage = r.usage
        pt = usage.prompt_tokens if usage else 0
        return JudgeOutput(text, None, PARSE_OK, None, pt, pt, usage.completion_tokens if usage else 0,
                           time.perf_counter() - t0)

    def generate(self, prompts: list[JudgePrompt], max_tokens: int) -> list[JudgeOutput]:
        return list(self.pool.map(lambda p: self._generate_one(p, max_tokens), prompts))

    def close(self) -> None:
        self.pool.shutdown(wait=False)
        self.client.close()
