"""Loaders from each dataset's published layout to the canonical items table.

SummEval and HANNA ship inside the package (both MIT; provenance files beside the data);
USR and any other set are read from a path the user gives. The generic loader reads a
user's CSV / JSONL / Parquet through a column mapping.
"""

from __future__ import annotations

import gzip
import json
from importlib import resources
from pathlib import Path
from typing import Callable

import numpy as np
import pyarrow as pa
import pyarrow.csv
import pyarrow.json
import pyarrow.parquet as pq

from judgecal.datasets.items import ItemRecord, TargetSpec, build_items
from judgecal.errors import InputError

BUNDLED = "bundled"
_BUNDLED_FILES = {
    "summeval": "summeval_mteb_test_100.json.gz",
    "hanna": "hanna_stories_ratings.jsonl.gz",
}
# Scales of the published annotations.
SCALES = {"summeval": (1.0, 5.0), "hanna": (1.0, 5.0), "usr": (1.0, 5.0)}
TASKS = {"summeval": "summary", "hanna": "story", "usr": "dialogue"}
# Each dataset's default target, as its paper uses it. HANNA: the mean of the six criteria,
# each already the mean of the three raters.
DEFAULT_TARGETS = {"summeval": ("relevance",), "usr": ("overall",),
                   "hanna": ("coherence", "complexity", "empathy", "engagement", "relevance", "surprise")}


def _open_text(path: Path):
    return gzip.open(path, "rt", encoding="utf-8") if path.suffix == ".gz" else open(path, encoding="utf-8")


def _resolve(name: str, path: str | None) -> Path:
    if path in (None, "", BUNDLED):
        if name not in _BUNDLED_FILES:
            raise InputError(f"dataset {name}", "is not bundled; give its path")
        return Path(str(resources.files("judgecal.datasets").joinpath("data", _BUNDLED_FILES[name])))
    p = Path(path)
    if not p.exists():
        raise InputError(str(p), "no such file")
    return p


def _read_json(p: Path):
    try:
        with _open_text(p) as fh:
            return json.load(fh)
    except json.JSONDecodeError as e:
        raise InputError(f"{p} line {e.lineno}", f"not valid JSON ({e.msg})") from None


def _read_jsonl(p: Path) -> list[dict]:
    rows = []
    with _open_text(p) as fh:
        for n, line in enumerate(fh, 1):
            if line.strip():
                try:
                    rows.append(json.loads(line))
                except json.JSONDecodeError as e:
                    raise InputError(f"{p} line {n}", f"not valid JSON ({e.msg})") from None
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
            raise InputError(f"{p} row {i}", f"malformed SummEval row ({e!r})") from None
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
            raise InputError(f"{p} line {i + 1}", f"malformed HANNA row ({e!r})") from None
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
        except (KeyError, TypeError) as e:
            raise InputError(f"{p} context {i}", f"malformed USR row ({e!r})") from None
    return records


_PARSERS: dict[str, Callable[[Path], list[ItemRecord]]] = {"summeval": _summeval, "hanna": _hanna, "usr": _usr}


def load_dataset(name: str, path: str | None = None, target: TargetSpec | None = None) -> pa.Table:
    """Load a named dataset (``summeval``, ``hanna``, ``usr``) to the items table."""
    if name not in _PARSERS:
        raise InputError("dataset.name", f"unknown dataset {name!r} (known: {', '.join(_PARSERS)}, generic)")
    p = _resolve(name, path)
    records = _PARSERS[name](p)
    if target is None:
        target = TargetSpec(DEFAULT_TARGETS[name], *SCALES[name])
    return build_items(records, target, str(p))


def _read_table(p: Path) -> pa.Table:
    try:
        if p.suffix == ".parquet":
            return pq.read_table(p)
        if p.suffix == ".csv":
            return pyarrow.csv.read_csv(p)
        if p.suffix in (".jsonl", ".json"):
            return pyarrow.json.read_json(p)
    except pa.ArrowInvalid as e:
        raise InputError(str(p), f"cannot be read ({str(e).splitlines()[0]})") from None
    raise InputError(str(p), "unknown file type (use .csv, .jsonl or .parquet)")


def load_generic(path: str, columns: dict[str, str], target: TargetSpec, task: str = "summary") -> pa.Table:
    """Read a user's table. ``columns`` maps canonical names (item_id, group_id, source, content)
    to the file's columns; human criteria are the target criteria, mapped the same way when renamed."""
    p = Path(path)
    if not p.exists():
        raise InputError(str(p), "no such file")
    table = _read_table(p)
    need = ["item_id", "group_id", "content"] + list(target.criteria)
    missing = [c for c in need if columns.get(c, c) not in table.column_names]
    if missing:
        raise InputError(str(p), f"missing column(s) {', '.join(columns.get(c, c) for c in missing)}")
    get = {c: table[columns.get(c, c)].to_pylist() for c in need}
    source = table[columns["source"]].to_pylist() if "source" in columns else [""] * table.num_rows
    records = []
    for i in range(table.num_rows):
        human = {}
        for c in target.criteria:
            v = get[c][i]
            human[c] = float("nan") if v is None else v
        records.append(
            ItemRecord(str(get["item_id"][i]), str(get["group_id"][i]), task, source[i] or "", get["content"][i] or "", human)
        )
    return build_items(records, target, str(p))
