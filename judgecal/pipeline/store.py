"""A Parquet dataset of response parts with atomic commits, on any pyarrow filesystem.

A part is written under ``_tmp/`` and then moved to ``part-*.parquet`` (a rename on a
local disk; on object storage a single PUT is already all-or-nothing), so a reader never
sees half a part. Leftover ``_tmp`` files from a killed run are ignored and swept.
URIs may be local paths or ``s3://bucket/prefix`` (pyarrow resolves the filesystem).
"""

from __future__ import annotations

import uuid

import pyarrow as pa
import pyarrow.dataset as pads
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from judgecal.schemas import RESPONSES


class PartStore:
    def __init__(self, uri: str, schema: pa.Schema = RESPONSES):
        self.fs, self.root = pafs.FileSystem.from_uri(uri) if "://" in uri else (pafs.LocalFileSystem(), _abs(uri))
        self.uri = uri
        self.schema = schema
        self.fs.create_dir(self.root, recursive=True)

    def _parts(self) -> list[str]:
        sel = pafs.FileSelector(self.root, allow_not_found=True)
        return sorted(
            i.path for i in self.fs.get_file_info(sel) if i.type == pafs.FileType.File and i.base_name.startswith("part-")
        )

    def write_part(self, table: pa.Table) -> str:
        table = table.select(self.schema.names).cast(self.schema)
        name = f"part-{uuid.uuid4().hex}.parquet"
        tmp_dir = f"{self.root}/_tmp"
        self.fs.create_dir(tmp_dir, recursive=True)
        tmp, final = f"{tmp_dir}/{name}", f"{self.root}/{name}"
        if isinstance(self.fs, pafs.LocalFileSystem):
            pq.write_table(table, tmp, filesystem=self.fs)
            self.fs.move(tmp, final)
        else:
            pq.write_table(table, final, filesystem=self.fs)
        return final

    def sweep_tmp(self) -> int:
        info = self.fs.get_file_info(pafs.FileSelector(f"{self.root}/_tmp", allow_not_found=True))
        for i in info:
            self.fs.delete_file(i.path)
        return len(info)

    def read(self, columns: list[str] | None = None) -> pa.Table:
        parts = self._parts()
        if not parts:
            return self.schema.empty_table() if columns is None else self.schema.empty_table().select(columns)
        return pads.dataset(parts, schema=self.schema, filesystem=self.fs, format="parquet").to_table(columns=columns)

    def committed_ids(self) -> pa.Array:
        return self.read(["request_id"])["request_id"].combine_chunks()

    def __len__(self) -> int:
        return self.read(["request_id"]).num_rows


def _abs(path: str) -> str:
    import os

    return os.path.abspath(path)
