"""OpenAI-compatible HTTP judges: hosted APIs, ``vllm serve``, ``llama_cpp.server``.

Uses the official ``openai`` client (its own retries off) and retries as it would: on
connection errors and timeouts, 408, 409, 429 and 5xx (``x-should-retry`` obeyed), waiting a
server's Retry-After (``retry-after-ms``, ``retry-after`` seconds or date) when it is at most
120 s, else backing off exponentially (0.5 s doubling, at most 8 s, minus up to 25% jitter); a
Retry-After over 120 s is not retried. Concurrency is bounded per engine by a thread pool of
``concurrency`` workers. A request that still fails after ``max_retries`` is kept with
``parse_status = "error"``, never dropped. A 200 that is not a chat completion (no choices, a
body that is not JSON) fails that request alone, with the reason, not its batch; it is not
retried within the call (the next collect tries it again).

Every attempt first asks a :class:`judgecal.engines.ratelimit.RateLimiter` for its turn
(``requests_per_minute``, ``tokens_per_minute``; ``None``: unlimited) and sleeps the wait it
is given. In a collect, one limiter (a Ray actor) serves every replica of the stage
(:meth:`HttpEngineConfig.build_stage`), so the budget is the pool's, not each actor's; an
engine built on its own has its own. A request's token cost is estimated before sending as
``ceil((len(system) + len(user)) / 4) + 8 + max_tokens`` (about four characters a token, a
few for the message framing, and the most the answer may use), and settled with the usage
the server reports. A 429 makes the shared limiter pause *every* replica for its Retry-After
(or the backoff when there is none), so the pool slows down instead of each actor retrying
into the limit on its own.

Cost: ``price_per_million_prompt_tokens`` and ``price_per_million_completion_tokens`` (USD);
``EngineConfig.cost`` is the one place the results logs compute it (0 for engines without prices).

Each request sends the prompt's ``temperature`` and a seed derived from its request id
(``seed_of(request_id, seed) % 2**31``), so a sampled request (temperature > 0) draws the
same sample on a rerun where the server honours ``seed``.

``generate`` (free text) sends only the system and user messages: many OpenAI-compatible
servers do not continue a trailing assistant message, so ``answer_prefix`` is not sent, and
the returned text is the judge's whole turn, kept as it is. (It was once prepended with the
prefix: "1. Does the response" + "1. Does it give a name?" made a criterion of both, a
user's finding; the readers of generated text take an answer with or without the prefix.)

Secrets: the key (read from ``api_key_env``, never a config field) and the other secrets of
:mod:`judgecal.redact` are taken out of every answer's text, every error kept in
``raw_text`` and every preflight error line, before any of them is parsed, cut short or
stored: some servers echo the key they were sent. The server applies its own chat template
and tokenizer to the messages: whether text in them that spells a special token
(``<|im_end|>``) is read as one is the server's doing, beyond judgecal's reach.
"""

from __future__ import annotations

import email.utils
import math
import os
import random
import re
import threading
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field, fields, replace

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
    expected_from_logprobs,
    parsed_output,
    prompt_tokens_estimate,
    register,
    seed_of,
)
from judgecal.errors import InputError, unread_setting
from judgecal.redact import add_secret_env, redact
from judgecal.scale import ScoreScale
from judgecal.schemas import PARSE_ERROR, PARSE_OK


