"""Loaders from each dataset's published layout to the canonical items table.

SummEval and HANNA ship inside the package (both MIT; provenance files beside the data);
USR and any other set are read from a path the user gives. The generic loader reads a
user's CSV / JSONL / Parquet through a column mapping.

Every text file is read as UTF-8 (a byte-order mark is accepted); a file in another encoding
stops with one line naming the file, the line and the byte offset of the first byte that is
not UTF-8. Messages count rows from 1: "row N" is the N-th data record (a CSV's header is
not a record), "line N" a line of the file (JSON syntax errors).
"""

from __future__ import annotations

import gzip
import json
import math
import re
import sys
from importlib import resources
from pathlib import Path
from typing import Callable

import numpy as np
import pyarrow as pa
import pyarrow.csv
import pyarrow.parquet as pq

from judgecal.datasets.columns import Columns, row_filter
from judgecal.datasets.items import ItemRecord, TargetSpec, build_items
from judgecal.datasets.text import blank, storable
from judgecal.datasets.text import column_label as _column
from judgecal.errors import InputError

BUNDLED = "bundled"
BUNDLED_PATHS = (None, "", BUNDLED)  # a data path that names judgecal's own copy
_BUNDLED_FILES = {
    "summeval": "summeval_mteb_test_100.json.gz",
    "hanna": "hanna_stories_ratings.jsonl.gz",
}
# Scales of the published annotations (USR's: its default target's; the others below).
SCALES = {"summeval": (1.0, 5.0), "hanna": (1.0, 5.0), "usr": (1.0, 5.0)}
# USR rates on three scales (Mehri & Eskenazi, 2020): its 1-3 "engaging" read as 1-5 was mapped
# onto the judge's scale wrong without a word (a second reader's finding)
USR_SCALES = {"overall": (1.0, 5.0), "engaging": (1.0, 3.0), "natural": (1.0, 3.0), "maintains_context": (1.0, 3.0),
              "understandable": (0.0, 1.0), "uses_knowledge": (0.0, 1.0)}
TASKS = {"summeval": "summary", "hanna": "story", "usr": "dialogue"}
# Each dataset's default target, as its paper uses it. HANNA: the mean of the six criteria,
# each already the mean of the three raters.
DEFAULT_TARGETS = {"summeval": ("relevance",), "usr": ("overall",),
                   "hanna": ("coherence", "complexity", "empathy", "engagement", "relevance", "surprise")}


def known_scale(name: str, targets) -> tuple[float, float] | None:
    """The scale a bundled dataset's ``targets`` are labelled on, or None where it is not one
    known scale (a USR rating of another name, or ratings of several scales averaged)."""
    if name != "usr":
        return SCALES.get(name)
    found = {USR_SCALES.get(t) for t in targets or DEFAULT_TARGETS[name]}
    return found.pop() if len(found) == 1 and None not in found else None


def check_dataset_name(name: str, generic: bool = True) -> None:
    """A dataset name judgecal reads (``generic``: a user's file, read by :func:`load_generic`)."""
    if name not in _PARSERS and not (generic and name == "generic"):
        raise InputError("[dataset].name", f"unknown dataset {name!r} (known: {', '.join(_PARSERS)}, generic)")


def _read_text(path: Path) -> str:
    """A text file (gzipped or not) as UTF-8, without its byte-order mark if it has one."""
    try:
        data = gzip.decompress(path.read_bytes()) if path.suffix == ".gz" else path.read_bytes()
    except IsADirectoryError:
        raise InputError(str(path), "is a folder, not a file") from None
    except FileNotFoundError:
        raise InputError(str(path), "no such file") from None
    except (OSError, EOFError) as e:
        raise InputError(str(path), f"cannot be read ({e})") from None
    if data.startswith((b"\xff\xfe", b"\xfe\xff")):  # Excel's "Unicode text" (its byte 0xff was named alone)
        raise InputError(str(path), "is UTF-16 (it starts with a UTF-16 byte-order mark); save the file as UTF-8")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        line = data.count(b"\n", 0, e.start) + 1
        raise InputError(f"{path} line {line}", f"is not UTF-8 (byte 0x{data[e.start]:02x} at byte offset {e.start}); "
                         "save the file as UTF-8") from None


