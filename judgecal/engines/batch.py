"""Batch APIs (``[engine] kind = "openai-batch"``): the provider answers a file of requests
within a day, at its batch price, with no rate limit to manage.

The engine is driver-side: a collect does not fan requests out to Ray actors but writes the
pending requests as the provider's batch JSONL, uploads and submits it, and a later collect
(or the same one with ``--wait``) fetches the answers (:mod:`judgecal.pipeline.batches`).
This module holds what is the provider's: the typed config, one request as a JSONL line,
the files cut at the provider's limits, a results line read back into a
:class:`JudgeOutput`, and the few calls of the official ``openai`` client.

* A line is ``{"custom_id": <request id>, "method": "POST", "url": "/v1/chat/completions",
  "body": ...}``; the body is what the ``http`` engine sends for that request (model, system
  and user messages, temperature, the request's seed, max_tokens, logprobs), so the answer is
  the one a synchronous call would get.
* Files are cut at ``max_requests_per_file`` (50,000) lines and ``max_bytes_per_file``
  (200 MB), OpenAI's limits; each file is one batch (``/v1/chat/completions``, the
  ``completion_window``).
* An answer is read by the ``http`` engine's own reader (the same chat completion, the same
  score and expected score); a failed line (an ``error`` object, or a status other than 200)
  becomes an error row with its reason, retried by the next collect like any failed request.
* ``identity`` is the ``http`` engine's for the same model, endpoint and settings: the judge
  is the same, so request ids are the same, and a study may switch between ``http`` and
  ``openai-batch`` and keep every answer.
* Cost: ``batch_price_per_million_prompt_tokens`` / ``..._completion_tokens`` (USD).
"""

from __future__ import annotations

import json
import os
import tempfile
import time
from dataclasses import dataclass
from typing import ClassVar

from judgecal.engines.base import (
    GENERATE,
    LOGPROBS,
    SAMPLING,
    SCORE,
    Engine,
    EngineConfig,
    JudgeOutput,
    JudgePrompt,
    JudgeUnavailable,
    register,
    seed_of,
)
from judgecal.engines.http import WithheldAnswer, answer_text, check_endpoint
from judgecal.errors import InputError
from judgecal.redact import add_secret_env, redact
from judgecal.scale import ScoreScale
from judgecal.schemas import PARSE_ERROR, PARSE_OK

ENDPOINT = "/v1/chat/completions"
OPENAI_MAX_REQUESTS = 50_000  # lines per batch file
OPENAI_MAX_BYTES = 200_000_000  # bytes per batch file (200 MB)
FINAL = ("completed", "expired", "failed", "cancelled")  # a batch in any other status is in flight
# what makes an http judge and its batch twin one judge (one identity, one request id per request); their
# other fields of one name mean other things (timeout_s: one chat request, or one upload of up to 200 MB)
JUDGE_FIELDS = ("base_url", "model", "api_key_env", "max_tokens", "logprobs", "top_logprobs")


