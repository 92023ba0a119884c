"""Batch files by hand: ``judgecal export-batch`` / ``import-batch``, for a provider judgecal
does not call.

``export-batch STUDY PATH`` writes the pending requests of the first request set that has
any (planned, not answered, not at a provider through ``openai-batch``) as OpenAI batch
JSONL: ``custom_id`` is the request id, the body what the ``http`` engine would send. Over
the limits of ``[engine]`` (OpenAI's: 50,000 requests, 200 MB) it writes ``PATH`` cut into
``<stem>-001.jsonl``, ``<stem>-002.jsonl``, ... ``import-batch STUDY RESULTS...`` reads
results files in the same format (output and error lines alike) and commits the lines of
pending requests as response parts: answers as the ``http`` engine reads them, failed lines
as error rows with the reason (the next export holds them again). A results file is imported
once: its SHA-256 is recorded in the response folder's ``batches.json``, and a second import
of the same file commits nothing.

Request sets follow each other (URW's verification plan is built from its criteria answers):
both stop at the first set left incomplete, and say so; run them again for the next.
"""

from __future__ import annotations

import hashlib
import os
import shutil
from pathlib import Path

import pyarrow as pa

from judgecal.engines.batch import LineReader, batch_config, read_lines
from judgecal.errors import InputError
from judgecal.pipeline.answered import completeness
from judgecal.pipeline.batches import MANIFEST_COLUMNS, BatchState, _now, commit_lines, pending_chunks, pending_tables
from judgecal.pipeline.collect import CollectStats, _pending
from judgecal.pipeline.plan_source import PlanSource


class BatchStop(Exception):
    """Export or import ended at a request set that is not complete (a normal end: exit 0)."""


def _config(engine):
    cfg = batch_config(engine)
    if not cfg.model:
        raise InputError("[engine].model", "a batch file names its model: set the provider's model name")
    return cfg


def export_pending(source, renderer, engine, store, path: str, settings, log) -> tuple[int, list[str]]:
    """Write the pending requests of ``source`` as batch JSONL at ``path`` (cut at the
    limits); returns (requests, files written)."""
    cfg = _config(engine)
    index = _pending(store, settings.max_attempts, log)
    tables = pending_tables(source, index, renderer, cfg.wants_meta, BatchState(store.ws).in_flight(),
                            block_rows=settings.part_rows)
    made: list[tuple[str, int]] = []
    try:
        for tmp, lines, _ in pending_chunks(cfg, tables):
            made.append((tmp, lines))
        out = Path(path)
        names = [out] if len(made) == 1 else \
            [out.with_name(f"{out.stem}-{i + 1:03d}{out.suffix or '.jsonl'}") for i in range(len(made))]
        for (tmp, _), name in zip(made, names):
            name.parent.mkdir(parents=True, exist_ok=True)
            shutil.move(tmp, name)
    finally:
        for tmp, _ in made:
            if os.path.exists(tmp):
                os.unlink(tmp)
    return sum(n for _, n in made), [str(n) for n in names] if made else []


def import_results(source, renderer, engine, store, paths: list[str], settings, log) -> CollectStats:
    """Commit the lines of ``paths`` that answer pending requests of ``source``."""
    cfg = _config(engine)
    state = BatchState(store.ws)
    seen = {f.get("sha256") for f in state.imported}
    texts, new = [], []
    for p in paths:
        try:
            data = Path(p).read_bytes()
        except OSError as e:
            raise InputError(p, f"cannot read the results file ({e.strerror or e})") from None
        sha = hashlib.sha256(data).hexdigest()
        if sha in seen:
            log(f"[import] {p}: already imported into {store.uri} (same content); nothing committed from it")
            continue
        seen.add(sha)
        texts.append(data.decode("utf-8", "replace"))
        new.append({"file": os.path.basename(p), "sha256": sha})
    lines, counts = read_lines(texts)
    index = _pending(store, settings.max_attempts, log)
    planned = source.num_rows
    stats = CollectStats(planned, planned, 0)
    totals: dict = {}
    if lines:
        reader = LineReader(cfg)
        try:
            only = pa.array(sorted(lines), pa.string())
            for rendered in pending_tables(source, index, renderer, cfg.wants_meta, only=only,
                                           block_rows=settings.part_rows):
                commit_lines(rendered.select(list(MANIFEST_COLUMNS)), lines, reader, cfg.identity, store,
                             settings.part_rows, totals)
        finally:
            reader.close()
    if new:
        for f in new:
            f.update(imported_at=_now(), lines=counts["lines"], committed=totals.get("rows", 0))
        state.imported.extend(new)
        state.save()
    stats.computed, stats.errors, stats.parts = totals.get("rows", 0), totals.get("errors", 0), totals.get("parts", 0)
    stats.prompt_tokens, stats.completion_tokens = totals.get("prompt_tokens", 0), totals.get("completion_tokens", 0)
    stats.computed_tokens, stats.out_of_scale = totals.get("computed_tokens", 0), totals.get("out_of_scale", 0)
    stats.already_done = planned - stats.computed
    skipped = len(lines) - stats.computed
    extra = "".join(f", {v} {k}" for k, v in counts.items() if v and k != "lines")
    log(f"[import] {store.uri}: {stats.computed - stats.errors:,} answers and {stats.errors:,} failed lines committed"
        + (f"; {skipped:,} lines are for requests not pending here" if skipped else "") + extra)
    return stats


class Exporter:
    """``StudyRun.batch_io`` for export-batch: the first request set with pending requests is
    written to ``path``, and the study stops there."""

    def __init__(self, path: str):
        self.path = path

    def __call__(self, run, name: str, plan, renderer, engine, settings, log) -> CollectStats:
        store = run.store(name)
        n, files = export_pending(PlanSource.of(plan), renderer, engine, store, self.path, settings, log)
        if n:
            where = files[0] if len(files) == 1 else f"{len(files)} files ({files[0]} ... {files[-1]})"
            raise BatchStop(f"{run.ws.join(name)}: wrote {n:,} pending requests to {where}; send them to the "
                            f"provider, then `judgecal import-batch {run.ws.uri} RESULTS.jsonl`")
        _stop_unless_complete(run, name, plan, settings, "nothing to export")
        return CollectStats(PlanSource.of(plan).num_rows, PlanSource.of(plan).num_rows, 0)

    def done(self) -> str:
        return "nothing to export: every planned request is answered"


class Importer:
    """``StudyRun.batch_io`` for import-batch: each request set takes the lines of its pending
    requests; the study stops at the first set left incomplete."""

    def __init__(self, paths: list[str]):
        self.paths = list(paths)
        self.imported = 0

    def __call__(self, run, name: str, plan, renderer, engine, settings, log) -> CollectStats:
        stats = import_results(PlanSource.of(plan), renderer, engine, run.store(name), self.paths, settings, log)
        self.imported += stats.computed
        _stop_unless_complete(run, name, plan, settings, f"{stats.computed:,} lines committed")
        return stats

    def done(self) -> str:
        return f"imported {self.imported:,} lines; every planned request is answered"


def _stop_unless_complete(run, name: str, plan, settings, what: str) -> None:
    done = completeness(plan, run.store(name), settings.max_attempts)
    if not done.complete:
        raise BatchStop(f"{run.ws.join(name)}: {what}; {done.summary()}; export what is pending with "
                        f"`judgecal export-batch {run.ws.uri} PATH`")
