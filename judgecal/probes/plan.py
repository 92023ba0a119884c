"""The request plan: items x probes x runs, each with a deterministic request id.

The id hashes the judge identity, the item and its text (the item key), the prompt
fingerprint (template, clause, scale) and the probe (the probe key), and the run and order;
a changed template or judge gives new ids, so old responses can never be mixed with new
ones. Item and probe keys are sha256 once each; rows combine them vectorised
(:func:`judgecal.ids.combine_keys`), so 10^7 ids take seconds, not minutes.

Rows of one item stay together (baseline first) so an engine sees prompts that share the
longest prefix back to back. The plan is produced in batches of whole items
(:func:`plan_batches`): :func:`write_plan` streams them into one Parquet file (one row
group per batch) without holding the plan in memory; :func:`build_plan` concatenates them
for small plans.
"""

from __future__ import annotations

from typing import Iterator

import numpy as np
import pyarrow as pa

from judgecal.ids import combine_keys, hex_ids, key128, stable_hash
from judgecal.probes.bank import Probe
from judgecal.probes.templates import template_for
from judgecal.scale import ScoreScale
from judgecal.schemas import REQUESTS

ROWS_PER_BATCH = 65_536  # about; a batch (and a row group of the plan file) holds whole items


def _counter(run, order) -> np.ndarray:
    return np.asarray(run, np.uint64) * np.uint64(1 << 20) + np.asarray(order, np.uint64)


def probe_key(fingerprint: str, probe_id: str, temperature: float = 0.0, seed: int = 0) -> tuple[int, int]:
    """Sampling settings are part of the probe key; greedy requests with seed 0 keep the key
    they had before sampling was a plan column (their answers stay valid)."""
    if temperature == 0 and seed == 0:
        return key128(fingerprint, probe_id)
    return key128(fingerprint, probe_id, "sampling", float(temperature), int(seed))


def request_id(judge: str, fingerprint: str, item_id: str, content_sha: str, probe_id: str, run: int, order: int,
               temperature: float = 0.0, seed: int = 0) -> str:
    """One request's id, exactly as :func:`plan_batches` computes it for a whole plan
    (``seed``: the study's sampling seed; the run's own is ``seed + run``)."""
    return request_ids([key128(judge, item_id, content_sha)], [probe_key(fingerprint, probe_id, temperature, seed)],
                       [run], [order])[0].as_py()


def request_ids(item_keys, probe_keys, runs, orders) -> pa.Array:
    """Many rows' request ids at once: each row's item key (``key128(judge, item_id,
    content_sha)``), probe key (:func:`probe_key`), run and order, as (n, 2) / (n,) arrays or
    lists (an order may be one number for all)."""
    return hex_ids(combine_keys(np.asarray(item_keys, np.uint64).reshape(-1, 2),
                                np.asarray(probe_keys, np.uint64).reshape(-1, 2), _counter(runs, orders)))


def _content_sha(source: str, content: str) -> str:
    return stable_hash(source, content)


def plan_batches(items: pa.Table, probes: list[Probe], runs: int, scale: ScoreScale, judge: str,
                 rows_per_batch: int = ROWS_PER_BATCH, temperature: float = 0.0, seed: int = 0) -> Iterator[pa.Table]:
    """The plan, sorted by group, item, run, probe, in batches of whole items. ``temperature``
    and ``seed`` are the sampling settings; run r samples with seed ``seed + r``."""
    items = items.sort_by([("group_id", "ascending")])  # stable: keeps item order within a group
    n_probes = len(probes)
    tasks = sorted(set(items["task"].to_pylist()))
    fingerprints = {t: [template_for(t).fingerprint(p.clause, scale, p.inject) for p in probes] for t in tasks}
    probe_keys = np.array([[probe_key(fingerprints[t][p], probes[p].probe_id, temperature, seed) for p in range(n_probes)]
                           for t in tasks], np.uint64).reshape(len(tasks), n_probes, 2)
    task_ix = np.array([tasks.index(t) for t in items["task"].to_pylist()], np.int64)
    item_keys = np.array([key128(judge, iid, _content_sha(src, content)) for iid, src, content in zip(
        *(items[c].to_pylist() for c in ("item_id", "source", "content")))], np.uint64).reshape(-1, 2)
    probe_col = {f: pa.array([getattr(p, f) for p in probes], pa.string())
                 for f in ("probe_id", "attribute", "direction", "strength", "family")}
    per_item = runs * n_probes
    step = max(1, rows_per_batch // max(per_item, 1))
    for start in range(0, items.num_rows, step):
        ix = np.arange(start, min(start + step, items.num_rows))
        item_ix = np.repeat(ix, per_item)
        run_ix = np.tile(np.repeat(np.arange(runs, dtype=np.int32), n_probes), len(ix))
        probe_ix = np.tile(np.arange(n_probes), len(ix) * runs)
        ids = request_ids(item_keys[item_ix], probe_keys[task_ix[item_ix], probe_ix], run_ix, 0)
        take_items, take_probes = pa.array(item_ix), pa.array(probe_ix)
        yield pa.Table.from_pydict({
            "request_id": ids,
            "item_id": items["item_id"].take(take_items),
            "group_id": items["group_id"].take(take_items),
            **{f: probe_col[f].take(take_probes) for f in ("probe_id", "attribute", "direction", "strength")},
            "run": run_ix,
            "order": np.zeros(len(item_ix), np.int32),
            "family": probe_col["family"].take(take_probes),
            "temperature": np.full(len(item_ix), float(temperature)),
            "seed": seed + run_ix.astype(np.int64),
        }, schema=REQUESTS)


def build_plan(items: pa.Table, probes: list[Probe], runs: int, scale: ScoreScale, judge: str,
               temperature: float = 0.0, seed: int = 0) -> pa.Table:
    """The whole plan as one table (small plans; large ones go through :func:`write_plan`)."""
    batches = list(plan_batches(items, probes, runs, scale, judge, temperature=temperature, seed=seed))
    return pa.concat_tables(batches) if batches else REQUESTS.empty_table()


def write_plan(ws, name: str, items: pa.Table, probes: list[Probe], runs: int, scale: ScoreScale,
               judge: str, temperature: float = 0.0, seed: int = 0) -> int:
    """Stream the plan into ``name`` in the workspace (whole or not at all); returns its rows."""
    return ws.write_parquet_batches(name, REQUESTS, plan_batches(items, probes, runs, scale, judge,
                                                                 temperature=temperature, seed=seed))