@register
@dataclass(frozen=True)
class OpenAIBatchEngineConfig(EngineConfig):
    kind = "openai-batch"
    capabilities = frozenset({SCORE, GENERATE, SAMPLING, LOGPROBS})
    driver_side: ClassVar[bool] = True  # collect submits and fetches on the driver: no Ray, no actors
    reports_progress = False
    base_url: str = "https://api.openai.com/v1"
    model: str = ""  # the provider's model name (required)
    api_key_env: str = "OPENAI_API_KEY"  # name of the variable holding the key, never the key
    max_tokens: int = 8  # the most tokens one score may use (a request may ask for fewer)
    logprobs: bool = True
    top_logprobs: int = 10
    timeout_s: float = 600.0  # one call of the files / batches API (an upload of up to 200 MB)
    max_retries: int = 5  # the client's own retries of those calls
    max_requests_per_file: int = OPENAI_MAX_REQUESTS
    max_bytes_per_file: int = OPENAI_MAX_BYTES
    completion_window: str = "24h"
    poll_s: float = 60.0  # with --wait: seconds between two looks at the batches in flight
    batch_price_per_million_prompt_tokens: float = 0.0  # USD at the batch price; the results log's cost_usd
    batch_price_per_million_completion_tokens: float = 0.0

    def __post_init__(self):
        add_secret_env(self.api_key_env)

    def as_http(self):
        """The same judge through the synchronous chat endpoint (its identity, its reader)."""
        from judgecal.engines.http import HttpEngineConfig

        # not timeout_s: that is one files-API call's limit (an upload of up to 200 MB), far
        # too long for one chat request (rewards verify through this; a second reader's finding)
        return HttpEngineConfig(**{f: getattr(self, f) for f in JUDGE_FIELDS})

    @property
    def identity(self) -> str:
        return self.as_http().identity

    @property
    def num_cpus(self) -> float:
        return 0.0

    def validate(self, where: str = "[engine]") -> None:
        try:
            import openai  # noqa: F401
        except ImportError:
            raise InputError(f"{where}.kind", "engine 'openai-batch' needs the openai client, which is not "
                             "installed here: install judgecal's [http] extra (pip install '.[http]')") from None
        self.check_fields(where)

    def check_fields(self, where: str = "[engine]") -> None:
        check_endpoint(self.base_url, self.api_key_env, where)
        if not self.model:
            raise InputError(f"{where}.model", "name the provider's model (e.g. model = \"gpt-4o-mini\")")
        if not (0 < self.max_requests_per_file <= OPENAI_MAX_REQUESTS * 100) or self.max_bytes_per_file < 1024:
            raise InputError(where, "max_requests_per_file must be >= 1 and max_bytes_per_file >= 1024")
        if self.poll_s <= 0 or self.timeout_s <= 0 or self.max_retries < 0 or self.max_tokens < 1:
            raise InputError(where, "poll_s and timeout_s must be > 0, max_retries >= 0, max_tokens >= 1")
        for name in ("batch_price_per_million_prompt_tokens", "batch_price_per_million_completion_tokens"):
            v = getattr(self, name)
            if not (isinstance(v, (int, float)) and v >= 0):
                raise InputError(f"{where}.{name}", f"must be a number >= 0 (USD per million tokens; got {v!r})")

    def build(self) -> Engine:
        raise InputError("[engine].kind", "engine 'openai-batch' answers through `judgecal collect` (a batch "
                         "file), not one request at a time; use kind = \"http\" for the same judge synchronously")

    def cost(self, prompt_tokens: int, completion_tokens: int) -> float:
        return (prompt_tokens * self.batch_price_per_million_prompt_tokens
                + completion_tokens * self.batch_price_per_million_completion_tokens) / 1e6

    def api(self) -> "BatchApi":
        return BatchApi(self)


def batch_config(engine: EngineConfig) -> OpenAIBatchEngineConfig:
    """The batch view of a study's judge: itself, or an ``http`` judge's model and settings
    (the same identity, so the same request ids); export-batch / import-batch use it."""
    if isinstance(engine, OpenAIBatchEngineConfig):
        return engine
    from judgecal.engines.http import HttpEngineConfig

    if isinstance(engine, HttpEngineConfig):
        return OpenAIBatchEngineConfig(**{f: getattr(engine, f) for f in JUDGE_FIELDS})
    raise InputError("[engine].kind", f"a batch file names its model: set [engine] kind = \"openai-batch\" (or "
                     f"\"http\") with the model the provider answers with, not {engine.kind!r}")


# -- one request as a line --------------------------------------------------------------------
def request_body(cfg: OpenAIBatchEngineConfig, p: JudgePrompt, mode: str) -> dict:
    """What the ``http`` engine sends for ``p`` (see ``HttpEngine._request``)."""
    body = {"model": cfg.model,
            "messages": [{"role": "system", "content": p.system}, {"role": "user", "content": p.user}],
            "temperature": p.temperature, "seed": seed_of(p.request_id, p.seed) % 2**31}
    if mode == "generate":
        body["max_tokens"] = p.max_tokens
    else:
        body["max_tokens"] = min(p.max_tokens, cfg.max_tokens)
        if cfg.logprobs:
            body.update(logprobs=True, top_logprobs=cfg.top_logprobs)
    return body


def request_line(cfg: OpenAIBatchEngineConfig, p: JudgePrompt, mode: str) -> bytes:
    line = {"custom_id": p.request_id, "method": "POST", "url": ENDPOINT, "body": request_body(cfg, p, mode)}
    return json.dumps(line, ensure_ascii=False, separators=(",", ":")).encode("utf-8") + b"\n"


