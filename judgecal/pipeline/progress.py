"""What a running collect shows, and when it stops early.

Engine replicas report each batch they answer (not each committed part: a part may hold a
minute of work) to one :class:`ProgressBoard` Ray actor, fire and forget, and the commit stage
reports each part as it lands (the driver reads the commit stage's summaries a block behind:
Ray Data reads ahead, and stopping its read-ahead makes the raylet log its leftover tickets'
kill on stdout). A ticker thread on
the driver reads the board and prints, at least every :data:`PROGRESS_EVERY_S` seconds, a line
(rows answered, rate measured from the first answered batch, ETA, errors), or moves a tqdm
bar when stderr is a terminal. Logs and ``ray job submit`` get plain lines.

Fail fast: when the first ``fail_fast_requests`` answered requests all failed with
connection-class errors (judge unreachable, timing out, connections reset), the collect stops with exit 3 instead
of retrying its way through the plan. Engines whose stage does not report (vLLM through
``ray.data.llm``) are followed through the committed parts instead. When the judge goes away
later (the last ``fail_fast_requests`` all failed so, after answers), the collect hands out
no more blocks, lets the blocks in flight end and commit (the http engine fails a gone
judge's requests at once: ``engines.http.ReachWatch``), then stops with exit 3: what the
judge answered before it went is kept (:meth:`CollectProgress.gone_reason`).
"""

from __future__ import annotations

import sys
import time
from collections import Counter, deque

from judgecal.engines.base import UNSENT, is_connection_error
from judgecal.pipeline.answered import error_reason

PROGRESS_EVERY_S = 4.0  # a line at least this often while requests are in flight
# No request answered for this long, once some were: the judge hangs, and the collect stops
# (exit 3, parts kept). Ray Data's own no-progress limit is off while the engine reports (a
# block of a slow judge can take longer than it allows). JUDGECAL_STALL_TIMEOUT_S: 0 is never.
STALL_S = 30 * 60.0
# Answered rows not yet committed when the stall limit passes: the stop waits this long more for
# their part to be written (a loaded machine took over 3 s, and the stop lost the answered block)
COMMIT_WAIT_S = 60.0
# A replica reports the first and the last this-many outcomes of a batch: the most
# [collect] fail_fast_requests may be (with 64, a larger value skipped a large batch's middle)
OUTCOMES_KEPT = 1000


class ProgressBoard:
    """Counts what the engine replicas answered; the first ``watch`` outcomes are kept (None
    for an answer, the error's first line for a failure) for the fail-fast rule. With a
    :class:`judgecal.pipeline.blocks.BlockDispenser` it also hands out the blocks, sized by
    the rate the replicas' reports measure."""

    def __init__(self, watch: int, dispenser=None):
        self.rows = self.errors = 0
        self.committed_rows = self.committed_parts = 0  # as the commit stage reports them
        self.watch = watch
        self.first: list[str | None] = []
        self.latest: deque = deque(maxlen=max(1, watch))  # the last outcomes reported, oldest first
        self.dispenser = dispenser
        self.halted = False

    def add(self, rows: int, errors: int, outcomes: list[str | None], seconds: float = 0.0) -> None:
        self.rows += rows
        self.errors += errors
        self.first.extend(outcomes[: max(0, self.watch - len(self.first))])
        self.latest.extend(outcomes)
        if self.dispenser is not None:
            self.dispenser.measured(rows, seconds)

    def snapshot(self) -> dict:
        return {"answered": self.rows, "errors": self.errors, "first": list(self.first),
                "latest": list(self.latest), "committed_rows": self.committed_rows,
                "committed_parts": self.committed_parts}

    def halt(self) -> None:
        """Hand out no more blocks (the judge went away): the blocks in flight end and commit."""
        self.halted = True

    def halted_now(self) -> bool:
        return self.halted

    def next_block(self, ticket: int):
        if self.halted and ticket not in self.dispenser.memo:  # a ticket handed out before is handed again
            return None
        return self.dispenser.next(ticket)

    def on_part(self, rows: int, committed: bool) -> None:
        """A block the commit stage finished: ``rows`` rows, ``committed`` if it wrote a part.
        Not committed: its part was there already (Ray Data retried the block after a commit
        worker died past its write): counted once, when it was written."""
        if not committed:
            return
        self.committed_rows += rows
        self.committed_parts += 1
        if self.dispenser is not None:
            self.dispenser.on_committed(rows)

    def blocks(self) -> dict | None:
        return None if self.dispenser is None else self.dispenser.status() | {"halted": self.halted}


def start_board(watch: int, dispenser=None):
    import ray

    return ray.remote(num_cpus=0)(ProgressBoard).remote(watch, dispenser)


