"""The response parts of one collection: exactly-once commits on any workspace.

A part's name is a hash of its rows' request ids and attempt numbers, and it is created
with an exclusive write (``os.link`` locally, ``If-None-Match: *`` on S3). So a retried Ray
task or a second driver that computed the same block never commits it twice, and a reader
never sees half a part. Readers still deduplicate by ``request_id`` (two drivers with
different views of what was done can cut different blocks): per id the best row wins, a
successful answer over an error, then the latest attempt.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as pads

from judgecal.ids import stable_hash_many
from judgecal.schemas import PARSE_ERROR, RESPONSES
from judgecal.workspace import Workspace

PART_PREFIX, PART_SUFFIX = "part-", ".parquet"


class PartStore:
    def __init__(self, workspace: Workspace, schema: pa.Schema = RESPONSES):
        self.ws = workspace
        self.schema = schema

    @property
    def uri(self) -> str:
        return self.ws.uri

    def parts(self) -> list[str]:
        return [n for n in self.ws.list(suffix=PART_SUFFIX) if n.startswith(PART_PREFIX)]

    def write_part(self, table: pa.Table) -> str | None:
        """Commit ``table`` as one part; None when the same part was already committed."""
        table = table.select(self.schema.names).cast(self.schema)
        key = stable_hash_many(
            f"{i}#{a}" for i, a in zip(table["request_id"].to_pylist(), table["attempt"].to_pylist()))
        name = f"{PART_PREFIX}{key}{PART_SUFFIX}"
        return name if self.ws.write_parquet(name, table, exclusive=True) else None

    def read_all(self, columns: list[str] | None = None) -> pa.Table:
        """Every committed row, duplicates included."""
        parts = self.parts()
        schema = self.schema if columns is None else pa.schema([self.schema.field(c) for c in columns])
        if not parts:
            return schema.empty_table()
        ds = pads.dataset(self.ws.file_paths(parts), schema=self.schema, filesystem=self.ws.fs, format="parquet")
        t = ds.to_table(columns=columns)
        if "attempt" in t.column_names:  # parts written before attempts were recorded: attempt 1
            t = t.set_column(t.schema.get_field_index("attempt"), "attempt", pc.fill_null(t["attempt"], 1))
        return t

    def iter_batches(self, columns: list[str]):
        """Every committed row, duplicates included, a record batch at a time (bounded memory)."""
        parts = self.parts()
        if not parts:
            return
        ds = pads.dataset(self.ws.file_paths(parts), schema=self.schema, filesystem=self.ws.fs, format="parquet")
        for b in ds.to_batches(columns=columns):
            if "attempt" in columns:  # parts written before attempts were recorded: attempt 1
                i = b.schema.get_field_index("attempt")
                b = b.set_column(i, "attempt", pc.fill_null(b.column(i), 1))
            yield b

    def read(self, columns: list[str] | None = None) -> pa.Table:
        """One row per request id: a successful answer over an error, then the latest attempt."""
        need = list(dict.fromkeys([*(columns or self.schema.names), "request_id", "parse_status", "attempt"]))
        t = self.read_all(need)
        if t.num_rows:
            t = best_per_request(t)
        return t.select(columns) if columns else t

    def __len__(self) -> int:
        return self.read(["request_id"]).num_rows


def best_per_request(t: pa.Table) -> pa.Table:
    is_error = pc.equal(t["parse_status"], PARSE_ERROR).cast(pa.int8())
    t = t.append_column("_err", is_error).append_column("_neg_attempt", pc.negate(t["attempt"]))
    t = t.sort_by([("request_id", "ascending"), ("_err", "ascending"), ("_neg_attempt", "ascending")])
    ids = t["request_id"].combine_chunks()
    first = np.ones(len(ids), dtype=bool)
    if len(ids) > 1:
        first[1:] = pc.not_equal(ids.slice(1), ids.slice(0, len(ids) - 1)).to_numpy(zero_copy_only=False)
    return t.filter(pa.array(first)).drop_columns(["_err", "_neg_attempt"])