def _resolve(name: str, path: str | None) -> Path:
    if path in BUNDLED_PATHS:
        if name not in _BUNDLED_FILES:
            raise InputError(f"dataset {name}", "is not bundled; give its path")
        return Path(str(resources.files("judgecal.datasets").joinpath("data", _BUNDLED_FILES[name])))
    p = Path(path)
    if not p.exists():
        raise InputError(str(p), "no such file")
    return p


def _read_json(p: Path, keys_once: bool = False):
    """``keys_once``: an object that names one key twice is refused (a user's rows)."""
    try:
        return json.loads(_read_text(p), object_pairs_hook=_keys_once if keys_once else None)
    except json.JSONDecodeError as e:
        raise InputError(f"{p} line {e.lineno}", f"not valid JSON ({e.msg})") from None
    except _DuplicateKey as e:
        raise InputError(str(p), f"an object gives key {e.args[0]!r} twice (a column of one name twice)") from None


_JSON_KINDS = {str: "string", int: "number", float: "number", list: "array", bool: "boolean", type(None): "null"}


def _read_jsonl(p: Path, keys_once: bool = False) -> list[dict]:
    """JSON Lines: one object per line (blank lines skipped); ``keys_once``: an object that names
    one key twice is refused."""
    text = _read_text(p)
    if text.lstrip().startswith("["):
        raise InputError(str(p), "holds a JSON array, but a .jsonl file holds one JSON object per line "
                         "(write one object per line, or name the file .json)")
    rows = []
    for n, line in enumerate(text.splitlines(), 1):
        if line.strip():
            try:
                row = json.loads(line, object_pairs_hook=_keys_once if keys_once else None)
            except json.JSONDecodeError as e:
                raise InputError(f"{p} line {n}", f"not valid JSON ({e.msg})") from None
            except _DuplicateKey as e:
                raise InputError(f"{p} line {n}", f"gives key {e.args[0]!r} twice (a column of one name "
                                 "twice)") from None
            if not isinstance(row, dict):
                raise InputError(f"{p} line {n}", f"is a JSON {_JSON_KINDS.get(type(row), 'value')}, not an object "
                                 "(a .jsonl file holds one object per line)")
            rows.append(row)
    return rows


def _summeval(p: Path) -> list[ItemRecord]:
    data = _read_json(p)
    rows = data["rows"] if isinstance(data, dict) and "rows" in data else data
    records = []
    for i, row in enumerate(rows):
        row = row.get("row", row)
        try:
            doc, summaries = str(row["id"]), row["machine_summaries"]
            for j, summary in enumerate(summaries):
                human = {c: float(row[c][j]) for c in ("relevance", "coherence", "fluency", "consistency")}
                records.append(ItemRecord(f"{doc}/{j}", doc, "summary", row["text"], summary, human))
        except (KeyError, IndexError, TypeError) as e:
            raise InputError(f"{p} row {i + 1}", f"malformed SummEval row ({e!r})") from None
    return records


def _hanna(p: Path) -> list[ItemRecord]:
    records = []
    for i, row in enumerate(_read_jsonl(p)):
        try:
            human = {c: float(np.mean(v)) for c, v in row["ratings"].items()}
            # Stories are grouped by their writing prompt (one prompt, 11 systems).
            group = str(row.get("human_reference_story_id", row["prompt"]))
            records.append(ItemRecord(str(row["story_id"]), group, "story", row["prompt"], row["story"], human))
        except (KeyError, TypeError) as e:
            raise InputError(f"{p} row {i + 1}", f"malformed HANNA row ({e!r})") from None
    return records


def _usr(p: Path) -> list[ItemRecord]:
    records = []
    for i, ctx in enumerate(_read_json(p)):
        try:
            for j, resp in enumerate(ctx["responses"]):
                human = {
                    k.lower().replace(" ", "_"): float(np.mean(v))
                    for k, v in resp.items()
                    if isinstance(v, list) and v and all(isinstance(x, (int, float)) for x in v)
                }
                source = f"Facts: {ctx.get('fact', '').strip()}\n\nDialogue:\n{ctx['context'].strip()}"
                records.append(ItemRecord(f"usr{i}/{j}", f"usr{i}", "dialogue", source, resp["response"].strip(), human))
        except (KeyError, TypeError, AttributeError) as e:  # "fact": null was a traceback (a reader's finding)
            raise InputError(f"{p} row {i + 1}", f"malformed USR row ({e!r})") from None
    return records


_PARSERS: dict[str, Callable[[Path], list[ItemRecord]]] = {"summeval": _summeval, "hanna": _hanna, "usr": _usr}


