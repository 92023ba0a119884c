"""The default engine stage: one engine per Ray actor, rendered rows in, response rows out.

Rows arrive rendered (``schemas.RENDERED``): messages, sampling parameters, mode and scale.
A batch may mix modes and scales (URW's criteria and verdicts); each group goes to the
engine's ``score`` or ``generate``. An exception from the engine marks that group's rows as
errors with the reason, so the next run retries them; it never kills the job.
"""

from __future__ import annotations

import json
import time

import pyarrow as pa

from judgecal.engines.base import EngineConfig, JudgeOutput, JudgePrompt
from judgecal.redact import redact
from judgecal.scale import ScoreScale
from judgecal.schemas import PARSE_ERROR, RESPONSES

_OUTPUTS = ("raw_text", "score", "parse_status", "expected_score", "prompt_tokens", "computed_tokens",
            "completion_tokens", "latency_s")


def prompts_from_table(rows: pa.Table) -> list[JudgePrompt]:
    cols = {c: rows[c].to_pylist() for c in ("request_id", "system", "answer_prefix", "temperature",
                                              "seed", "max_tokens", "meta")}
    cols["user"] = _shared_strings(rows["user"])
    return [JudgePrompt(r, s, u, a, json.loads(m) if m else {}, t, sd, mt)
            for r, s, u, a, t, sd, mt, m in zip(cols["request_id"], cols["system"], cols["user"],
                                                 cols["answer_prefix"], cols["temperature"], cols["seed"],
                                                 cols["max_tokens"], cols["meta"])]


def _shared_strings(col) -> list[str]:
    """A dictionary column as a list whose equal entries are one Python string (no copies)."""
    col = col.combine_chunks() if isinstance(col, pa.ChunkedArray) else col
    if not pa.types.is_dictionary(col.type):
        return col.to_pylist()
    words = col.dictionary.to_pylist()
    return [words[i] for i in col.indices.to_numpy(zero_copy_only=False)]


def answer(engine, rows: pa.Table, report=None) -> pa.Table:
    """Run ``engine`` on rendered ``rows``; returns their response rows. With ``report``
    (called with outputs as they are answered), progress shows inside a block of a slow
    judge: an engine that streams its answers (``Engine.streams_progress``: http, whose
    thread pool would otherwise wait on each batch's slowest request) reports them itself;
    any other is given batches that grow while they take under a second, each grown by up to
    ``WHOLE_ITEM_ROWS`` to end where an item ends (the embedded judge computes an item's
    probes as parallel sequences)."""
    prompts = prompts_from_table(rows)
    modes = rows["mode"].to_pylist()
    los, his = rows["scale_lo"].to_pylist(), rows["scale_hi"].to_pylist()
    groups: dict[tuple, list[int]] = {}
    for i, key in enumerate(zip(modes, los, his)):
        groups.setdefault(key, []).append(i)
    outs: list[JudgeOutput | None] = [None] * len(prompts)
    streams = getattr(engine, "streams_progress", False)
    if streams:
        engine.on_answered = report  # None when nothing follows progress
        streams = report is not None
    size = FIRST_BATCH if report is not None and not streams else len(prompts)
    items = rows["item_id"].to_pylist()
    for (mode, lo, hi), idx in groups.items():
        start = 0
        while start < len(idx):
            stop = start + size
            while (stop < len(idx) and stop - start < size + WHOLE_ITEM_ROWS
                   and items[idx[stop]] == items[idx[stop - 1]]):
                stop += 1  # whole items: an engine that scores an item's probes together sees all of them
            batch, start = idx[start:stop], stop
            sub = [prompts[i] for i in batch]
            t0 = time.perf_counter()
            failed = False
            try:
                res = (engine.generate(sub, max(p.max_tokens for p in sub)) if mode == "generate"
                       else engine.score(sub, ScoreScale(lo, hi)))
            except Exception as e:  # noqa: BLE001 - kept as error rows with the reason; retried next run
                failed = True
                res = [JudgeOutput(redact(f"{type(e).__name__}: {e}")[:300], None, PARSE_ERROR,
                                   latency_s=time.perf_counter() - t0)] * len(sub)
            for i, o in zip(batch, res):
                outs[i] = o
            if report is not None and (failed or not streams):
                report(res)
            if report is not None and not streams and time.perf_counter() - t0 < 1.0:
                size *= 2
    return responses_table(rows, engine.identity, outs)


FIRST_BATCH = 8  # rows; doubled while a batch takes under a second
WHOLE_ITEM_ROWS = 32  # rows a batch may grow by to end where an item ends


def responses_table(rows: pa.Table, judge: str, outs: list[JudgeOutput]) -> pa.Table:
    """Response rows: keys and prompt hash from the rendered ``rows``, outputs from ``outs``."""
    data = {k: rows[k] for k in ("request_id", "item_id", "group_id", "probe_id", "run")}
    data["judge"] = pa.array([judge] * rows.num_rows, pa.string())
    data["prompt_sha"] = rows["prompt_sha"]
    for f in _OUTPUTS:
        data[f] = pa.array([getattr(o, f) for o in outs], RESPONSES.field(f).type)
    data["attempt"] = rows["attempt"]
    return pa.Table.from_pydict(data, schema=RESPONSES)


class EngineActor:
    """Ray Data callable class: builds its engine once per actor."""

    def __init__(self, cfg: EngineConfig, board=None):
        self.engine = cfg.build()
        self.board = board
        self.mark = time.perf_counter()  # the end of what the last report covered

    def report(self, outputs) -> None:
        """Each report carries the seconds of this replica's work it covers (since the block
        began or the last report): the board measures the engine's rate from them."""
        from judgecal.pipeline.progress import report_batch

        now = time.perf_counter()
        seconds, self.mark = now - self.mark, now
        report_batch(self.board, outputs, seconds)

    def __call__(self, batch: pa.Table) -> pa.Table:
        self.mark = time.perf_counter()  # time between blocks is not the engine's
        out = answer(self.engine, batch, self.report if self.board is not None else None)
        # the scale of each request travels to the commit, which refuses a score outside it
        return out.append_column("scale_lo", batch["scale_lo"]).append_column("scale_hi", batch["scale_hi"])
