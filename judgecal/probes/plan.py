"""The request plan: items x probes x runs, each with a deterministic request id.

The id hashes the judge identity, the prompt fingerprint (template, clause, scale), the
item and its text, the probe, the run and the order; a changed template or judge gives new
ids, so old responses can never be mixed with new ones. Rows of one item stay together
(baseline first) so an engine sees prompts that share the longest prefix back to back.
"""

from __future__ import annotations

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
    """One row per request, sorted by group, item, run, probe."""
    cols: dict[str, list] = {f.name: [] for f in REQUESTS}
    fingerprints: dict[tuple[str, str], str] = {}
    items = items.sort_by([("group_id", "ascending")])  # stable: keeps item order within a group
    for row in items.select(["item_id", "group_id", "task", "source", "content"]).to_pylist():
        csha = _content_sha(row["source"], row["content"])
        for run in range(runs):
            for p in probes:
                key = (row["task"], p.probe_id)
                if key not in fingerprints:
                    fingerprints[key] = template_for(row["task"]).fingerprint(p.clause, scale)
                cols["request_id"].append(request_id(judge, fingerprints[key], row["item_id"], csha, p.probe_id, run, 0))
                cols["item_id"].append(row["item_id"])
                cols["group_id"].append(row["group_id"])
                cols["probe_id"].append(p.probe_id)
                cols["attribute"].append(p.attribute)
                cols["direction"].append(p.direction)
                cols["strength"].append(p.strength)
                cols["run"].append(run)
                cols["order"].append(0)
    return pa.Table.from_pydict(cols, schema=REQUESTS)