def load_dataset(name: str, path: str | None = None, target: TargetSpec | None = None) -> pa.Table:
    """Load a named dataset (``summeval``, ``hanna``, ``usr``) to the items table."""
    check_dataset_name(name, generic=False)
    p = _resolve(name, path)
    try:
        records = _PARSERS[name](p)
    except InputError as e:
        if path in BUNDLED_PATHS:
            raise
        # [dataset] name defaults to summeval: a user's own file given by path alone is read as
        # SummEval's JSON and fails on a line that is fine (a user's finding)
        raise InputError(e.where, f"{e.problem} (read as the {name} dataset, [dataset].name; a file of your own "
                         "with its own columns is name = \"generic\")") from None
    if target is None:
        target = TargetSpec(DEFAULT_TARGETS[name], *SCALES[name])
    return build_items(records, target, str(p))


DELIMITERS = {".csv": ",", ".tsv": "\t", ".tab": "\t"}  # by extension; [dataset] delimiter for any other


def _read_table(p: Path, text_columns=(), delimiter: str | None = None, records: str | None = None) -> Columns:
    """A user's file as ``{column: values}`` (Python values, one per data record; nested fields
    by path, :class:`judgecal.datasets.columns.Columns`): delimited text (CSV, TSV, or any
    ``delimiter``), JSON (an array of objects, JSON Lines, or an object whose array of records
    ``records`` names: told apart by content, not by the extension) or Parquet.
    ``text_columns`` are read as text from delimited text (ids such as ``007`` stay text)."""
    if not p.exists():
        raise InputError(str(p), "no such file")
    if p.is_dir():
        raise InputError(str(p), "is a folder, not a file")
    suffix = p.suffix.lower()
    ragged: list = []  # pyarrow.csv.InvalidRow: its error names no line (it knows none where values span lines)
    try:
        if suffix == ".parquet":
            _unique_columns(pq.read_schema(p).names, p)
            cols = pq.read_table(p).to_pydict()
        elif suffix in DELIMITERS or delimiter:
            plain = _read_text(p)  # checked UTF-8, byte-order mark removed
            # Excel's separator line was read as the header (a user's finding)
            if m := re.match(r"sep=(.)\r?\n", plain):
                raise InputError(f"{p} line 1", f"is Excel's {m[0].rstrip(chr(13) + chr(10))!r} line, not a header: "
                                 "delete it"
                                 + ("" if m[1] == (delimiter or DELIMITERS.get(suffix)) else
                                    f" and give [dataset].delimiter = {json.dumps(m[1])}"))
            text = plain.encode("utf-8")
            types = {c: pa.string() for c in text_columns}
            table = pyarrow.csv.read_csv(pa.BufferReader(text),  # quoted values may span lines (criteria)
                                         parse_options=pyarrow.csv.ParseOptions(
                                             delimiter=delimiter or DELIMITERS[suffix], newlines_in_values=True,
                                             invalid_row_handler=lambda row: ragged.append(row) or "error"),
                                         convert_options=pyarrow.csv.ConvertOptions(column_types=types))
            _unique_columns(table.column_names, p)
            if table.num_columns == 1 and (hint := _separator_hint(p, delimiter)):
                raise InputError(str(p), f"reads as one column{hint}")
            # after the separator hint: a quoted semicolon file read with commas is that (a second reader's case)
            _check_quoted_values(p, plain, delimiter or DELIMITERS[suffix])  # what pyarrow read leniently
            cols = _without_blank_end_rows(table.to_pydict(), p)
        elif suffix in (".jsonl", ".json", ".ndjson"):
            rows = _json_records(p, records)
            names = list(dict.fromkeys(k for r in rows for k in r))
            cols = {k: [r.get(k) for r in rows] for k in names}
        else:
            raise InputError(str(p), "unknown file type (use .csv, .tsv, .jsonl, .json or .parquet, or give "
                             "[dataset].delimiter for delimited text)")
    except (pa.ArrowInvalid, OSError) as e:
        if ragged:
            where, problem = _ragged_record(p, text, ragged[0])
            raise InputError(where, problem + _separator_hint(p, delimiter)) from None
        raise InputError(str(p), f"cannot be read ({str(e).splitlines()[0] if str(e) else type(e).__name__})"
                         + _separator_hint(p, delimiter)) from None
    if not cols or not len(next(iter(cols.values()))):
        raise InputError(str(p), "has no data rows")
    return Columns(cols, str(p))


