"""``answered(plan, store)``: the plan joined to its responses on ``request_id``.

The only way a fit, an evaluation, a report or a reward reads responses: exactly the
planned requests, each once, with the plan's typed columns beside the judge's outputs.
Responses in the same store that belong to another plan (another ``runs``, a changed
clause) are never read. :func:`completeness` says what is missing or failed, and
``require()`` turns that into the one-line refusal fit and evaluate give.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from judgecal.errors import InputError
from judgecal.pipeline.store import PartStore, best_per_request
from judgecal.schemas import PARSE_ERROR

# Keys the plan already carries; the responses side contributes only outputs.
_KEYS = ("item_id", "group_id", "probe_id", "run")
RESPONSES_DIR = "responses"  # a study folder's response parts


def answered(plan: pa.Table, store: PartStore, columns: list[str] | None = None) -> pa.Table:
    """Plan rows with their (best) response, in plan order; unanswered rows are left out.

    ``columns``: the response columns to carry (default: all). A stage that names the ones
    it reads never holds the answers' text (``raw_text``, ``prompt_sha``) in memory."""
    if not store.parts() and PartStore(store.ws.child(RESPONSES_DIR), store.schema).parts():
        # a study folder given for its responses/ folder read as no answers at all (a user's finding)
        raise InputError(store.uri, f"holds no response parts; its {RESPONSES_DIR}/ folder does: read it with "
                         f"PartStore(Workspace(folder).child({RESPONSES_DIR!r}))")
    resp = store.read(None if columns is None else list(dict.fromkeys(["request_id", *columns])))
    resp = resp.drop_columns([c for c in _KEYS if c in resp.column_names])
    # join the ids and row positions alone, then take each side's rows by position: only two
    # integer columns go through Arrow's hash join, and a plan column of any type (the order
    # plan's list of shown items, which the join cannot carry) travels
    left = pa.table({"request_id": plan["request_id"], "_order": pa.array(np.arange(plan.num_rows, dtype=np.int64))})
    right = pa.table({"request_id": resp["request_id"], "_row": pa.array(np.arange(resp.num_rows, dtype=np.int64))})
    pos = left.join(right, keys="request_id", join_type="inner").select(["_order", "_row"]).sort_by("_order")
    del left, right
    # every planned row answered (what fit and evaluate require): the plan itself, not a copy
    rows = plan if pos.num_rows == plan.num_rows else plan.take(pos["_order"])
    out = resp.take(pos["_row"])
    del resp, pos
    for name in out.column_names:
        if name != "request_id":  # nullable, as the join's output columns were
            rows = rows.append_column(out.schema.field(name).with_nullable(True), out[name])
    return rows


@dataclass(frozen=True)
class Completeness:
    planned: int
    answered: int  # a response that is not an error
    failed: int  # latest response is an error
    missing: int  # never answered
    commonest_failure: str | None
    commonest_count: int
    exhausted: int = 0  # failed max_attempts times: a rerun does not retry them
    by_hand: str = ""  # the study's folder, where its answers came through export-batch / import-batch

    @property
    def complete(self) -> bool:
        return self.failed == 0 and self.missing == 0

    def summary(self) -> str:
        parts = []
        if self.failed:
            parts.append(f"{self.failed:,} of {self.planned:,} requests failed (commonest, {self.commonest_count:,}x: "
                         f"{self.commonest_failure})")
        if self.missing:
            parts.append(f"{self.missing:,} of {self.planned:,} planned requests have no response")
        return "; ".join(parts) or f"all {self.planned:,} requests answered"

    @property
    def advice(self) -> str:
        rerun = f"export them with `judgecal export-batch {self.by_hand} PATH`, then import the provider's " \
                f"results with `judgecal import-batch {self.by_hand} RESULTS.jsonl`" if self.by_hand else \
                "rerun `judgecal collect`"
        if self.exhausted:
            how = " (the study's config, or `--set collect.max_attempts=N` on export-batch and import-batch)" \
                if self.by_hand else ""
            return (f"{self.exhausted:,} of them failed every allowed attempt: fix the cause, then raise "
                    f"[collect] max_attempts{how} and {rerun}")
        return rerun

    def require(self, where: str) -> None:
        if not self.complete:
            raise InputError(where, f"{self.summary()}; {self.advice}")


def completeness(plan, store: PartStore, max_attempts: int | None = None) -> Completeness:
    """What is answered, failed and missing of ``plan`` (a table, or a PlanSource: only its
    ids are read)."""
    ids = plan["request_id"] if isinstance(plan, pa.Table) else plan.column("request_id")
    resp = store.read(["request_id", "parse_status", "attempt"])
    resp = resp.filter(pc.is_in(resp["request_id"], value_set=ids.combine_chunks()))
    err = resp.filter(pc.equal(resp["parse_status"], PARSE_ERROR))
    reasons = Counter(error_reason(t) for t in _error_texts(store, err["request_id"]))
    top, count = reasons.most_common(1)[0] if reasons else (None, 0)
    exhausted = 0 if max_attempts is None else \
        int(pc.sum(pc.greater_equal(err["attempt"], max_attempts).cast(pa.int64())).as_py() or 0)
    return Completeness(len(ids), resp.num_rows - err.num_rows, err.num_rows, len(ids) - resp.num_rows,
                        top, count, exhausted)


def _error_texts(store: PartStore, failed: pa.ChunkedArray) -> list:
    """The ``raw_text`` of each failed request's best row, in the order of ``failed`` (sorted
    ids, as ``store.read`` gives them, and as :func:`best_texts` returns them)."""
    if not len(failed):
        return []
    return best_texts(store, failed.combine_chunks())["raw_text"].to_pylist()


def best_texts(store: PartStore, ids: pa.Array) -> pa.Table:
    """``request_id`` and ``raw_text`` of the best row of each of the requests ``ids`` found in
    ``store``, sorted by id. Only those requests' rows are kept as the parts are read a batch
    at a time, so the answers' text is never whole in memory."""
    cols = ["request_id", "parse_status", "raw_text", "attempt"]
    batches = [b.filter(pc.is_in(b.column(0), value_set=ids)) for b in store.iter_batches(cols)]
    if not batches:
        return pa.table({"request_id": pa.array([], pa.string()), "raw_text": pa.array([], pa.string())})
    return best_per_request(pa.Table.from_batches(batches, schema=batches[0].schema)).select(["request_id", "raw_text"])


def error_reason(text: str | None) -> str:
    """The first line of an error (what went wrong), cut to a readable length."""
    return (text or "unknown error").splitlines()[0][:160]
