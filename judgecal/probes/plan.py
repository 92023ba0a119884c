"""The request plan: items x probes x runs, each with a deterministic request id.

The id hashes the judge identity, the prompt fingerprint (template, clause, scale), the
item and its text, the probe, the run and the order; a changed template or judge gives new
ids, so old responses can never be mixed with new ones. Rows of one item stay together
(baseline first) so an engine sees prompts that share the longest prefix back to back.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from judgecal.ids import stable_hash
from judgecal.probes.bank import Probe
from judgecal.probes.templates import template_for
from judgecal.scale import ScoreScale
from judgecal.schemas import REQUESTS


def request_id(judge: str, fingerprint: str, item_id: str, content_sha: str, probe_id: str, run: int, order: int) -> str:
    return stable_hash(judge, fingerprint, item_id, content_sha, probe_id, run, order, n=32)


def _content_sha(source: str, content: str) -> str:
    return stable_hash(source, content)


def build_plan(items: pa.Table, probes: list[Probe], runs: int, scale: ScoreScale, judge: str) -> pa.Table:
    """One row per request, sorted by group, item, run, probe. Only the ids are computed per
    row; every other column is taken from the items and probes by index (10^6 rows in seconds)."""
    items = items.sort_by([("group_id", "ascending")])  # stable: keeps item order within a group
    n_items, n_probes = items.num_rows, len(probes)
    item_ix = np.repeat(np.arange(n_items), runs * n_probes)
    run_ix = np.tile(np.repeat(np.arange(runs, dtype=np.int32), n_probes), n_items)
    probe_ix = np.tile(np.arange(n_probes), n_items * runs)
    fingerprints = {t: [template_for(t).fingerprint(p.clause, scale) for p in probes]
                    for t in set(items["task"].to_pylist())}
    keys = [(iid, task, _content_sha(src, content)) for iid, task, src, content in zip(
        *(items[c].to_pylist() for c in ("item_id", "task", "source", "content")))]
    ids = [request_id(judge, fingerprints[task][p], iid, csha, probes[p].probe_id, r, 0)
           for (iid, task, csha), r, p in zip((keys[i] for i in item_ix), run_ix.tolist(), probe_ix.tolist())]
    probe_col = {f: pa.array([getattr(p, f) for p in probes], pa.string())
                 for f in ("probe_id", "attribute", "direction", "strength")}
    take_items, take_probes = pa.array(item_ix), pa.array(probe_ix)
    return pa.Table.from_pydict({
        "request_id": pa.array(ids, pa.string()),
        "item_id": items["item_id"].take(take_items),
        "group_id": items["group_id"].take(take_items),
        **{f: col.take(take_probes) for f, col in probe_col.items()},
        "run": run_ix,
        "order": np.zeros(len(ids), np.int32),
    }, schema=REQUESTS)