def _without_blank_end_rows(cols: dict, p: Path) -> dict:
    """Rows at the file's end with every field empty (Excel's ",,,," rows) left out, with a
    note: they were refused as "row 61: column 'id' is empty" (a user's finding). Only at the
    end, so every other row keeps its number."""
    rows = len(next(iter(cols.values()), []))
    end = rows
    while end and all(v[end - 1] is None or v[end - 1] == "" for v in cols.values()):
        end -= 1
    if end == rows or not end:
        return cols
    _note(f"{p}: {rows - end} row{'s' if rows - end > 1 else ''} at its end with every field empty left out "
          f"(rows {end + 1}-{rows})" if rows - end > 1 else f"{p}: row {rows} at its end, every field empty, left out")
    return {k: v[:end] for k, v in cols.items()}


def _check_quoted_values(p: Path, text: str, delimiter: str) -> None:
    """Refuse a value that starts with a quote and goes on after its closing quote: pyarrow reads
    ``"Stay," she said.`` as ``Stay, she said.`` (a TSV story was judged altered, without a
    word: a user's finding). Python's csv reader in strict mode finds it, with its line."""
    import csv
    import io

    if '"' not in text:
        return
    limit = csv.field_size_limit()
    csv.field_size_limit(2**31 - 1)  # a story is longer than csv's 128 KiB default
    reader = csv.reader(io.StringIO(text, newline=""), delimiter=delimiter, strict=True)
    ended = 0  # the line the last whole record ended on
    try:
        for _ in reader:
            ended = reader.line_num
    except csv.Error as e:
        if "end of data" in str(e):  # pyarrow took the rest of the file into one value (a second reader's case)
            raise InputError(f"{p} line {ended + 1}", "a quote opened in this record is never closed; close it, or "
                             "double a quote inside a quoted value") from None
        raise InputError(f"{p} line {reader.line_num}", "a value starts with a quote and goes on after its closing "
                         "quote (read so, its quotes would be dropped); quote the whole value, with its own quotes "
                         'doubled ("""Stay,"" she said.")') from None
    finally:
        csv.field_size_limit(limit)


def _ragged_record(p: Path, text: bytes, row) -> tuple[str, str]:
    """(where, problem) of a delimited record with more or fewer fields than the header: its line
    is found by its text (pyarrow's error quoted the text alone, a user's finding at row 3000)."""
    # at a line's start past the header (a short record's text may lie inside another line)
    at = text.find(b"\n" + row.text.encode("utf-8"), text.find(b"\n"))
    line = text.count(b"\n", 0, at + 1) + 1
    where = f"{p} line {line}" if at >= 0 else str(p)
    shown = row.text if len(row.text) <= 60 else row.text[:60] + "..."
    return where, (f"{row.actual_columns} fields where the header has {row.expected_columns} ({shown!r}); a value "
                   "holding the delimiter, a quote or a line break is quoted, with its own quotes doubled")


def _separator_hint(p: Path, delimiter: str | None) -> str:
    """Where delimited text does not parse with the separator used and its header line holds
    another one (a semicolon CSV): which one, and how to say so."""
    if delimiter or p.suffix.lower() not in DELIMITERS:
        return ""
    try:
        with open(p, encoding="utf-8-sig", errors="replace") as f:
            header = f.readline()
    except OSError:
        return ""
    used = DELIMITERS[p.suffix.lower()]
    other = next((d for d in (";", "\t", "|", ",") if d != used and d in header and used not in header), None)
    if other is None:
        return ""
    name = {";": "';'", "\t": "tabs", "|": "'|'", ",": "','"}[other]
    return (f"; its header line is separated by {name}, not {used!r}: give [dataset].delimiter = {json.dumps(other)} "
            "(a PRISM dataset), or save it with commas as .csv or with tabs as .tsv")