@register
@dataclass(frozen=True)
class HttpEngineConfig(EngineConfig):
    kind = "http"
    # No PREFILL: chat APIs do not continue a given assistant prefix; it is not sent, nor added to the text.
    capabilities = frozenset({SCORE, GENERATE, SAMPLING, LOGPROBS})
    base_url: str = "http://127.0.0.1:8000/v1"
    model: str = "judge"
    api_key_env: str = "OPENAI_API_KEY"  # name of the variable holding the key, never the key
    concurrency: int = 8
    max_retries: int = 5
    timeout_s: float = 60.0
    gone_after: int = 8  # requests in a row failed to connect (after their retries): the rest unsent; 0: never
    max_tokens: int = 8  # the most tokens one score may use (a request may ask for fewer)
    logprobs: bool = True
    top_logprobs: int = 10
    # One budget for all replicas of a collect (None: unlimited); burst: 1 s of the rate (ratelimit.py).
    requests_per_minute: float | None = None
    tokens_per_minute: float | None = None  # prompt (estimated: chars / 4) + max_tokens, settled on usage
    price_per_million_prompt_tokens: float = 0.0  # USD; the results log's cost_usd
    price_per_million_completion_tokens: float = 0.0

    def __post_init__(self):
        add_secret_env(self.api_key_env)  # its value is redacted wherever this config is (driver, actors)

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
    def longest_request_s(self) -> float:
        return (self.max_retries + 1) * self.timeout_s + MAX_RETRY_AFTER_S  # its tries' timeouts, a Retry-After

    @property
    def requests_per_s(self) -> float:
        # ~0.5 s a call, and never above the pool's budget; sizes parts to ~part_seconds of work.
        rate = 2.0 * self.concurrency
        return min(rate, self.requests_per_minute / 60.0) if self.requests_per_minute else rate

    def validate(self, where: str = "[engine]") -> None:
        try:
            import openai  # noqa: F401 - checked here, on the driver, not first inside a Ray actor
        except ImportError:
            raise InputError(f"{where}.kind", "engine 'http' needs the openai client, which is not installed "
                             "here: install judgecal's [http] extra (pip install '.[http]' from judgecal's folder)") from None
        self.check_fields(where)

    def check_fields(self, where: str = "[engine]") -> None:
        check_endpoint(self.base_url, self.api_key_env, where)
        if self.concurrency < 1 or self.max_retries < 0 or self.timeout_s <= 0 or self.gone_after < 0:
            raise InputError(where, "concurrency must be >= 1, max_retries >= 0, timeout_s > 0 and gone_after >= 0")
        for name in ("requests_per_minute", "tokens_per_minute"):
            v = getattr(self, name)
            if v is not None and not (isinstance(v, (int, float)) and v > 0):
                raise InputError(f"{where}.{name}", f"must be a number > 0, or left out for no limit (got {v!r})")
        for name in ("price_per_million_prompt_tokens", "price_per_million_completion_tokens"):
            v = getattr(self, name)
            if not (isinstance(v, (int, float)) and v >= 0):
                raise InputError(f"{where}.{name}", f"must be a number >= 0 (USD per million tokens; got {v!r})")

    def build(self) -> Engine:
        return HttpEngine(self)

    def preflight(self, prompt: JudgePrompt, mode: str, scale: ScoreScale | None) -> None:
        """One request, no retries, at most ``PREFLIGHT_TIMEOUT_S``: the endpoint answers, knows
        the model, and (scoring) gives an answer readable on the scale. A busy answer (429,
        5xx) passes: the judge is there. Sent before the pool's rate limiter exists."""
        from openai import (
            APIConnectionError,
            APIStatusError,
            APITimeoutError,
            AuthenticationError,
            NotFoundError,
            PermissionDeniedError,
        )

        engine = HttpEngine(replace(self, max_retries=0, timeout_s=min(self.timeout_s, PREFLIGHT_TIMEOUT_S)))
        t0 = time.perf_counter()
        try:
            if mode == "generate":
                engine._create(prompt, min(prompt.max_tokens, 16))
                return
            out = engine._scored(engine._create_score(prompt), scale, t0)
        except APITimeoutError as e:
            if _connect_timeout(e):
                raise JudgeUnavailable(f"{self.base_url}: cannot reach the judge: no connection within "
                                       f"{PREFLIGHT_TIMEOUT_S:g} s") from None
            return  # connected, slow to answer (a cold server): the collect's own timeout applies
        except APIConnectionError as e:
            cause = f" ({e.__cause__})" if e.__cause__ is not None else ""
            raise JudgeUnavailable(f"{self.base_url}: cannot reach the judge: {type(e).__name__}: "
                                   f"{redact(f'{e}{cause}')}") from None
        except (AuthenticationError, PermissionDeniedError) as e:
            if not os.environ.get(self.api_key_env):  # it said "the key in $X was refused" of a key never set
                raise JudgeUnavailable(f"{self.base_url}: the judge wants a key (HTTP {e.status_code}) and "
                                       f"${self.api_key_env} is not set here ([engine].api_key_env names the "
                                       "variable judgecal reads the key from)") from None
            raise JudgeUnavailable(f"{self.base_url}: the key in ${self.api_key_env} was refused "
                                   f"(HTTP {e.status_code})") from None
        except NotFoundError as e:
            raise JudgeUnavailable(f"{self.base_url}: no model {self.model!r} there (HTTP 404: "
                                   f"{redact(str(e.message))[:200]})") from None
        except APIStatusError as e:
            if e.status_code in RETRY_STATUSES or e.status_code >= 500:
                return  # there and busy (429, 5xx): the collect's retries and rate limits handle that
            raise JudgeUnavailable(f"{self.base_url}: HTTP {e.status_code}: "
                                   f"{redact(str(e.message))[:200]}") from None
        except WithheldAnswer:
            return  # there: the filter withheld this answer, a failed request of the collect (it stopped every rerun)
        except Exception as e:  # noqa: BLE001 - an answer that is not a chat completion
            raise JudgeUnavailable(f"{self.base_url}: the answer to one request could not be read "
                                   f"({type(e).__name__}: {redact(str(e))[:200]})") from None
        finally:
            engine.close()
        if out.score is None and out.expected_score is None:
            raise JudgeUnavailable(f"{self.base_url}: model {self.model!r} answered {(out.raw_text or '')[:80]!r}, "
                                   f"which holds no score on {scale}; check the model and [probes].scale")

    def cost(self, prompt_tokens: int, completion_tokens: int) -> float:
        return (prompt_tokens * self.price_per_million_prompt_tokens
                + completion_tokens * self.price_per_million_completion_tokens) / 1e6

    def build_stage(self, ds, replicas: int = 1, board=None):
        """The default actor pool, with one rate limiter for all its replicas.

        Called once per collect, on the driver: it starts a :class:`RateLimiter` actor (even
        without limits: a 429 seen by one replica pauses them all) and hands its handle to every
        replica inside the stage's constructor arguments (a copy of this config that carries
        it; the handle is not a config field, so never in a config file or the results log).
        The stage holds the only handles: the limiter ends with the collect's dataset."""
        from judgecal.engines.ratelimit import start_shared_limiter

        limiter = start_shared_limiter(self.requests_per_minute, self.tokens_per_minute)
        pooled = _PooledHttpEngineConfig(**{f.name: getattr(self, f.name) for f in fields(HttpEngineConfig)},
                                          limiter=limiter)
        return EngineConfig.build_stage(pooled, ds, replicas, board)


