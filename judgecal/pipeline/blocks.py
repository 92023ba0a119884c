"""Blocks sized by measured time: how much of the plan the next block takes.

The plan is scanned once into *grains* (runs of whole items, a few rows each). A block is a
run of consecutive grains, cut when the render stage asks for it (not all up front), so its
size follows the engine's rate as *measured* by the engine replicas' reports (rows answered
and the seconds they took, over a recent window), not the rate its config declares:

* before any answer is measured, each replica gets one small first block
  (:data:`FIRST_ROWS`, or the declared size if that is smaller) and the next ones wait for
  the first measurement (seconds for any judge: a replica reports every batch it answers;
  a judge faster than the clock counts as :data:`CLOCK_S` a report, i.e. as fast as can be);
* then a block is ``measured rate x part_seconds`` rows (at most ``part_rows``), recomputed
  for every block, so a judge 50x slower than declared still commits a part about every
  ``part_seconds`` and one that speeds up or slows down is followed as it drifts;
* at most about one block per replica waits ahead of the engine (rows handed out and not yet
  answered or committed), so blocks are cut with a recent rate and a kill loses at most the
  block each replica holds.

A ticket (one input row of the Ray Data pipeline) that asks again gets the block it got
before (a retried render task renders the same rows, so its part has the same name); a
ticket that comes after the plan is handed out gets nothing (an empty block). Blocks are
cut in plan order whatever order the tickets come in (so the pipeline keeps no order of its
own: a block held back behind a waiting ticket would never be answered). Pure Python: the
progress board actor holds one (:class:`judgecal.pipeline.progress.ProgressBoard`).
"""

from __future__ import annotations

import time
from collections import deque

import numpy as np

FIRST_ROWS = 32  # a replica's first block, before the engine's rate is measured
WAIT = "wait"  # the answer while enough blocks wait ahead of the engine
MIN_WINDOW_S = 10.0  # the rate is measured over the last max(this, 2 x part_seconds) seconds
CLOCK_S = 1e-3  # reports of less engine time than this count as this much (an instant judge)


class BlockDispenser:
    def __init__(self, starts, stops, pending, part_seconds: float, part_rows: int, actors: int = 1,
                 first_rows: int = FIRST_ROWS, clock=time.monotonic):
        self.starts = np.asarray(starts, np.int64)
        self.stops = np.asarray(stops, np.int64)
        self.cum = np.cumsum(np.asarray(pending, np.int64))  # pending rows up to and including each grain
        self.part_seconds, self.part_rows = float(part_seconds), int(part_rows)
        self.actors, self.first_rows = max(1, int(actors)), max(1, int(first_rows))
        self.clock = clock
        self.window_s = max(MIN_WINDOW_S, 2 * self.part_seconds)
        self.cursor = 0  # the next grain to hand out
        self.memo: dict[int, tuple[int, int, int]] = {}  # ticket -> (start, stop, rows)
        self.handed_rows = self.handed_blocks = 0
        self.answered = self.committed = 0
        self.last_handed = clock()
        self.meter: deque = deque()  # (when, rows, engine seconds) of the engine's recent reports
        self.sizes: list[int] = []  # rows of each block handed out, in order

    # -- what the engine measured ----------------------------------------------------------
    def measured(self, rows: int, seconds: float) -> None:
        """An engine replica answered ``rows`` in ``seconds`` of its own time."""
        self.answered += int(rows)
        if rows > 0 and seconds >= 0:
            now = self.clock()
            self.meter.append((now, int(rows), float(seconds)))
            while len(self.meter) > 4 and now - self.meter[0][0] > self.window_s:
                self.meter.popleft()

    def on_committed(self, rows: int) -> None:
        self.committed += int(rows)

    def rate(self) -> float | None:
        """Rows a second one replica answers, over the recent window; None before any answer."""
        rows = sum(r for _, r, _ in self.meter)
        secs = sum(s for _, _, s in self.meter)
        return rows / max(secs, CLOCK_S) if rows else None

    def target(self) -> int | None:
        r = self.rate()
        return None if r is None else int(max(1, min(self.part_rows, round(r * self.part_seconds))))

    # -- handing out blocks ----------------------------------------------------------------
    @property
    def exhausted(self) -> bool:
        return self.cursor >= len(self.cum)

    def next(self, ticket: int):
        """(start, stop) plan rows for ``ticket``; None when the plan is handed out; WAIT while
        enough blocks wait ahead of the engine."""
        if ticket in self.memo:
            start, stop, _ = self.memo[ticket]
            return start, stop
        if self.exhausted:
            return None
        target = self.target()
        ahead = self.handed_rows - max(self.answered, self.committed)
        if target is None:  # nothing measured yet: one small block per replica
            if self.handed_blocks >= self.actors and ahead > 0:
                return WAIT
            size = min(self.first_rows, self.part_rows)
        else:
            # one block a replica, and one more, may wait ahead of the engine; a block is
            # handed out anyway when nothing was for 3 parts' time (a report that never came)
            stale = self.clock() - self.last_handed > 3 * self.part_seconds
            if ahead >= (self.actors + 1) * target and not stale:
                return WAIT
            size = target
        base = int(self.cum[self.cursor - 1]) if self.cursor else 0
        j = int(np.searchsorted(self.cum, base + size, "left"))
        j = min(max(j, self.cursor), len(self.cum) - 1)
        rows = int(self.cum[j]) - base
        block = (int(self.starts[self.cursor]), int(self.stops[j]), rows)
        self.cursor = j + 1
        self.memo[ticket] = block
        self.handed_rows += rows
        self.handed_blocks += 1
        self.last_handed = self.clock()
        self.sizes.append(rows)
        return block[0], block[1]

    def status(self) -> dict:
        return {"exhausted": self.exhausted, "handed_rows": self.handed_rows, "blocks": self.handed_blocks,
                "rate": self.rate(), "target": self.target(), "sizes": list(self.sizes)}
