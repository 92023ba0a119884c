"""Collection through a batch API (``[engine] kind = "openai-batch"``): a driver-side job, no Ray.

A collect, on the response folder of one request set:

1. looks at every batch it submitted before (``batches.json``) and commits the answers of
   each one that has ended, once: completed, expired, cancelled (the lines it holds) or failed
   (every request an error row with the provider's reason);
2. writes the pending requests (planned, not answered, not at the provider now) as batch
   JSONL files cut at the provider's limits, and uploads and submits each one;
3. returns, with the requests still at the provider counted (the runner stops there: rerun
   later); with ``--wait`` it looks again every ``poll_s`` until nothing is at the provider,
   and submits again what came back failed or missing (at most ``[collect] max_attempts``
   rounds in one collect).

Committed exactly once. Each submitted file has a manifest (``_batches/<key>.parquet``: the
requests' keys, attempt numbers, prompt hashes, modes and scales), written before the upload.
A batch's answers are the manifest's requests joined to its output and error files: a fixed
set of rows cut into fixed parts, so a collect stopped between committing them and recording
that in ``batches.json`` commits the same part names again, which the store refuses. A line
for an id not in the manifest is ignored, an id seen twice is committed once (an answer over
a failure), and a request with no line stays pending and is submitted again. A failed line is
an error row with the reason: the next collect retries it, as a failed request of any engine.

``batches.json`` (written whole, atomically) lists every batch: manifest, input file, batch
id, status, and once committed, what it held. An upload whose batch was never created (a
stop in between) is submitted at the next collect.
"""

from __future__ import annotations

import time
from collections import Counter
from datetime import datetime, timezone
from itertools import count

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from judgecal.engines.actor import prompts_from_table, responses_table
from judgecal.engines.batch import FINAL, JsonlChunks, LineReader, Refused, read_lines, request_line
from judgecal.ids import id_keys, stable_hash_many
from judgecal.pipeline.answered import error_reason
from judgecal.pipeline.collect import CollectFailed, CollectStats, _commit, _pending
from judgecal.pipeline.plan_source import KeySet, PlanReader, scan_plan
from judgecal.pipeline.render import render_table
from judgecal.scale import ScoreScale

STATE = "batches.json"
MANIFESTS = "_batches"
MANIFEST_COLUMNS = ("request_id", "item_id", "group_id", "probe_id", "run", "attempt", "mode", "scale_lo",
                    "scale_hi", "prompt_sha")


class BatchesPending(CollectFailed):
    """Requests are at the provider: the collect returned before their answers (exit 3;
    rerun `judgecal collect` later, or with --wait)."""


class BatchState:
    """``batches.json`` of one response folder: the batches submitted from it, and the results
    files imported into it by hand."""

    def __init__(self, ws):
        self.ws = ws
        data = ws.read_json(STATE) if ws.exists(STATE) else {}
        self.batches: list[dict] = list(data.get("batches", []))
        self.imported: list[dict] = list(data.get("imported", []))

    def save(self) -> None:
        self.ws.write_json(STATE, {"version": 1, "batches": self.batches, "imported": self.imported})

    def open(self) -> list[dict]:
        return [b for b in self.batches if not b.get("committed")]

    def in_flight(self) -> KeySet | None:
        """The request keys of every batch not yet committed (None: none)."""
        keys = [id_keys(self.ws.read_parquet(b["manifest"])["request_id"]) for b in self.open()]
        return KeySet(np.concatenate(keys)) if keys else None


def pending_tables(source, index, renderer, wants_meta: bool, skip: KeySet | None = None, only=None,
                   block_rows: int = 10_000):
    """Rendered tables of the plan's pending requests, a block at a time, without those in
    ``skip`` (at the provider) and, with ``only`` (an array of ids), only those."""
    reader = PlanReader(source, index)
    for a, b in scan_plan(source, index, block_rows).blocks:
        rows = reader.read(a, b)
        if skip is not None and rows.num_rows:
            rows = rows.filter(pa.array(~skip.contains(id_keys(rows["request_id"]))))
        if only is not None and rows.num_rows:
            rows = rows.filter(pc.is_in(rows["request_id"], value_set=only))
        if rows.num_rows:
            yield render_table(renderer, rows, wants_meta)


def pending_chunks(cfg, tables):
    """(temporary JSONL path, lines, manifest) per file of the rendered ``tables``, each file
    within the config's request and byte limits. The caller deletes each file."""
    import os

    chunks = JsonlChunks(cfg.max_requests_per_file, cfg.max_bytes_per_file)
    held: list[pa.Table] = []
    try:
        for rendered in tables:
            man = rendered.select(list(MANIFEST_COLUMNS))
            start = 0
            for i, (p, mode) in enumerate(zip(prompts_from_table(rendered), rendered["mode"].to_pylist())):
                done = chunks.add(request_line(cfg, p, mode))
                if done:
                    held.append(man.slice(start, i - start))
                    yield (*done, pa.concat_tables(held))
                    held, start = [], i
            held.append(man.slice(start))
        done = chunks.close()
        if done:
            yield (*done, pa.concat_tables(held))
    finally:
        if chunks.close() is not None:  # stopped half-way: the open file goes
            os.unlink(chunks.path)