@dataclass(frozen=True)
class _PooledHttpEngineConfig(HttpEngineConfig):
    """An http config as it travels to the stage's replicas: with the shared limiter's handle.
    Not registered (a config file never names it); same identity as the config it copies."""

    limiter: object = field(default=None, compare=False, repr=False)

    def build(self) -> Engine:
        from judgecal.engines.ratelimit import RemoteLimiter

        return HttpEngine(self, RemoteLimiter(self.limiter) if self.limiter is not None else None)


PREFLIGHT_TIMEOUT_S = 20.0


def _connect_timeout(e: Exception) -> bool:
    """A timeout before any connection was made (nothing answers there), not a slow answer.
    By the cause's type name: the openai client's HTTP library (httpx, or its fork httpx2 in
    openai 3.x) names them ConnectTimeout / PoolTimeout."""
    return type(e.__cause__).__name__ in ("ConnectTimeout", "PoolTimeout")


def estimate_tokens(p: JudgePrompt, max_tokens: int) -> int:
    """A request's token cost before it is sent: ~4 characters a token, 8 for the framing, and
    the most the answer may use."""
    return prompt_tokens_estimate(len(p.system) + len(p.user)) + max_tokens


MAX_RETRY_AFTER_S = 120.0
RETRY_STATUSES = (408, 409, 429)  # and every 5xx


