"""One request and token budget for every replica of an HTTP judge: a token bucket.

A :class:`RateLimiter` holds up to two buckets, requests per minute and tokens per minute
(either may be ``None``: unlimited). A bucket refills at ``rate / 60`` per second up to its
**burst**, :data:`BURST_SECONDS` (1 s) of the rate but at least one request (or one
token): 600 requests/minute may send 10 at once, then 10 a second. It starts full. So in any
window of ``w`` seconds at most ``burst + rate/60 * w`` requests (tokens) are sent.

``acquire(requests, tokens)`` *reserves*: it debits the buckets now and returns how many
seconds the caller must wait before sending (0: at once). Reservations are granted in call
order, each at the earliest time every bucket covers it, so one cheap call per request
suffices and the caller sleeps locally. A request larger than the burst (a long prompt on a
small tokens-per-minute budget) waits for a full bucket and leaves a debt that later
requests wait off.

``pause(seconds)`` (an HTTP 429 with its Retry-After, seen by any replica) stops every grant
until then, and drains the buckets, so the pool resumes at the steady rate rather than with a
burst. A caller already waiting on an earlier grant asks ``resume_in()`` after its wait and
queues again if a pause began meanwhile (:meth:`judgecal.engines.http.HttpEngine`).

``settle(tokens)`` corrects the token bucket once the server reports the real usage (the
grant was for an estimate): a positive number refunds an overestimate, a negative one charges
an underestimate.

The class is plain Python (thread-safe, and testable with a fake ``clock``); the HTTP engine
stage runs it as one Ray actor per collect and gives every replica its handle
(:meth:`judgecal.engines.http.HttpEngineConfig.build_stage`); an engine built on its own
uses an instance in-process.
"""

from __future__ import annotations

import math
import threading
import time

BURST_SECONDS = 1.0  # a bucket holds this many seconds of its rate (at least one unit)


class _Bucket:
    def __init__(self, per_minute: float):
        self.rate = per_minute / 60.0  # units per second
        self.cap = max(1.0, self.rate * BURST_SECONDS)
        self.level = self.cap  # starts full

    def refill(self, seconds: float) -> None:
        self.level = min(self.cap, self.level + self.rate * max(0.0, seconds))


class RateLimiter:
    def __init__(self, requests_per_minute: float | None = None, tokens_per_minute: float | None = None,
                 clock=time.monotonic):
        self.clock = clock
        self.requests = _Bucket(requests_per_minute) if requests_per_minute else None
        self.tokens = _Bucket(tokens_per_minute) if tokens_per_minute else None
        self.last = clock()  # the time the bucket levels are stated for: the latest grant (may lie ahead)
        self.paused_until = -math.inf
        self.counts = {"granted": 0, "waited": 0, "pauses": 0, "wait_s": 0.0}
        self._lock = threading.Lock()

    def _buckets(self, requests: float, tokens: float) -> list[tuple[_Bucket, float]]:
        return [(b, n) for b, n in ((self.requests, requests), (self.tokens, tokens)) if b is not None]

    def acquire(self, requests: float = 1, tokens: float = 0) -> float:
        """Reserve ``requests`` and ``tokens``; the seconds to wait before sending."""
        with self._lock:
            now = self.clock()
            start = max(now, self.paused_until)
            costs = self._buckets(requests, tokens)
            if costs:  # grants in call order: never before the latest one
                start = max(start, self.last)
            when = start
            if costs:
                for b, _ in costs:
                    b.refill(start - self.last)
                for b, n in costs:  # the earliest time every bucket holds the request (or is full)
                    need = min(n, b.cap)
                    if b.level < need:
                        when = max(when, start + (need - b.level) / b.rate)
                for b, n in costs:
                    b.refill(when - start)
                    b.level -= n
                self.last = when
            wait = max(0.0, when - now)
            self.counts["granted"] += 1
            self.counts["waited"] += wait > 0
            self.counts["wait_s"] += wait
            return wait

    def pause(self, seconds: float) -> float:
        """No grant before ``seconds`` from now (a 429's Retry-After); returns the pause left."""
        with self._lock:
            now = self.clock()
            until = now + max(0.0, seconds)
            if until > self.paused_until:
                self.paused_until = until
                self.counts["pauses"] += 1
                if self.requests or self.tokens:
                    if now > self.last:
                        for b, _ in self._buckets(0, 0):
                            b.refill(now - self.last)
                        self.last = now
                    for b, _ in self._buckets(0, 0):
                        b.level = min(b.level, 0.0)  # drained: resume at the steady rate, no burst
                    self.last = max(self.last, until)
            return max(0.0, self.paused_until - now)

    def resume_in(self) -> float:
        """Seconds until the current pause ends (0: not paused)."""
        with self._lock:
            return max(0.0, self.paused_until - self.clock())

    def settle(self, tokens: float) -> None:
        """Correct the token bucket by ``tokens`` (reserved minus used: > 0 refunds)."""
        with self._lock:
            if self.tokens is not None:
                self.tokens.level = min(self.tokens.cap, self.tokens.level + tokens)

    def stats(self) -> dict:
        with self._lock:
            return dict(self.counts)


class RemoteLimiter:
    """The engine's side of a :class:`RateLimiter` running as a Ray actor: the same methods,
    blocking where the answer matters (acquire, pause, resume_in); ``settle`` is not awaited."""

    def __init__(self, handle):
        self.handle = handle

    def acquire(self, requests: float = 1, tokens: float = 0) -> float:
        import ray

        return ray.get(self.handle.acquire.remote(requests, tokens))

    def pause(self, seconds: float) -> float:
        import ray

        return ray.get(self.handle.pause.remote(seconds))

    def resume_in(self) -> float:
        import ray

        return ray.get(self.handle.resume_in.remote())

    def settle(self, tokens: float) -> None:
        self.handle.settle.remote(tokens)

    def stats(self) -> dict:
        import ray

        return ray.get(self.handle.stats.remote())


def start_shared_limiter(requests_per_minute: float | None, tokens_per_minute: float | None):
    """A :class:`RateLimiter` actor for one collect: no CPU reserved (it never waits behind an
    engine replica that holds every CPU), owned by the driver; Ray ends it once the stage that
    holds its handle is gone. Ray restarts it when it dies (its process killed, its node lost)
    and retries the calls it had in flight, so the pool waits for it instead of failing every
    remaining request; a restarted limiter starts with a full burst (its state is not kept)."""
    import ray

    return ray.remote(RateLimiter).options(num_cpus=0, max_restarts=-1, max_task_retries=-1).remote(
        requests_per_minute, tokens_per_minute)
