"""Where collection reads its plan, and which planned requests are still to do.

A plan is read row group by row group (:class:`PlanSource`: the plan's Parquet file in a
workspace, or an in-memory table cut at item boundaries), so a plan of 10^7 requests is
never whole in the driver's memory. What is done is an index of 128-bit request keys
(:class:`PendingIndex`, built from the committed parts: 16 bytes an id in a hash index),
not a set of strings. The driver scans the plan's ids once and cuts
it into blocks of whole items (start and stop rows); the workers read those rows
themselves and drop what the index says is done.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from judgecal.ids import id_keys
from judgecal.schemas import PARSE_ERROR, REQUESTS

GROUP_ROWS = 65_536  # row groups of an in-memory plan (a written plan has its own)


class KeySet:
    """A set of (hi, lo) 64-bit key pairs with vectorised lookup: a hash index on hi (pandas'
    engine, built once; 10^7 keys in seconds), checked against lo. Ids that share their
    first 64 bits (about 3 in 10^6 studies of 10^7 requests) fall back to a sorted search."""

    def __init__(self, keys: np.ndarray, values: np.ndarray | None = None):
        self.hi, self.lo = keys[:, 0].copy(), keys[:, 1].copy()
        self.values = None if values is None else np.asarray(values)
        self._hash = pd.Index(self.hi)
        if not self._hash.is_unique:
            order = np.lexsort((self.lo, self.hi))
            self.hi, self.lo = self.hi[order], self.lo[order]
            self.values = None if values is None else self.values[order]
            self._hash = None

    def __len__(self) -> int:
        return len(self.hi)

    def index(self, keys: np.ndarray) -> np.ndarray:
        """Position of each key in the set, or -1."""
        if not len(self.hi) or not len(keys):
            return np.full(len(keys), -1, np.int64)
        if self._hash is not None:
            pos = self._hash.get_indexer(keys[:, 0])
            pos[(pos >= 0) & (self.lo[np.maximum(pos, 0)] != keys[:, 1])] = -1
            return pos
        out = np.full(len(keys), -1, np.int64)
        left = np.searchsorted(self.hi, keys[:, 0], "left")
        right = np.searchsorted(self.hi, keys[:, 0], "right")
        for i in np.flatnonzero(right > left):
            j = left[i] + np.searchsorted(self.lo[left[i]:right[i]], keys[i, 1])
            if j < right[i] and self.lo[j] == keys[i, 1]:
                out[i] = j
        return out

    def contains(self, keys: np.ndarray) -> np.ndarray:
        return self.index(keys) >= 0


@dataclass
class PendingIndex:
    """What the committed parts say: ids answered or given up (skip), and failed ids to retry
    with the attempt number they reached."""

    skip: KeySet
    exhausted: KeySet
    retry: KeySet  # values: the highest attempt so far

    @classmethod
    def from_store(cls, store, max_attempts: int) -> "PendingIndex":
        ok_parts, failed_parts, attempt_parts = [], [], []
        for b in store.iter_batches(["request_id", "parse_status", "attempt"]):  # ids become 16 bytes as read
            is_err = pc.equal(b.column(1), PARSE_ERROR).to_numpy(zero_copy_only=False)
            keys = id_keys(b.column(0))
            ok_parts.append(keys[~is_err])
            failed_parts.append(keys[is_err])
            attempt_parts.append(b.column(2).to_numpy(zero_copy_only=False)[is_err])
        ok_keys = np.concatenate(ok_parts) if ok_parts else np.zeros((0, 2), np.uint64)
        failed = np.concatenate(failed_parts) if failed_parts else np.zeros((0, 2), np.uint64)
        attempts = np.concatenate(attempt_parts) if attempt_parts else np.zeros(0, np.int32)
        del ok_parts, failed_parts
        ok = KeySet(ok_keys)
        keep = ~ok.contains(failed)
        failed, attempts = failed[keep], attempts[keep]
        if len(failed):  # the highest attempt per failed id
            order = np.lexsort((attempts, failed[:, 1], failed[:, 0]))
            failed, attempts = failed[order], attempts[order]
            last = np.ones(len(failed), bool)
            last[:-1] = (failed[1:] != failed[:-1]).any(axis=1)
            failed, attempts = failed[last], attempts[last]
        gone = attempts >= max_attempts
        exhausted = KeySet(failed[gone])
        skip = KeySet(np.concatenate([ok_keys, failed[gone]])) if gone.any() else ok
        return cls(skip, exhausted, KeySet(failed[~gone], attempts[~gone]))

    def pending(self, keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(mask of rows still to do, their attempt numbers)."""
        mask = ~self.skip.contains(keys)
        attempt = np.ones(int(mask.sum()), np.int32)
        if len(self.retry):
            pos = self.retry.index(keys[mask])
            attempt[pos >= 0] = self.retry.values[pos[pos >= 0]] + 1
        return mask, attempt