def commit_lines(manifest: pa.Table, lines: dict, reader: LineReader, judge: str, store, part_rows: int,
                 totals: dict) -> None:
    """The manifest's requests that have a line, as response rows, committed in fixed parts of
    at most ``part_rows``; ``totals`` (rows, errors, tokens, parts, reasons) is added to."""
    ids = manifest["request_id"].to_pylist()
    keep = [i for i, rid in enumerate(ids) if rid in lines]
    if not keep:
        return
    rows = manifest.take(pa.array(keep, pa.int64()))
    outs = []
    for rid, mode, lo, hi in zip(*(rows[c].to_pylist() for c in ("request_id", "mode", "scale_lo", "scale_hi"))):
        outs.append(reader.output(lines[rid], mode, ScoreScale(lo, hi) if mode != "generate" else None))
    table = responses_table(rows, judge, outs)
    table = table.append_column("scale_lo", rows["scale_lo"]).append_column("scale_hi", rows["scale_hi"])
    for start in range(0, table.num_rows, part_rows):
        s = _commit(table.slice(start, part_rows), store).to_pylist()[0]
        for k in ("rows", "errors", "prompt_tokens", "computed_tokens", "completion_tokens", "out_of_scale"):
            totals[k] = totals.get(k, 0) + s[k]
        totals["parts"] = totals.get("parts", 0) + int(s["committed"])
    for o in outs:
        if o.parse_status == "error":
            totals.setdefault("reasons", Counter())[error_reason(o.raw_text)] += 1


def _now() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


