"""The response parts of one collection: exactly-once commits on any workspace.

A part's name is a hash of its rows' request ids and attempt numbers, and it is created
with an exclusive write (``os.link`` locally, ``If-None-Match: *`` on S3). So a retried Ray
task or a second driver that computed the same block never commits it twice, and a reader
never sees half a part. Readers still deduplicate by ``request_id`` (two drivers with
different views of what was done can cut different blocks): per id the best row wins, a
successful answer over an error, then the latest attempt.

A part that cannot be read (truncated, garbage, corrupt pages) or is not a response part
(another schema) is named in one line and moved aside into ``_quarantine/`` (never misread,
never silently skipped): at collect the requests it held are computed again in the same
run; any other stage refuses in one line, and the next collect recomputes them. Each part's
footer is checked once per process (parts never change: their names are their content).
"""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as pads
import pyarrow.parquet as pq

from judgecal.errors import InputError
from judgecal.ids import stable_hash_many
from judgecal.schemas import PARSE_ERROR, RESPONSES
from judgecal.workspace import Workspace

PART_PREFIX, PART_SUFFIX = "part-", ".parquet"
# parts are written with page checksums (judgecal.workspace.parquet_bytes) and read verifying
# them: a page changed on disk is a corrupt part, moved aside, never other values (parts
# written before checksums carry none and are read as they are)
CHECKED_PARQUET = pads.ParquetFileFormat(
    default_fragment_scan_options=pads.ParquetFragmentScanOptions(page_checksum_verification=True))
QUARANTINE = "_quarantine"  # unreadable or foreign parts, moved aside
_CHECKED: set[str] = set()  # parts (full paths) whose footer and schema were read in this process
_CHECKED_LOCK = threading.Lock()
REQUIRED = ("request_id", "parse_status")  # what every reader keys on; other columns may be absent (null)


class BadPart(InputError):
    """A part that could not be read or is not a response part; it was moved aside.
    ``note``: what was moved, without the advice (collect goes on and computes it again)."""

    def __init__(self, where: str, moved: str, more: str):
        super().__init__(where, f"{moved}{more}; rerun `judgecal collect` to compute its requests again")
        self.note = f"{where}: {moved}{more}"