class JsonlChunks:
    """Lines written to local temporary files, a new file whenever the next line would pass
    the request or byte limit. ``add`` returns the finished chunk (path, line count) when the
    line opened a new one; ``close`` the last. A line over the byte limit goes alone."""

    def __init__(self, max_requests: int, max_bytes: int):
        self.max_requests, self.max_bytes = max_requests, max_bytes
        self.file = None
        self.lines = self.bytes = 0

    def add(self, line: bytes):
        done = None
        if self.file is not None and (self.lines + 1 > self.max_requests or self.bytes + len(line) > self.max_bytes):
            done = self.close()
        if self.file is None:
            fd, path = tempfile.mkstemp(prefix="judgecal-batch-", suffix=".jsonl")
            self.file, self.path, self.lines, self.bytes = os.fdopen(fd, "wb"), path, 0, 0
        self.file.write(line)
        self.lines += 1
        self.bytes += len(line)
        return done

    def close(self):
        if self.file is None:
            return None
        self.file.close()
        self.file = None
        return self.path, self.lines


# -- a results line back into an output -------------------------------------------------------
class LineReader:
    """Reads results lines with the ``http`` engine's own reader of a chat completion."""

    def __init__(self, cfg: OpenAIBatchEngineConfig):
        from judgecal.engines.http import HttpEngine

        self._http = HttpEngine(cfg.as_http())  # no request is sent: its answer reader only

    def output(self, line: dict, mode: str, scale: ScoreScale | None) -> JudgeOutput:
        t0 = time.perf_counter()
        reason = failure(line)
        if reason is not None:
            return JudgeOutput(redact(reason)[:300], None, PARSE_ERROR)
        try:
            from openai.types.chat import ChatCompletion

            r = ChatCompletion.construct(**line["response"]["body"])
            if mode != "generate":
                out = self._http._scored(r, scale, t0)
                out.latency_s = 0.0  # the provider's time is not known per request
                return out
            text = redact(answer_text(r.choices[0]) or "")
        except WithheldAnswer as e:  # a failed attempt, as the http engine counts it
            return JudgeOutput(f"BatchError: {e}", None, PARSE_ERROR)
        except Exception as e:  # noqa: BLE001 - an answer that is not a chat completion: this line's row
            return JudgeOutput(redact(f"BatchError: unreadable answer ({type(e).__name__}: {e})")[:300], None,
                               PARSE_ERROR)
        usage = r.usage
        pt = usage.prompt_tokens if usage else 0
        return JudgeOutput(text, None, PARSE_OK, None, pt, pt, usage.completion_tokens if usage else 0, 0.0)

    def close(self) -> None:
        self._http.close()


def failure(line: dict) -> str | None:
    """Why a results line holds no answer (its ``error``, or a status other than 200), or None."""
    err = line.get("error")
    if err:
        if isinstance(err, dict):
            return f"BatchError: {err.get('code') or 'error'}: {err.get('message') or ''}".rstrip(": ")
        return f"BatchError: {err}"
    resp = line.get("response")
    if not isinstance(resp, dict) or not isinstance(resp.get("body"), dict):
        return "BatchError: a results line with no response body"
    status = resp.get("status_code", 200)
    if status != 200:
        e = resp["body"].get("error")
        message = e.get("message") if isinstance(e, dict) else e
        return f"BatchError: HTTP {status}: {message or json.dumps(resp['body'])[:200]}"
    return None


def read_lines(chunks, manifest_ids: set | None = None, notes: list | None = None,
               results_shape: bool = False) -> tuple[dict, dict]:
    """Results lines (text chunks of JSONL) -> ({custom_id: line}, counts). A custom id seen
    twice keeps one line: an answer over a failure, else the first. Unreadable lines and ids
    not in ``manifest_ids`` (when given) are counted and left out.

    ``results_shape`` (import-batch: files a user gives): a line that is neither an output nor an
    error line (:func:`is_results_line`; a request line, another provider's shape) is unreadable,
    so it uses no attempt of its request; from the provider's own files such a line is a failed
    answer, as a failed attempt (else it would be submitted again, unbounded).

    ``notes``, when given, gets one dict per chunk: ``lines``, ``ids`` (its custom ids),
    ``unreadable`` and ``unreadable_at`` (the first line numbers, from 1), ``repeats`` (lines
    whose custom id came before, in any chunk), and ``differ``: the
    (custom id, (chunk, line) kept, line here) of each answer that differs from the answer
    kept for its id (their ``choices``), which ``import-batch`` refuses."""
    lines: dict[str, dict] = {}
    at: dict[str, tuple[int, int]] = {}  # where the kept line of each id is (notes only)
    counts = {"lines": 0, "unreadable": 0, "unknown": 0, "duplicates": 0}
    for c, text in enumerate(chunks):
        note = {"lines": 0, "ids": set(), "unreadable": 0, "unreadable_at": [], "repeats": 0, "differ": []}
        if notes is not None:
            notes.append(note)
        for n, raw in enumerate(text.split("\n"), 1):  # numbered as an editor shows them
            if not raw.strip():
                continue
            counts["lines"] += 1
            note["lines"] += 1
            try:
                line = json.loads(raw)
                cid = line["custom_id"]
                if not isinstance(cid, str):
                    raise TypeError(cid)
            except (ValueError, KeyError, TypeError):
                counts["unreadable"] += 1
                note["unreadable"] += 1
                if len(note["unreadable_at"]) < 3:
                    note["unreadable_at"].append(n)
                continue
            if manifest_ids is not None and cid not in manifest_ids:
                counts["unknown"] += 1
                continue
            if results_shape and not is_results_line(line):  # counted as failed, they used up the attempts
                counts["unreadable"] += 1  # of the requests a wrong file named (a user's finding)
                note["unreadable"] += 1
                if len(note["unreadable_at"]) < 3:
                    note["unreadable_at"].append(n)
                continue
            note["ids"].add(cid)
            if cid in lines:
                counts["duplicates"] += 1
                note["repeats"] += 1
                kept = lines[cid]
                if failure(kept) is None and failure(line) is None and _choices(kept) != _choices(line):
                    note["differ"].append((cid, at.get(cid), n))
                if failure(kept) is None or failure(line) is not None:
                    continue
            lines[cid] = line
            if notes is not None:
                at[cid] = (c, n)
    return lines, counts