class BatchCollect:
    """One collect through the batch API of ``cfg``, into ``store``."""

    def __init__(self, source, renderer, cfg, store, settings, log):
        self.source, self.renderer, self.cfg, self.store = source, renderer, cfg, store
        self.settings, self.log = settings, log
        self.state = BatchState(store.ws)
        self.api = cfg.api()
        self.reader = LineReader(cfg)
        self.totals: dict = {}

    # -- what has ended -------------------------------------------------------------------
    def poll(self) -> None:
        for entry in self.state.open():
            if not entry.get("batch_id"):  # uploaded, never submitted (stopped in between)
                try:
                    entry.update(batch_id=self.api.submit(entry["input_file_id"], {"judgecal": entry["key"]}),
                                 status="validating")
                except Refused as e:  # the upload is gone: its requests are pending again
                    self.log(f"[collect] {e}; its {entry['requests']:,} requests are submitted again")
                    entry.update(status="not submitted", committed=True, answered=0, failed=0,
                                 missing=entry["requests"])
                self.state.save()
                continue
            batch = self.api.retrieve(entry["batch_id"])
            if batch is None:
                self.log(f"[collect] batch {entry['batch_id']}: the provider does not know it; its "
                         f"{entry['requests']:,} requests are submitted again")
                entry.update(status="lost", committed=True, answered=0, failed=0, missing=entry["requests"])
                self.state.save()
                continue
            counts = getattr(batch, "request_counts", None)
            entry.update(status=batch.status, done=(counts.completed + counts.failed) if counts else None)
            if batch.status in FINAL:
                self.commit(entry, batch)
            self.state.save()

    def commit(self, entry: dict, batch) -> None:
        manifest = self.store.ws.read_parquet(entry["manifest"])
        ids = manifest["request_id"].to_pylist()
        texts = []
        for f in (batch.output_file_id, batch.error_file_id):
            try:
                texts.append(self.api.content(f) if f else "")
            except Refused as e:  # a results file the provider no longer has: its requests stay pending
                self.log(f"[collect] batch {entry['batch_id']}: {e}")
        lines, counts = read_lines(texts, set(ids))
        if batch.status == "failed":  # the file was refused: every request fails with the reason
            lines = {**_failed_lines(batch, ids), **lines}
        before = dict(self.totals)
        commit_lines(manifest, lines, self.reader, self.cfg.identity, self.store, self.settings.part_rows,
                     self.totals)
        rows = self.totals.get("rows", 0) - before.get("rows", 0)
        errors = self.totals.get("errors", 0) - before.get("errors", 0)
        missing = len(set(ids) - set(lines))
        entry.update(committed=True, committed_at=_now(), answered=rows - errors, failed=errors, missing=missing,
                     **{k: v for k, v in counts.items() if v and k != "lines"})
        extra = "".join(f", {v} {k} line{'s' if v > 1 else ''} left out" for k, v in counts.items()
                        if v and k != "lines")
        self.log(f"[collect] batch {entry['batch_id']} {batch.status}: {rows - errors:,} answered, {errors:,} "
                 f"failed (asked again, as any failed request), {missing:,} without a line (submitted again){extra}")

    # -- what is pending ------------------------------------------------------------------
    def submit(self, index) -> tuple[int, int]:
        import os

        tables = pending_tables(self.source, index, self.renderer, self.cfg.wants_meta, self.state.in_flight(),
                                block_rows=self.settings.part_rows)
        n = k = 0
        for path, lines, manifest in pending_chunks(self.cfg, tables):
            try:
                self._submit_file(path, lines, manifest)
            finally:
                os.unlink(path)
            n, k = n + lines, k + 1
        return n, k

    def _submit_file(self, path: str, lines: int, manifest: pa.Table) -> None:
        import os

        key = stable_hash_many(f"{i}#{a}" for i, a in zip(manifest["request_id"].to_pylist(),
                                                           manifest["attempt"].to_pylist()))
        name = f"{MANIFESTS}/{key}.parquet"
        self.store.ws.write_parquet(name, manifest)  # before the upload: what the batch holds is known
        size = os.path.getsize(path)
        file_id = self.api.upload(path, f"judgecal-{key}.jsonl")
        entry = {"key": key, "manifest": name, "requests": lines, "bytes": size, "input_file_id": file_id,
                 "batch_id": None, "status": "uploaded", "submitted_at": _now(), "committed": False}
        self.state.batches.append(entry)
        self.state.save()
        entry.update(batch_id=self.api.submit(file_id, {"judgecal": key}), status="validating")
        self.state.save()
        self.log(f"[collect] submitted batch {entry['batch_id']}: {lines:,} requests ({size / 1e6:,.1f} MB, "
                 f"file {file_id})")

    # -- the collect ----------------------------------------------------------------------
    def run(self, t0: float) -> CollectStats:
        s, cfg = self.settings, self.cfg
        index = _pending(self.store, s.max_attempts, self.log)
        scan = scan_plan(self.source, index, s.part_rows)
        planned = self.source.num_rows
        stats = CollectStats(planned, planned - scan.todo - scan.gave_up, 0, gave_up=scan.gave_up)
        waiting = sum(b["requests"] for b in self.state.open())
        n_open = len(self.state.open())
        self.log(f"[collect] {planned} requests planned, {stats.already_done} already committed, {scan.todo} to "
                 f"compute" + (f" ({waiting:,} of them at the provider in {n_open} batch{'es' if n_open > 1 else ''})"
                               if waiting else "")
                 + (f", {scan.gave_up} failed {s.max_attempts} times and are not retried" if scan.gave_up else "")
                 + f" with {cfg.identity} (batch API)")
        try:
            for rounds in count():
                self.poll()
                if rounds < s.max_attempts:
                    index = _pending(self.store, s.max_attempts, self.log)
                    n, k = self.submit(index)
                    if n:
                        self.log(f"[collect] {n:,} requests submitted in {k} batch{'es' if k > 1 else ''}")
                open_ = self.state.open()
                if not open_ or not s.wait:
                    break
                self._progress(open_)
                time.sleep(cfg.poll_s)
        finally:
            self.reader.close()
            self.api.close()
        t = self.totals
        stats.computed, stats.errors, stats.parts = t.get("rows", 0), t.get("errors", 0), t.get("parts", 0)
        stats.prompt_tokens, stats.completion_tokens = t.get("prompt_tokens", 0), t.get("completion_tokens", 0)
        stats.computed_tokens, stats.out_of_scale = t.get("computed_tokens", 0), t.get("out_of_scale", 0)
        stats.error_reasons = dict(t.get("reasons", Counter()).most_common(3))
        stats.gave_up = scan_plan(self.source, _pending(self.store, s.max_attempts, self.log), s.part_rows).gave_up
        stats.in_flight = sum(b["requests"] for b in self.state.open())
        stats.open_batches = len(self.state.open())
        stats.wall_s = time.perf_counter() - t0
        return stats

    def _progress(self, open_: list[dict]) -> None:
        by = Counter(b.get("status") for b in open_)
        done = sum(b.get("done") or 0 for b in open_)
        total = sum(b["requests"] for b in open_)
        self.log(f"[collect] at the provider: {len(open_)} batch{'es' if len(open_) > 1 else ''} ("
                 + ", ".join(f"{n} {st}" for st, n in sorted(by.items())) + f"), {done:,} of {total:,} requests "
                 f"done; next look in {self.cfg.poll_s:g} s")


def _failed_lines(batch, ids: list[str]) -> dict:
    """Error lines for a batch the provider refused: a line's own error where the provider
    names its line (1-based), else the batch's first."""
    data = list(getattr(getattr(batch, "errors", None), "data", None) or [])
    first = next((e for e in data if getattr(e, "line", None) is None), data[0] if data else None)

    def line(e):
        if e is None:
            return {"code": "batch_failed", "message": f"batch {batch.id} failed"}
        return {"code": getattr(e, "code", None) or "batch_failed", "message": getattr(e, "message", None) or ""}

    out = {rid: {"custom_id": rid, "error": line(first)} for rid in ids}
    for e in data:
        n = getattr(e, "line", None)
        if isinstance(n, int) and 1 <= n <= len(ids):
            out[ids[n - 1]] = {"custom_id": ids[n - 1], "error": line(e)}
    return out


def collect_batches(source, renderer, cfg, store, settings, log, t0: float) -> CollectStats:
    return BatchCollect(source, renderer, cfg, store, settings, log).run(t0)