class PartStore:
    def __init__(self, workspace: Workspace, schema: pa.Schema = RESPONSES):
        self.ws = workspace
        self.schema = schema

    @property
    def uri(self) -> str:
        return self.ws.uri

    def parts(self) -> list[str]:
        return [n for n in self.ws.list(suffix=PART_SUFFIX) if n.startswith(PART_PREFIX)]

    # -- unreadable parts ------------------------------------------------------------------
    def sweep(self, log) -> list[str]:
        """Check every part; move the bad ones aside, one line each through ``log``. Returns
        their names (collect calls this first: what they held is computed again)."""
        moved = []
        for name, why in self._check(self.parts()):
            moved.append(name)
            log(f"[collect] {self._quarantine(name, why)}; its requests are computed again")
        return moved

    def readable_parts(self) -> list[str]:
        """The parts, each checked (footer and schema); a bad one is moved aside and refused."""
        parts = self.parts()
        bad = self._check(parts)
        if bad:
            name, why = bad[0]
            more = f" (and {len(bad) - 1} more)" if len(bad) > 1 else ""
            for other, reason in bad[1:]:
                self._quarantine(other, reason)
            raise BadPart(self.ws.join(name), self._quarantine(name, why, named=False), more)
        return parts

    def _check(self, names: list[str]) -> list[tuple[str, str]]:
        todo = [n for n in names if self.ws.join(n) not in _CHECKED]
        if not todo:
            return []
        with ThreadPoolExecutor(max_workers=min(16, len(todo))) as pool:  # S3: one GET of each footer
            problems = list(pool.map(self._problem, todo))
        with _CHECKED_LOCK:
            _CHECKED.update(self.ws.join(n) for n, p in zip(todo, problems) if p is None)
        return [(n, p) for n, p in zip(todo, problems) if p is not None and p != _GONE]

    def _problem(self, name: str) -> str | None:
        """Why ``name`` is not a readable response part, or None."""
        try:
            with self.ws.fs.open_input_file(self.ws.file_paths([name])[0]) as f:
                schema = pq.ParquetFile(f).schema_arrow
        except FileNotFoundError:
            return _GONE  # moved or deleted since it was listed
        except pa.ArrowInvalid as e:
            return f"not a readable Parquet file ({_first_line(e)})"
        except OSError as e:  # the storage did not answer, or (pyarrow says both alike) the footer is corrupt
            schema = self._schema_from_bytes(name, e)
            if isinstance(schema, str):
                return schema
        missing = [c for c in REQUIRED if c not in schema.names]
        if missing:
            return f"not a response part (no column {' or '.join(missing)})"
        for f in self.schema:
            if f.name in schema.names and not _same_type(schema.field(f.name).type, f.type):
                return f"not a response part (column {f.name} is {schema.field(f.name).type}, not {f.type})"
        return None

    def _schema_from_bytes(self, name: str, error: OSError) -> pa.Schema | str:
        """A footer read failed with an OSError: pyarrow raises one for a corrupt footer ("Couldn't
        deserialize thrift") as for a storage that did not answer. The bytes are read again whole:
        if they read and do not parse, the part is unreadable (it was refused as a "storage error"
        at every rerun, never moved aside: a user's finding); if they do not read, the storage is
        to blame. Returns the schema, or why the part is unreadable."""
        try:
            with self.ws.fs.open_input_file(self.ws.file_paths([name])[0]) as f:
                data = f.read()
        except FileNotFoundError:
            return _GONE
        except OSError:
            raise InputError(self.ws.join(name), f"storage error ({_first_line(error)})") from None
        try:
            return pq.ParquetFile(pa.BufferReader(data)).schema_arrow
        except (pa.ArrowException, OSError) as e:
            return f"not a readable Parquet file ({_first_line(e)})"

    def _quarantine(self, name: str, why: str, named: bool = True) -> str:
        base = name.rsplit("/", 1)[-1]
        self.ws.move(name, f"{QUARANTINE}/{base}")
        return (f"{self.ws.join(name)}: " if named else "") + f"{why}; moved to {self.ws.join(QUARANTINE)}/"

    def _corrupt(self, parts: list[str], columns, error: Exception) -> BadPart:
        """A read failed inside a part whose footer was fine (corrupt pages): find the part(s),
        move them aside, and say so; a failure no single part repeats is a storage error."""
        bad = []
        for name in parts:
            for _ in range(2):  # once more before blaming the part
                try:
                    pq.read_table(self.ws.file_paths([name])[0], columns=columns, filesystem=self.ws.fs,
                                  page_checksum_verification=True)
                    break
                except (pa.ArrowException, OSError) as e:
                    why = f"a corrupt part ({_first_line(e)})"
            else:
                bad.append((name, why))
        if not bad:
            return InputError(self.ws.uri, f"storage error while reading the parts ({_first_line(error)})")
        for other, reason in bad[1:]:
            self._quarantine(other, reason)
        name, why = bad[0]
        more = f" (and {len(bad) - 1} more)" if len(bad) > 1 else ""
        return BadPart(self.ws.join(name), self._quarantine(name, why, named=False), more)

    def write_part(self, table: pa.Table) -> str | None:
        """Commit ``table`` as one part; None when the same part was already committed."""
        table = table.select(self.schema.names).cast(self.schema)
        key = stable_hash_many(
            f"{i}#{a}" for i, a in zip(table["request_id"].to_pylist(), table["attempt"].to_pylist()))
        name = f"{PART_PREFIX}{key}{PART_SUFFIX}"
        if self.ws.write_parquet(name, table, exclusive=True):
            return name
        if self._holds_ids(name, table["request_id"]):
            return None  # this block, committed before (a rerun, or another replica at the same moment)
        # another file under this block's name (a part copied over it): every rerun computed the block,
        # found the name taken and committed nothing, never ending (a user's finding)
        self._quarantine(name, "not the part its name says (it holds other requests)")
        return name if self.ws.write_parquet(name, table, exclusive=True) else None

    def _holds_ids(self, name: str, ids: pa.ChunkedArray) -> bool:
        """Whether the part ``name`` holds exactly the requests ``ids`` (its rows' attempts aside:
        parts from before attempts were recorded are read without them)."""
        try:
            held = pq.read_table(self.ws.file_paths([name])[0], columns=["request_id"], filesystem=self.ws.fs)
        except FileNotFoundError:
            return False
        except (pa.ArrowException, OSError):
            return False  # unreadable: not this block's part
        return sorted(held["request_id"].to_pylist()) == sorted(ids.to_pylist())

    def read_all(self, columns: list[str] | None = None) -> pa.Table:
        """Every committed row, duplicates included."""
        parts = self.readable_parts()
        schema = self.schema if columns is None else pa.schema([self.schema.field(c) for c in columns])
        if not parts:
            return schema.empty_table()
        ds = pads.dataset(self.ws.file_paths(parts), schema=self.schema, filesystem=self.ws.fs, format=CHECKED_PARQUET)
        try:
            t = ds.to_table(columns=columns)
        except (pa.ArrowException, OSError) as e:
            raise self._corrupt(parts, columns, e) from None
        if "attempt" in t.column_names:  # parts written before attempts were recorded: attempt 1
            t = t.set_column(t.schema.get_field_index("attempt"), "attempt", pc.fill_null(t["attempt"], 1))
        return t

    def iter_batches(self, columns: list[str]):
        """Every committed row, duplicates included, a record batch at a time (bounded memory)."""
        parts = self.readable_parts()
        if not parts:
            return
        ds = pads.dataset(self.ws.file_paths(parts), schema=self.schema, filesystem=self.ws.fs, format=CHECKED_PARQUET)
        batches = ds.to_batches(columns=columns)
        while True:
            try:
                b = next(batches)
            except StopIteration:
                return
            except (pa.ArrowException, OSError) as e:
                raise self._corrupt(parts, columns, e) from None
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


_GONE = "\0gone"


def _first_line(e: BaseException) -> str:
    return (str(e).strip().splitlines() or [type(e).__name__])[0][:200]


def _same_type(got: pa.DataType, want: pa.DataType) -> bool:
    if got == want:
        return True
    strings = (pa.types.is_string, pa.types.is_large_string)
    return any(f(got) for f in strings) and any(f(want) for f in strings)


def best_per_request(t: pa.Table) -> pa.Table:
    """The best row per ``request_id``, sorted by id. The order is found on the three key
    columns alone and the rows are taken once (a sort of the whole table copied every column
    twice: 10^6 responses, +300 MB; benchmarks/bench_fit_scale.py)."""
    is_error = pc.equal(t["parse_status"], PARSE_ERROR).cast(pa.int8())
    keys = pa.table({"request_id": t["request_id"], "_err": is_error, "_neg_attempt": pc.negate(t["attempt"])})
    order = pc.sort_indices(keys, [("request_id", "ascending"), ("_err", "ascending"), ("_neg_attempt", "ascending")])
    ids = keys["request_id"].take(order).combine_chunks()
    del keys
    first = np.ones(len(ids), dtype=bool)
    if len(ids) > 1:
        first[1:] = pc.not_equal(ids.slice(1), ids.slice(0, len(ids) - 1)).to_numpy(zero_copy_only=False)
    return t.take(order.filter(pa.array(first)))