def is_results_line(line: dict) -> bool:
    """An OpenAI batch output or error line: a response with a body (an object), or an error."""
    resp = line.get("response")
    return bool(line.get("error")) or (isinstance(resp, dict) and isinstance(resp.get("body"), dict))


def is_request_line(line) -> bool:
    """A batch *input* line (what export-batch writes): given to import-batch by mistake."""
    return isinstance(line, dict) and "custom_id" in line and "body" in line and "response" not in line


def _choices(line: dict):
    """What an answer says (a line that is no failure has a response body)."""
    return line["response"]["body"].get("choices")


# -- the provider's files and batches API ------------------------------------------------------
class Refused(JudgeUnavailable):
    """The provider refused one call (a 4xx other than a refused key): a file or batch it no
    longer has, a request it will not take."""


class BatchApi:
    """The four calls, through the official client (its own retries); an error becomes one line
    (:class:`JudgeUnavailable`: the endpoint and the reason, exit 3)."""

    def __init__(self, cfg: OpenAIBatchEngineConfig):
        from openai import OpenAI

        self.cfg = cfg
        self.client = OpenAI(base_url=cfg.base_url, api_key=os.environ.get(cfg.api_key_env, "not-needed"),
                             max_retries=cfg.max_retries, timeout=cfg.timeout_s)

    def _call(self, what: str, fn, *a, **kw):
        from openai import APIConnectionError, APIStatusError, AuthenticationError, PermissionDeniedError

        try:
            return fn(*a, **kw)
        except APIConnectionError as e:
            cause = f" ({e.__cause__})" if e.__cause__ is not None else ""
            raise JudgeUnavailable(f"{self.cfg.base_url}: cannot reach the batch API ({what}): "
                                   f"{type(e).__name__}: {redact(f'{e}{cause}')}"[:400]) from None
        except (AuthenticationError, PermissionDeniedError) as e:
            raise JudgeUnavailable(f"{self.cfg.base_url}: the key in ${self.cfg.api_key_env} was refused ({what}: "
                                   f"HTTP {e.status_code})") from None
        except APIStatusError as e:
            kind = Refused if 400 <= e.status_code < 500 else JudgeUnavailable
            raise kind(f"{self.cfg.base_url}: {what}: HTTP {e.status_code}: {redact(str(e.message))[:200]}") from None

    def upload(self, path: str, name: str) -> str:
        with open(path, "rb") as f:
            return self._call("upload", self.client.files.create, file=(name, f), purpose="batch").id

    def submit(self, file_id: str, metadata: dict | None = None) -> str:
        return self._call("create batch", self.client.batches.create, input_file_id=file_id, endpoint=ENDPOINT,
                          completion_window=self.cfg.completion_window, metadata=metadata or {}).id

    def retrieve(self, batch_id: str):
        """The batch, or None when the provider does not know it (404)."""
        from openai import NotFoundError

        def get():
            try:
                return self.client.batches.retrieve(batch_id)
            except NotFoundError:
                return None

        return self._call("retrieve batch", get)

    def content(self, file_id: str) -> str:
        return self._call("download", self.client.files.content, file_id).text

    def close(self) -> None:
        self.client.close()