class PlanSource:
    """A plan read row group by row group: a Parquet file in a workspace, or a table."""

    def __init__(self, table: pa.Table | None = None, ws=None, name: str | None = None):
        self.table, self.ws, self.name = table, ws, name
        self._file = None
        if table is not None:
            bounds = item_bounds(table["item_id"])
            cuts = [0]
            for b in bounds[1:]:
                if b - cuts[-1] >= GROUP_ROWS or b == table.num_rows:
                    cuts.append(int(b))
            self.offsets = np.array(cuts if table.num_rows else [0], np.int64)
        else:
            meta = self._parquet().metadata
            sizes = [meta.row_group(g).num_rows for g in range(meta.num_row_groups)]
            self.offsets = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)

    @classmethod
    def of(cls, plan) -> "PlanSource":
        return plan if isinstance(plan, PlanSource) else cls(table=plan)

    def __reduce__(self):  # workers reopen the file themselves
        return (PlanSource, (self.table, self.ws, self.name))

    def _parquet(self):
        if self._file is None:
            self._file = self.ws.parquet_file(self.name)
        return self._file

    @property
    def num_rows(self) -> int:
        return int(self.offsets[-1])

    @property
    def num_row_groups(self) -> int:
        return len(self.offsets) - 1

    def row_group(self, g: int, columns: list[str] | None = None) -> pa.Table:
        if self.table is not None:
            t = self.table.slice(self.offsets[g], self.offsets[g + 1] - self.offsets[g])
            return t.select(columns) if columns else t
        return self._parquet().read_row_group(g, columns=columns)


    def column(self, name: str) -> pa.ChunkedArray:
        """One column of the whole plan (e.g. the ids, 36 bytes a row)."""
        if self.table is not None:
            return self.table[name]
        return pa.chunked_array([self.row_group(g, [name])[name] for g in range(self.num_row_groups)],
                                REQUESTS.field(name).type)


PLAN_KEYS = ("request_id", "item_id", "group_id", "probe_id", "run")  # what answered() takes from a plan


def plan_fingerprint(plan) -> dict:
    """A plan's rows and a content hash of its keys (:data:`PLAN_KEYS`, in row order), read
    row group by row group. The same for the table a collect was given and the file it was
    written to, however either is cut into groups: study.json records it at collect, and the
    stages that read the plan refuse one that differs (swapped, truncated, edited)."""
    import hashlib

    source = PlanSource.of(plan)
    hashers = {k: hashlib.sha256() for k in PLAN_KEYS}
    for g in range(source.num_row_groups):
        t = source.row_group(g, list(PLAN_KEYS))
        for k in PLAN_KEYS:
            values = t[k].to_numpy(zero_copy_only=False)
            hashers[k].update(pd.util.hash_array(values.astype(object) if values.dtype.kind == "O" else values)
                              .tobytes())
    total = hashlib.sha256(b"".join(hashers[k].digest() for k in PLAN_KEYS))
    return {"rows": source.num_rows, "sha256": total.hexdigest()[:32]}


def item_bounds(item_ids) -> np.ndarray:
    """Row numbers where an item starts, and the number of rows at the end."""
    items = item_ids.combine_chunks() if isinstance(item_ids, pa.ChunkedArray) else item_ids
    n = len(items)
    change = np.ones(n + 1, dtype=bool)
    if n > 1:
        change[1:n] = pc.not_equal(items.slice(1), items.slice(0, n - 1)).to_numpy(zero_copy_only=False)
    return np.flatnonzero(change) if n else np.zeros(1, np.int64)


@dataclass
class PlanScan:
    blocks: list[tuple[int, int]]  # (start, stop) plan rows; whole items, ~target pending rows each
    todo: int
    retries: int
    gave_up: int
    items: set  # item ids with something to do
    rows: list = field(default_factory=list)  # pending rows of each block


def scan_plan(source: PlanSource, index: PendingIndex, target_rows: int) -> PlanScan:
    """One pass over the plan's ids: what is left to do, cut into blocks of whole items."""
    blocks, rows, todo, retries, gave_up, items = [], [], 0, 0, 0, set()
    start, since = 0, 0
    for g in range(source.num_row_groups):
        t = source.row_group(g, ["request_id", "item_id"])
        base = int(source.offsets[g])
        keys = id_keys(t["request_id"])
        mask, attempt = index.pending(keys)
        gave_up += int(index.exhausted.contains(keys).sum()) if len(index.exhausted) else 0
        todo += int(mask.sum())
        retries += int((attempt > 1).sum())
        if mask.any():
            items.update(pc.unique(t["item_id"].filter(pa.array(mask))).to_pylist())
        bounds = item_bounds(t["item_id"])
        per_item = np.add.reduceat(mask.astype(np.int64), bounds[:-1]) if t.num_rows else np.zeros(0, np.int64)
        for k, n in enumerate(per_item):
            at = base + int(bounds[k])
            if since >= target_rows:  # cut before this item: blocks of whole items, >= target rows
                blocks.append((start, at))
                rows.append(since)
                since = 0
            if since == 0:
                start = at
            since += int(n)
    if since:
        blocks.append((start, source.num_rows))
        rows.append(since)
    return PlanScan(blocks, todo, retries, gave_up, items, rows)


class PlanReader:
    """A worker's view of the plan: reads a block's rows (caching the last row group) and
    keeps the pending ones, with their attempt numbers."""

    def __init__(self, source: PlanSource, index: PendingIndex):
        self.source, self.index = source, index
        self._cache: dict[int, pa.Table] = {}

    def _group(self, g: int) -> pa.Table:
        if g not in self._cache:
            self._cache = {g: self.source.row_group(g)}  # blocks arrive in plan order
        return self._cache[g]

    def read(self, start: int, stop: int) -> pa.Table:
        offsets = self.source.offsets
        parts = []
        g = int(np.searchsorted(offsets, start, "right") - 1)
        while start < stop:
            lo, hi = int(offsets[g]), int(offsets[g + 1])
            end = min(stop, hi)
            parts.append(self._group(g).slice(start - lo, end - start))
            start, g = end, g + 1
        t = pa.concat_tables(parts) if len(parts) > 1 else parts[0]
        mask, attempt = self.index.pending(id_keys(t["request_id"]))
        return t.filter(pa.array(mask)).append_column("attempt", pa.array(attempt, pa.int32()))