def _json_records(p: Path, records: str | None) -> list[dict]:
    """The records of a JSON file, whatever its extension says: an array of objects, JSON Lines,
    or one object holding them at the path ``records`` (``"data"``, ``"results.items"``). A
    file whose content is not what its extension says is read, with one note saying so."""
    text = _read_text(p)
    start = text.lstrip()[:1]
    if start == "[" or records:
        if records is None and p.suffix.lower() != ".json":
            _note(f"{p} holds a JSON array of records, not JSON Lines; read as an array")
        data = _read_json(p, keys_once=True)
        if records:
            for k in records.split("."):
                if not isinstance(data, dict) or k not in data:
                    have = ", ".join(k2 for k2, v in data.items() if isinstance(v, (list, dict))) \
                        if isinstance(data, dict) else "none"
                    raise InputError(f"{p}", f"[dataset].records {records!r}: no key {k!r} here (keys holding "
                                     f"records or objects: {have or 'none'})")
                data = data[k]
        if not isinstance(data, list):
            raise InputError(str(p), f"[dataset].records {records!r} holds a JSON "
                             f"{_JSON_KINDS.get(type(data), 'object')}, not an array of records")
        for i, row in enumerate(data):
            if not isinstance(row, dict):
                raise InputError(f"{p} row {i + 1}", f"is a JSON {_JSON_KINDS.get(type(row), 'value')}, not an object")
        return data
    try:
        whole = json.loads(text)
    except json.JSONDecodeError:
        whole = None  # several values: JSON Lines (each line checked below)
    if isinstance(whole, dict) and any(isinstance(v, list) and v and isinstance(v[0], dict) for v in whole.values()):
        arrays = ", ".join(k for k, v in whole.items() if isinstance(v, list))
        raise InputError(str(p), f"holds one JSON object with arrays of records ({arrays}); name the one to read "
                         f"with [dataset].records (e.g. records = \"{arrays.split(', ')[0]}\")")
    if p.suffix.lower() == ".json" and whole is None:
        _note(f"{p} holds JSON Lines (one object per line), not one JSON value; read as JSON Lines")
    return _read_jsonl(p, keys_once=True)


_NOTED: set[str] = set()  # each stage reads the data again: a note came once per stage (4 times in a run)


def _note(message: str) -> None:
    if message not in _NOTED:
        _NOTED.add(message)
        print(f"judgecal: note: {message}", file=sys.stderr, flush=True)


def _unique_columns(names: list[str], p: Path) -> None:
    """Two columns of one name: which one a mapping reads would be an accident of the reader."""
    seen = set()
    for i, name in enumerate(names):
        if name in seen:
            raise InputError(str(p), f"column {name!r} appears twice in the header (columns {names.index(name) + 1} "
                             f"and {i + 1}); rename one")
        seen.add(name)


def _keys_once(pairs: list) -> dict:
    """``json.loads`` hook: an object that gives one key twice (JSON keeps the last silently)."""
    out = {}
    for k, v in pairs:
        if k in out:
            raise _DuplicateKey(k)
        out[k] = v
    return out


class _DuplicateKey(ValueError):
    pass


def _num_rows(cols: dict[str, list]) -> int:
    return len(next(iter(cols.values())))


def missing_columns(where: str, missing: list[str], have: list[str]) -> InputError:
    """The refusal of a file lacking columns, naming what it has, and a column that differs from
    a missing one only in case or surrounding spaces (a header's "Human " for human)."""
    near = [f"{h!r} for {m!r}" for m in missing for h in have if h != m and h.strip().casefold() == m.casefold()]
    hint = f"; {', '.join(near)} differ{'s' * (len(near) == 1)} only in case or spaces" if near else ""
    return InputError(where, f"missing column(s) {', '.join(missing)} (it has: {', '.join(have[:20])}){hint}")


def cell_id(value, where: str, column: str, what: str) -> str:
    """An id cell as text; empty or null ids are refused (never the string "None")."""
    if value is None or isinstance(value, float) and math.isnan(value) or not str(value).strip():
        raise InputError(where, f"{_column(column, what)} is empty")
    if isinstance(value, (list, dict, bool)):
        raise InputError(where, f"{_column(column, what)} holds {value!r}, not an id")
    if isinstance(value, float) and value.is_integer():
        # 1012.0 is the id 1012: a JSON row's corrected label under 1012.0 was a second item beside
        # 1012, and a Parquet column of ids with one gap (read as floats) renamed every item (a user's finding)
        value = int(value)
    return storable(str(value), where, column, what)


def cell_text(value, where: str, column: str, what: str, optional: bool = False) -> str:
    """A text cell: numbers (or lists, ...) where text is expected are refused, naming the column;
    so is text of whitespace or invisible characters alone, unless ``optional``, and text that
    cannot be stored (a lone surrogate, NUL)."""
    if value is None or isinstance(value, str) and blank(value):  # whitespace: a criterion "   " was
        if optional:                                                # verified and calibrated (a user's finding)
            return value or ""
        shown = "" if not value else " (whitespace only)" if not value.strip() else \
            " (invisible characters only: zero-width, byte-order or direction marks)"
        raise InputError(where, f"{_column(column, what)} is empty{shown}")
    if not isinstance(value, str):
        kind = "a number" if isinstance(value, (int, float)) else type(value).__name__
        raise InputError(where, f"{_column(column, what)} holds {kind} ({value!r}), not text")
    return storable(value, where, column, what)