def report_batch(board, outputs, seconds: float = 0.0) -> None:
    """Called by an engine replica after each batch it answered (in ``seconds`` of its time)."""
    from judgecal.schemas import PARSE_ERROR

    outcomes = [error_reason(o.raw_text) if o.parse_status == PARSE_ERROR else None for o in outputs]
    # the fail-fast rule reads a collect's first outcomes, the went-away rule its latest
    kept = outcomes if len(outcomes) <= 2 * OUTCOMES_KEPT else outcomes[:OUTCOMES_KEPT] + outcomes[-OUTCOMES_KEPT:]
    unsent = sum(o is not None and o.startswith(f"{UNSENT}:") for o in outcomes)  # no answer, no error row
    board.add.remote(len(outputs) - unsent, sum(o is not None for o in outcomes) - unsent, kept, seconds)


class CollectProgress:
    """The driver's view: committed parts (as the commit stage reports them to the board, or
    from its summary rows, whichever is ahead) and answered rows (from the board); prints, and
    decides to stop early."""

    def __init__(self, stats, todo: int, log, board=None, fail_fast: int = 20, interactive: bool | None = None,
                 stream=None, stall_s: float | None = None):
        import os

        self.stats, self.todo, self.log, self.board, self.fail_fast = stats, todo, log, board, fail_fast
        self.stall_s = float(os.environ.get("JUDGECAL_STALL_TIMEOUT_S", STALL_S)) if stall_s is None else stall_s
        self._seen, self._moved_at = 0, None  # answered rows last seen, and when they last moved
        self.answered = self.board_errors = 0
        self.board_committed = self.board_parts = 0  # what the commit stage reported to the board
        self.first: list[str | None] = []  # from the board, or from committed parts without one
        self.latest: list[str | None] = []  # the board's last outcomes
        self.halted: str | None = None  # why no more blocks are handed out (the judge went away)
        self.t0 = time.perf_counter()
        self.t_first = self.answered_at_first = None
        self.last_line = self.t0
        self._asked = None
        self._last_counts = None  # (answered, errors, committed, parts) of the last line printed
        interactive = sys.stderr.isatty() if interactive is None else interactive
        self.bar = _bar(todo, stream or sys.stderr) if interactive else None

    # -- inputs -------------------------------------------------------------------------
    def on_summary(self, s: dict) -> None:
        st = self.stats
        st.computed += s["rows"]
        st.errors += s["errors"]
        st.parts += int(s["committed"])
        for k in ("prompt_tokens", "computed_tokens", "completion_tokens"):
            setattr(st, k, getattr(st, k) + s[k])
        if self.board is None and len(self.first) < self.fail_fast:
            ok = [None] * (s["rows"] - s["errors"])
            reason = error_reason(s["first_error"])
            self.first += ([reason] * s["errors"] + ok)[: self.fail_fast - len(self.first)]

    def poll(self) -> None:
        """Take the board's last answer if it has come, and ask again: never waits, so a busy
        board delays no line."""
        if self.board is None:
            return
        import ray

        if self._asked is not None:
            ready, _ = ray.wait([self._asked], timeout=0)
            if not ready:
                return
            try:
                self._take(ray.get(self._asked))
            except Exception:  # noqa: BLE001 - a lost answer skips one update, never stops the collect
                pass
        self._asked = self.board.snapshot.remote()

    def final_reason(self) -> str | None:
        """At the end, with the board's last counts: why the collect stopped early, if a rule
        holds (requests never sent go through at once, so a plan could end before the ticker
        saw the rule fire, and the stop read as an ordinary failure)."""
        if self.board is not None:
            import ray

            try:
                self._take(ray.get(self.board.snapshot.remote(), timeout=30))
            except Exception:  # noqa: BLE001 - the last counts read already stand
                pass
        return self.halted or self.stop_reason() or self.gone_reason()

    def _take(self, got: dict) -> None:
        self.answered, self.board_errors, self.first = got["answered"], got["errors"], got["first"]
        self.latest = got["latest"]
        self.board_committed, self.board_parts = got["committed_rows"], got["committed_parts"]

    # -- outputs ------------------------------------------------------------------------
    @property
    def done(self) -> int:
        return max(self.answered, self.stats.computed)

    @property
    def errors(self) -> int:
        return max(self.board_errors, self.stats.errors)

    @property
    def committed(self) -> int:
        """New rows committed: the commit stage's reports, or the summaries read, whichever is ahead."""
        return max(self.board_committed, self.stats.computed)

    @property
    def parts(self) -> int:
        return max(self.board_parts, self.stats.parts)

    def tick(self, force: bool = False) -> None:
        self.poll()
        now = time.perf_counter()
        if self.done != self._seen:
            self._seen, self._moved_at = self.done, now
        if not force and now - self.last_line < (0.5 if self.bar is not None else PROGRESS_EVERY_S):
            return
        counts = (self.done, self.errors, self.committed, self.parts)
        if force and counts == self._last_counts and self.bar is None:
            return  # the closing line would repeat the last one (the 100% line printed twice: a user's finding)
        self.last_line = now
        if self.done and self.t_first is None:
            self.t_first, self.answered_at_first = now, self.done
        rate = None
        if self.t_first is not None and now - self.t_first > 0.5 and self.done > self.answered_at_first:
            rate = (self.done - self.answered_at_first) / (now - self.t_first)
        elif force and self.done:  # all of it came in one look: the rate over the whole collect
            rate = self.done / max(now - self.t0, 1e-9)
        if self.bar is not None:
            self.bar.n = min(self.done, self.todo)
            self.bar.set_postfix_str(f"errors {self.errors}, {self.parts} parts", refresh=True)
            return
        st = self.stats
        self._last_counts = counts
        waiting = "" if self.done else "  (no answer yet: engine replicas start first, or retry their first requests)"
        eta = f"ETA {duration((self.todo - self.done) / rate)}" if rate else "ETA -"
        self.log(f"[collect] {self.done}/{self.todo} answered ({100 * self.done / max(self.todo, 1):.0f}%)  "
                 f"{f'{rate:,.1f}' if rate else '-'} req/s  {eta}  errors {self.errors}  "
                 f"committed {st.already_done + self.committed}/{st.planned} ({self.parts} new parts)  "
                 f"{duration(now - self.t0)} elapsed{waiting}")

    def stop_reason(self) -> str | None:
        """Why the collect should stop now (the fail-fast rule), or None."""
        idle = None if self._moved_at is None else time.perf_counter() - self._moved_at
        if self.board is not None and self.stall_s > 0 and idle is not None and self.done < self.todo \
                and idle > self.stall_s + (COMMIT_WAIT_S if self.committed < self.done else 0.0):
            return (f"no request was answered for {duration(idle)} (after "
                    f"{self.done}): the judge hangs; fix it and rerun to resume (JUDGECAL_STALL_TIMEOUT_S "
                    "sets this limit, 0 turns it off)")
        n = self.fail_fast
        if n <= 0 or len(self.first) < n or any(r is None for r in self.first[:n]):
            return None
        # any mix of connection-class errors: a judge going away answers some requests with a
        # refused connection and others (sent as it went) with a timeout or a reset
        if all(is_connection_error(r) for r in self.first[:n]):
            kinds = Counter(r.split(":")[0].strip() for r in self.first[:n])
            mix = "" if len(kinds) == 1 else " (" + ", ".join(f"{k} {v}" for k, v in kinds.most_common()) + ")"
            return (f"the first {n} requests all failed with {self.first[0]!r}{mix}: the judge is unreachable or "
                    "not answering in time; "
                    "fix it (or raise [collect] fail_fast_requests, 0 turns this off) and rerun to resume")
        return None

    def gone_reason(self) -> str | None:
        """Why to hand out no more blocks: the judge answered, then the last ``fail_fast``
        requests all failed with connection-class errors (it went away mid-collect: a user's
        finding, 21 minutes of retries through the rest of the plan)."""
        n = self.fail_fast
        latest = self.latest[-n:] if n > 0 else []
        if len(latest) < n or n <= 0 or self.answered <= self.board_errors:
            return None
        if not all(is_connection_error(r) for r in latest):
            return None
        kinds = Counter(r.split(":")[0].strip() for r in latest)
        mix = "" if len(kinds) == 1 else " (" + ", ".join(f"{k} {v}" for k, v in kinds.most_common()) + ")"
        return (f"the last {n} requests all failed with {latest[-1]!r}{mix}, after "
                f"{self.answered - self.board_errors} answers: the judge went away or stopped answering in time; "
                "fix it (or raise [collect] fail_fast_requests, 0 turns this off) and rerun to resume")

    def close(self) -> None:
        if self.bar is not None:
            self.tick(force=True)
            self.bar.close()


def _bar(total: int, stream):
    """A tqdm bar that follows the terminal's width; a terminal that reports no width (a pty
    nobody sized) gets 100 columns, since tqdm would draw nothing in 0."""
    import os

    from tqdm import tqdm

    try:
        sized = os.get_terminal_size(stream.fileno()).columns > 0
    except (OSError, ValueError, AttributeError):
        sized = False
    return tqdm(total=total, unit="req", desc="[collect]", file=stream, smoothing=0.1,
                **({"dynamic_ncols": True} if sized else {"ncols": 100}))


def duration(s: float) -> str:
    s = int(round(s))
    return f"{s // 3600}h{s % 3600 // 60:02d}m" if s >= 3600 else (f"{s // 60}m{s % 60:02d}s" if s >= 60 else f"{s}s")
