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

import pyarrow as pa
import pyarrow.compute as pc

from judgecal.errors import InputError
from judgecal.pipeline.store import PartStore
from judgecal.schemas import PARSE_ERROR

# Keys the plan already carries; the responses side contributes only outputs.
_KEYS = ("item_id", "group_id", "probe_id", "run")


def answered(plan: pa.Table, store: PartStore) -> pa.Table:
    """Plan rows with their (best) response, in plan order; unanswered rows are left out."""
    resp = store.read()
    ids = plan["request_id"]
    resp = resp.filter(pc.is_in(resp["request_id"], value_set=ids.combine_chunks()))
    resp = resp.drop_columns([c for c in _KEYS if c in resp.column_names])
    order = pa.array(range(plan.num_rows), pa.int64())
    # join on the ids alone and take the plan's rows by position: a plan column of any type
    # (the order plan's list of shown items) travels, which Arrow's hash join cannot carry
    keys = pa.table({"request_id": ids, "_order": order}).join(resp, keys="request_id", join_type="inner")
    keys = keys.sort_by("_order")
    rows = plan.take(keys["_order"])
    for name in keys.column_names:
        if name not in ("request_id", "_order"):
            rows = rows.append_column(keys.schema.field(name), keys[name])
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

    @property
    def complete(self) -> bool:
        return self.failed == 0 and self.missing == 0

    def summary(self) -> str:
        parts = []
        if self.failed:
            parts.append(f"{self.failed} of {self.planned} requests failed (commonest, {self.commonest_count}x: "
                         f"{self.commonest_failure})")
        if self.missing:
            parts.append(f"{self.missing} of {self.planned} planned requests have no response")
        return "; ".join(parts) or f"all {self.planned} requests answered"

    @property
    def advice(self) -> str:
        if self.exhausted:
            return (f"{self.exhausted} of them failed every allowed attempt: fix the cause, then raise "
                    "[collect] max_attempts and rerun `judgecal collect`")
        return "rerun `judgecal collect`"

    def require(self, where: str) -> None:
        if not self.complete:
            raise InputError(where, f"{self.summary()}; {self.advice}")


def completeness(plan, store: PartStore, max_attempts: int | None = None) -> Completeness:
    """What is answered, failed and missing of ``plan`` (a table, or a PlanSource: only its
    ids are read)."""
    ids = plan["request_id"] if isinstance(plan, pa.Table) else plan.column("request_id")
    resp = store.read(["request_id", "parse_status", "raw_text", "attempt"])
    resp = resp.filter(pc.is_in(resp["request_id"], value_set=ids.combine_chunks()))
    err = resp.filter(pc.equal(resp["parse_status"], PARSE_ERROR))
    reasons = Counter(error_reason(t) for t in err["raw_text"].to_pylist())
    top, count = reasons.most_common(1)[0] if reasons else (None, 0)
    exhausted = 0 if max_attempts is None else \
        int(pc.sum(pc.greater_equal(err["attempt"], max_attempts).cast(pa.int64())).as_py() or 0)
    return Completeness(len(ids), resp.num_rows - err.num_rows, err.num_rows, len(ids) - resp.num_rows,
                        top, count, exhausted)


def error_reason(text: str | None) -> str:
    """The first line of an error (what went wrong), cut to a readable length."""
    return (text or "unknown error").splitlines()[0][:160]