GENERIC_COLUMNS = ("item_id", "group_id", "content", "source")


NO_GROUPS = "none"  # group_by: every item its own group (one response per prompt)


def load_generic(path: str, columns: dict[str, str], target: TargetSpec, task: str = "summary",
                 delimiter: str | None = None, records: str | None = None, where: dict | None = None,
                 group_by: str | None = None) -> pa.Table:
    """Read a user's table. ``columns`` maps canonical names (item_id, group_id, source, content)
    to the file's columns or column paths (``"annotations.overall.mean"``); human criteria are
    the target criteria, mapped the same way when renamed. ``delimiter``, ``records`` and
    ``where``: :func:`_read_table` and :func:`judgecal.datasets.columns.row_filter`.
    ``group_by``: the column to group on (as ``columns.group_id``), or ``"none"``: every item
    is its own group, and evaluation is over all items."""
    p = Path(path)
    known = GENERIC_COLUMNS + tuple(target.criteria)
    for k in columns:
        if k not in known:
            crit = ", ".join(target.criteria)
            raise InputError(f"[dataset].columns.{k}", f"not a name judgecal reads: {', '.join(GENERIC_COLUMNS)}, "
                             f"or a target criterion ([dataset].target: {crit}); to use {k!r} as the target, "
                             f"name it in [dataset].target")
    col = {c: columns.get(c, c) for c in known}
    if group_by == NO_GROUPS and "group_id" in columns:  # the mapped column went unread (a user's finding)
        raise InputError("[dataset].group_by", f"\"none\" makes every item its own group, and columns.group_id "
                         f"{columns['group_id']!r} names a column to group on; keep one")
    if group_by not in (None, NO_GROUPS):
        if "group_id" in columns and columns["group_id"] != group_by:
            raise InputError("[dataset].group_by", f"{group_by!r} and columns.group_id {columns['group_id']!r} name "
                             "two columns to group on; keep one")
        col["group_id"] = group_by
    # one column in two roles: content as the source gave prompts of "Question: <answer> Answer:
    # <answer>" without a word (a user's finding); an id or a group may be the source (a file
    # of prompts and responses with no id column)
    roles = ["content", *(["source"] if "source" in columns else []), *target.criteria]
    for j, role in enumerate(roles):
        other = next((r for r in roles[:j] if col[r] == col[role]), None)
        if other:
            named = next((r for r in (role, other) if r in columns), None)
            field = f"[dataset].columns.{named}" if named else "[dataset].target"
            raise InputError(field, f"{col[role]!r} is {other}'s column and {role}'s; give each its own")
    table = _read_table(p, (col["item_id"], col["group_id"]), delimiter, records)
    keep = row_filter(table, where or {}, str(p))
    need = ["item_id", "content"] + ([] if group_by == NO_GROUPS else ["group_id"]) + list(target.criteria)
    missing = [c for c in need if col[c] not in table]
    if "source" in columns and col["source"] not in table:
        missing.append("source")
    if missing:
        raise missing_columns(str(p), [col[c] for c in missing], list(table))
    n = _num_rows(table)
    source = table[col["source"]] if col["source"] in table else [""] * n
    records, rows = [], []
    for i in range(n):
        if not keep[i]:
            continue
        where = f"{p} row {i + 1}"
        item = cell_id(table[col["item_id"]][i], where, col["item_id"], "item_id")
        group = item if group_by == NO_GROUPS else cell_id(table[col["group_id"]][i], where, col["group_id"],
                                                           "group_id")
        content = cell_text(table[col["content"]][i], f"{where} (item {item})", col["content"], "content")
        src = cell_text(source[i], f"{where} (item {item})", col["source"], "source", optional=True)
        human = {c: table[col[c]][i] for c in target.criteria}
        records.append(ItemRecord(item, group, task, src, content, human))
        rows.append(i + 1)
    labels = {f: _column(col[f], f) for f in ("item_id", "group_id") if col[f] != f}
    return build_items(records, target, str(p), rows, labels)