def retry_after_s(headers) -> float | None:
    """The server's Retry-After in seconds (``retry-after-ms``, then ``retry-after`` as seconds
    or an HTTP date); None when absent or unreadable."""
    if headers is None:
        return None
    for name, div in (("retry-after-ms", 1000.0), ("retry-after", 1.0)):
        v = headers.get(name)
        if v is None:
            continue
        try:
            return float(v) / div
        except ValueError:
            pass
    v = headers.get("retry-after")
    when = email.utils.parsedate_tz(v) if v else None
    return email.utils.mktime_tz(when) - time.time() if when else None


def retry_delay(e: Exception, attempt: int) -> tuple[float, bool] | None:
    """How long to wait before trying ``e``'s request again (``attempt``: tries so far, from 0)
    and whether it was a 429; None: not worth retrying."""
    from openai import APIConnectionError, APIStatusError

    if isinstance(e, APIConnectionError):  # timeouts included
        return _backoff(attempt), False
    if not isinstance(e, APIStatusError):
        return None
    headers = getattr(e.response, "headers", None)
    after = retry_after_s(headers)
    if after is not None and math.isfinite(after) and after > MAX_RETRY_AFTER_S:
        return None
    should = headers.get("x-should-retry") if headers is not None else None
    if should == "false" or (should != "true" and e.status_code not in RETRY_STATUSES and e.status_code < 500):
        return None
    wait = after if after is not None and 0 < after <= MAX_RETRY_AFTER_S else _backoff(attempt)
    return wait, e.status_code == 429


def _names_a_variable(name) -> bool:
    """A variable's name, not a key: a long name, lower-case and with digits, is a key shaped
    like one (gsk_..., hf_...)."""
    if not (isinstance(name, str) and re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name)):
        return False
    return not (len(name) >= 24 and re.search(r"[a-z]", name) and re.search(r"\d", name))


def check_endpoint(url, key_env, where: str) -> None:
    """An endpoint is an http(s) URL with a host (``notaurl`` was taken, then failed at collect),
    and ``api_key_env`` a variable's name: a key pasted there was written to study.json and
    printed in "$sk-... is not set" (a second reader's finding), so it is never repeated. Kept
    with a warning in a folder's saved config (a study answered by hand never called either)."""
    from urllib.parse import urlsplit

    parts = urlsplit(url) if isinstance(url, str) else None
    if parts is None or parts.scheme not in ("http", "https") or not parts.netloc:
        unread_setting(f"{where}.base_url", f"must be an http:// or https:// URL with a host, not {url!r}")
    if key_env != "" and not _names_a_variable(key_env):  # "": no key (a local server)
        unread_setting(f"{where}.api_key_env", "names the environment variable that holds the key (such as "
                       "OPENAI_API_KEY), not the key itself (not repeated here): export the key, name its variable")


class MalformedAnswer(ValueError):
    """A 200 that is not a chat completion with a choice."""


def _check_answer(r) -> None:
    """Refuse a 200 that holds no choice: the client hands back a body that is not JSON as its
    text (a proxy's HTML page), and a completion without choices as it came."""
    if isinstance(r, str):
        raise MalformedAnswer(f"the server answered 200 with a body that is not a chat completion: "
                              f"{redact(r)[:120]!r}")
    if not getattr(r, "choices", None):
        raise MalformedAnswer("the server answered 200 with no choices")


class WithheldAnswer(MalformedAnswer):
    """A completion the provider's content filter withheld (``finish_reason = "content_filter"``)."""


def answer_text(choice) -> str | None:
    """A choice's answer: its content, else the model's ``refusal`` (a judge's answer, read as
    one). A completion the provider's filter withheld raises :class:`WithheldAnswer`: a failed
    request, retried and counted, not an empty answer of the judge (kept as ``empty``, such
    answers were never asked again: a user's finding)."""
    if getattr(choice, "finish_reason", None) == "content_filter":
        raise WithheldAnswer("the provider's content filter withheld the answer (finish_reason content_filter)")
    message = choice.message
    content = getattr(message, "content", None)
    return content if content is not None else getattr(message, "refusal", None)


def _backoff(attempt: int) -> float:
    return min(0.5 * 2.0 ** min(attempt, 30), 8.0) * (1 - 0.25 * random.random())


