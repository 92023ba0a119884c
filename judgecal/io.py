"""Whole-or-nothing local writes for the small study files (the response parts have their own store)."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Callable

import pyarrow as pa
import pyarrow.parquet as pq


def atomic_write(path: Path, write: Callable[[str], None]) -> None:
    """Write through a temporary file in the same folder, then rename: whole or absent."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    os.close(fd)
    try:
        write(tmp)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def write_parquet(table: pa.Table, path: Path) -> None:
    atomic_write(path, lambda tmp: pq.write_table(table, tmp))


def write_json(obj, path: Path) -> None:
    def w(tmp):
        with open(tmp, "w", encoding="utf-8") as fh:
            json.dump(obj, fh, indent=2, default=float)

    atomic_write(path, w)


def write_text(text: str, path: Path) -> None:
    atomic_write(path, lambda tmp: Path(tmp).write_text(text, encoding="utf-8"))