PROBE_EVERY_S = 30.0  # while the judge is gone, one request this often is still sent, to find it back


class JudgeGone(Exception):
    """A request not sent: the ones before it found the judge gone (see :class:`ReachWatch`)."""


class ReachWatch:
    """Whether the judge answers, as this engine's requests find it. After ``after`` requests
    in a row failed to connect (each after its retries), requests fail at once, unsent, with
    the last connection error, so a collect's block ends and commits what was answered instead
    of retrying each of its requests for ~15 s (a user's finding: 21 minutes of retries after
    the judge died, and the block's ~130 answers lost to the Ctrl-C that ended them). One
    request every ``probe_every_s`` is still sent, with its retries; any answer (an HTTP error
    too: the server is there) ends the watch, so a reward function in a trainer recovers."""

    def __init__(self, after: int = 8, probe_every_s: float = PROBE_EVERY_S, clock=time.monotonic):
        self.after, self.probe_every_s, self.clock = after, probe_every_s, clock
        self.failures, self.last, self.probe_at = 0, "", 0.0
        self.lock = threading.Lock()

    def refuse(self) -> tuple[str | None, bool]:
        """Why the next request is not to be sent (None: send it), and whether it goes as the
        probe (whose own retries are then sent too). ``after`` 0: never refused."""
        with self.lock:
            if not self._gone():
                return None, False
            now = self.clock()
            if now >= self.probe_at:
                self.probe_at = now + self.probe_every_s
                return None, True
            return self._why(), False

    def gone(self) -> str | None:
        """Why not to send, where the judge is taken as gone (no probe granted here)."""
        with self.lock:
            return self._why() if self._gone() else None

    def _gone(self) -> bool:
        return bool(self.after) and self.failures >= self.after

    def _why(self) -> str:
        return f"not sent: {self.failures} requests in a row failed to connect after their retries (last: {self.last})"

    def reached(self) -> None:
        with self.lock:
            self.failures = 0

    def unreached(self, error: str) -> None:
        with self.lock:
            self.failures += 1
            self.last = error
            if self.failures == self.after:
                self.probe_at = self.clock() + self.probe_every_s


class HttpEngine(Engine):
    streams_progress = True

    def __init__(self, cfg: HttpEngineConfig, limiter=None):
        from openai import OpenAI

        from judgecal.engines.ratelimit import RateLimiter

        self.cfg = cfg
        self.identity = cfg.identity
        add_secret_env(cfg.api_key_env)  # an unpickled config (in an actor) ran no __post_init__
        self.client = OpenAI(
            base_url=cfg.base_url,
            api_key=os.environ.get(cfg.api_key_env, "not-needed"),
            max_retries=0,  # retried in _create, each attempt through the limiter
            timeout=cfg.timeout_s,
        )
        self.limiter = limiter or RateLimiter(cfg.requests_per_minute, cfg.tokens_per_minute)
        self.pool = ThreadPoolExecutor(max_workers=cfg.concurrency)
        self.reach = ReachWatch(cfg.gone_after)

    def _turn(self, tokens: int) -> None:
        """Wait for the limiter's grant. A thread that had to wait asks again whether a pause
        (a 429 elsewhere in the pool) began meanwhile; then its grant fell inside the pause, and
        it queues again behind it rather than sending at the pause's end with everyone else."""
        while True:
            wait = self.limiter.acquire(1, tokens)
            if wait <= 0:
                return
            time.sleep(wait)
            if self.limiter.resume_in() <= 0:
                return

    def _create(self, p: JudgePrompt, max_tokens: int, **kw):
        """One chat completion: each attempt waits its turn; retried as the module says."""
        from openai import APIConnectionError, APIStatusError

        tokens = estimate_tokens(p, max_tokens)
        attempt, probe = 0, False
        while True:
            if not probe:  # a probe's retries go; retries of other requests in flight stop too
                gone, probe = self.reach.refuse()
                if gone is not None:  # before the limiter: an unsent request takes no turn
                    raise JudgeGone(gone)
            self._turn(tokens)
            if not probe and (gone := self.reach.gone()) is not None:  # found gone during the wait (a 429 pause)
                raise JudgeGone(gone)
            try:
                r = self._request(p, max_tokens, **kw)
            except Exception as e:
                if isinstance(e, APIStatusError):  # an HTTP answer, even 503: the server is there
                    self.reach.reached()
                retry = retry_delay(e, attempt) if attempt < self.cfg.max_retries else None
                if retry is None:
                    if isinstance(e, APIConnectionError):  # timeouts included
                        self.reach.unreached(redact(f"{type(e).__name__}: {e}")[:120])
                    raise
                wait, too_many = retry
                if too_many:
                    self.limiter.pause(wait)  # the whole pool waits; _turn sleeps it off
                else:
                    time.sleep(wait)
                attempt += 1
                continue
            self.reach.reached()
            _check_answer(r)
            if self.cfg.tokens_per_minute and r.usage is not None:
                self.limiter.settle(tokens - (r.usage.prompt_tokens or 0) - (r.usage.completion_tokens or 0))
            return r

    def _request(self, p: JudgePrompt, max_tokens: int, **kw):
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
        # redacted before it is cut short: a key cut in half would no longer match
        return JudgeOutput(redact(f"{type(e).__name__}: {e}")[:300], None, PARSE_ERROR,
                           latency_s=time.perf_counter() - t0)

    def _one(self, p: JudgePrompt, scale: ScoreScale) -> JudgeOutput:
        t0 = time.perf_counter()
        try:  # a failed request or an unreadable answer: this request's row, not its batch's
            return self._scored(self._create_score(p), scale, t0)
        except Exception as e:  # noqa: BLE001 - kept as a row with its reason, after the client's retries
            return self._error(e, t0)

    def _create_score(self, p: JudgePrompt):
        kw = {"logprobs": True, "top_logprobs": self.cfg.top_logprobs} if self.cfg.logprobs else {}
        return self._create(p, min(p.max_tokens, self.cfg.max_tokens), **kw)

    def _scored(self, r, scale: ScoreScale, t0: float) -> JudgeOutput:
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
            redact(answer_text(choice)),
            scale,
            expected_score=expected,
            prompt_tokens=pt,
            computed_tokens=pt,
            completion_tokens=usage.completion_tokens if usage else 0,
            latency_s=time.perf_counter() - t0,
        )

    def score(self, prompts: list[JudgePrompt], scale: ScoreScale) -> list[JudgeOutput]:
        return self._map(lambda p: self._one(p, scale), prompts)

    def _map(self, fn, prompts: list[JudgePrompt]) -> list[JudgeOutput]:
        """``fn`` over ``prompts`` on the pool, outputs in order; answers are handed to
        ``on_answered`` as they finish (at most every half second), so progress moves with the
        pool and no batch waits for its slowest request."""
        futures = [self.pool.submit(fn, p) for p in prompts]
        if self.on_answered is not None:
            done, last = [], time.perf_counter()
            for f in as_completed(futures):
                done.append(f.result())
                if time.perf_counter() - last >= 0.5:
                    self.on_answered(done)
                    done, last = [], time.perf_counter()
            if done:
                self.on_answered(done)
        return [f.result() for f in futures]

    def _generate_one(self, p: JudgePrompt, max_tokens: int) -> JudgeOutput:
        t0 = time.perf_counter()
        try:  # a failed request or an unreadable answer: this request's row, not its batch's
            r = self._create(p, max_tokens)
            text = redact(answer_text(r.choices[0]) or "")
        except Exception as e:  # noqa: BLE001 - kept as a row with its reason, after the client's retries
            return self._error(e, t0)
        usage = r.usage
        pt = usage.prompt_tokens if usage else 0
        return JudgeOutput(text, None, PARSE_OK, None, pt, pt, usage.completion_tokens if usage else 0,
                           time.perf_counter() - t0)

    def generate(self, prompts: list[JudgePrompt], max_tokens: int) -> list[JudgeOutput]:
        return self._map(lambda p: self._generate_one(p, max_tokens), prompts)

    def close(self) -> None:
        self.pool.shutdown(wait=False)
        self.client.close()
