"""The canonical items table and the study target it carries.

Every loader returns a table with :data:`judgecal.schemas.ITEMS` columns plus one float64
``human.<criterion>`` column per human criterion, and ``target`` computed from a
:class:`TargetSpec`. :func:`validate_items` is the single gate for bad input. Rows in messages
count from 1 (the N-th item record).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from decimal import Decimal

import numpy as np
import pyarrow as pa

from judgecal.datasets.text import storable
from judgecal.errors import InputError
from judgecal.schemas import HUMAN_PREFIX, ITEMS


@dataclass(frozen=True)
class TargetSpec:
    """What the human target is: one criterion, or the mean of several, on a stated scale."""

    criteria: tuple[str, ...]
    scale_min: float
    scale_max: float

    def describe(self) -> str:
        what = self.criteria[0] if len(self.criteria) == 1 else "mean(" + ", ".join(self.criteria) + ")"
        return f"{what} on [{self.scale_min:g}, {self.scale_max:g}]"

    def to_dict(self) -> dict:
        return {"criteria": list(self.criteria), "scale_min": self.scale_min, "scale_max": self.scale_max}


@dataclass
class ItemRecord:
    item_id: str
    group_id: str
    task: str
    source: str
    content: str
    human: dict[str, float] = field(default_factory=dict)


RATERS_HINT = " (raters' scores? average them into one number per cell)"


def _read_text_scores(records: list[ItemRecord], criteria, row_at: list[str]) -> None:
    """Scores written as text (or as decimals) become numbers, as a CSV reader reads them (a JSON export's "4.5"
    was refused where the same CSV cell was read). A score column read as text because one cell
    is not a number (a decimal comma, a word) blames that cell, not the first cell, which a CSV
    reader turned to text with it."""
    for c in criteria:
        for r in records:  # a database export's DECIMAL(5,2) is a number: it was refused as one (a user's finding)
            if isinstance(v := r.human.get(c), Decimal):
                r.human[c] = float(v)
        texts = [(i, v) for i, r in enumerate(records) if isinstance(v := r.human.get(c), str)]
        for i, v in texts:
            if not v.strip():  # read as "'  ', not a number" beside "missing or NaN" for an n/a (a user's finding)
                raise InputError(row_at[i], f"human score {c!r} is missing (a cell of spaces)")
            try:
                records[i].human[c] = float(v)  # "nan" reads as NaN: refused below as missing, as in a CSV
            except ValueError:
                dot = v.strip().replace(",", ".")
                comma = re.fullmatch(r"-?\d+\.\d+", dot) and f" (a decimal comma? write {dot})"
                raters = v.strip().startswith("[") and RATERS_HINT  # a CSV cell "[4, 5, 3]"
                raise InputError(row_at[i], f"human score {c!r} is {v!r}, not a number{comma or raters or ''}") \
                    from None


def build_items(records: list[ItemRecord], target: TargetSpec, where: str, rows: list[int] | None = None,
                labels: dict[str, str] | None = None) -> pa.Table:
    """Turn loader records into the validated items table with ``target`` filled in. ``rows``:
    each record's row number in its file (default: its position; a ``where`` keeps file rows).
    ``labels``: how errors name item_id and group_id (a user's file calls them otherwise)."""
    if not records:
        raise InputError(where, "no items")
    criteria = sorted({c for r in records for c in r.human})
    for c in target.criteria:
        if c not in criteria:
            raise InputError(where, f"unknown target criterion {c!r} (have: {', '.join(criteria)})")
    cols: dict[str, list] = {f.name: [] for f in ITEMS}
    human_cols: dict[str, list] = {c: [] for c in criteria}
    row_at = [f"{where} row {rows[i] if rows else i + 1} (item {r.item_id})" for i, r in enumerate(records)]
    _read_text_scores(records, target.criteria, row_at)
    for i, r in enumerate(records):
        at = row_at[i]
        for text, role in ((r.item_id, "item_id"), (r.group_id, "group_id"), (r.source, "source"),
                           (r.content, "content")):  # the bundled formats' parsers given a user's file too
            if not isinstance(text, str):  # a HANNA story of a number was a pyarrow traceback (a reader's finding)
                raise InputError(at, f"the item's {role} holds {text!r:.60}, not text")
            storable(text, at, role, role)
        for c in target.criteria:
            v = r.human.get(c)
            if v is None or isinstance(v, float) and math.isnan(v):
                several = ("; the target is the mean of [dataset].target's columns, each given for every item (a "
                           "column per rater, some left blank? average the raters into one column first)"
                           if len(target.criteria) > 1 else "")  # a user's finding: r01..r05 as the target
                raise InputError(at, f"human score {c!r} is missing or NaN{several}")
            if not isinstance(v, (int, float)) or isinstance(v, bool):
                hint = RATERS_HINT if isinstance(v, list) else ""
                raise InputError(at, f"human score {c!r} is {v!r} ({type(v).__name__}), not a number{hint}")
            if not target.scale_min <= v <= target.scale_max:
                raise InputError(at, f"human score {c!r}={v:g} is outside the scale [{target.scale_min:g}, "
                                 f"{target.scale_max:g}]")
        cols["item_id"].append(str(r.item_id))
        cols["group_id"].append(str(r.group_id))
        cols["task"].append(r.task)
        cols["source"].append(r.source)
        cols["content"].append(r.content)
        cols["target"].append(float(np.mean([r.human[c] for c in target.criteria])))
        for c in criteria:
            human_cols[c].append(float(r.human[c]) if c in r.human else None)
    table = pa.Table.from_pydict(cols, schema=ITEMS)
    for c in criteria:
        table = table.append_column(pa.field(HUMAN_PREFIX + c, pa.float64()), pa.array(human_cols[c], pa.float64()))
    validate_items(table, where, rows, labels)
    return table


def validate_items(table: pa.Table, where: str, rows: list[int] | None = None,
                   labels: dict[str, str] | None = None) -> None:
    """Reject duplicate ids, empty content and groups too small to rank within: a group of one
    item among larger ones (when every group has one item, evaluation is over all items).
    ``labels``: how errors name item_id and group_id (default: those names)."""
    label = {"item_id": "item_id", "group_id": "group_id", **(labels or {})}
    ids, group_ids = table["item_id"].to_pylist(), table["group_id"].to_pylist()
    row_of = (lambda i: rows[i]) if rows else (lambda i: i + 1)
    seen: dict[str, int] = {}  # id -> its first position
    for i, item_id in enumerate(ids):
        if (j := seen.setdefault(item_id, i)) != i:
            why = (f"in groups {group_ids[j]!r} and {group_ids[i]!r}: an id names one item across the file; make "
                   f"them unique, e.g. {group_ids[i]}_{item_id}" if group_ids[j] != group_ids[i]
                   else "one row per rater? average the raters into one row per item first")
            raise InputError(f"{where} row {row_of(i)}", f"duplicate item_id {item_id!r} (first at row "
                             f"{row_of(j)}; {why})")
    # 'q01_a1 ' beside 'q01_a1' made two items, 'P003 ' beside 'P003' a 61st group, without a word
    # (users' findings); a lone value with a space at its end is still its own
    _refuse_end_space_twins(ids, label["item_id"], "item", where, row_of)
    _refuse_end_space_twins(group_ids, label["group_id"], "group", where, row_of)
    for i, text in enumerate(table["content"].to_pylist()):
        if not text or not text.strip():
            raise InputError(f"{where} row {row_of(i)} (item {ids[i]})", "empty content")
    groups, counts = np.unique(np.asarray(table["group_id"].to_pylist(), dtype=object), return_counts=True)
    lonely = groups[counts < 2]
    if len(lonely) and len(lonely) < len(groups):
        i = table["group_id"].to_pylist().index(lonely[0])
        raise InputError(f"{where} row {row_of(i)} (item {ids[i]})", f"group {lonely[0]!r} has one item while others "
                         f"have more; within-group ranking needs at least 2 ({len(lonely)} of {len(groups)} groups "
                         "have one; with one item in every group, group_by = \"none\" evaluates over all items)")


def _refuse_end_space_twins(values: list[str], field: str, noun: str, where: str, row_of) -> None:
    """Refuse two values that differ only in spaces at their ends, naming both rows."""
    first: dict[str, int] = {}  # value -> its first position
    bare: dict[str, str] = {}  # value without end spaces -> the first value that had it
    for i, value in enumerate(values):
        first.setdefault(value, i)
        if (other := bare.setdefault(value.strip(), value)) != value:
            raise InputError(f"{where} row {row_of(i)}", f"{field} {value!r} and {other!r} (row "
                             f"{row_of(first[other])}) differ only in spaces at their ends; one {noun} or two? make "
                             "them equal or distinct")


DRAWS = ("seeded", "first")  # how a sampling limit picks its rows: with [study] seed, or file order


def check_draw(draw: str, where: str) -> None:
    if draw not in DRAWS:
        raise InputError(where, f"unknown draw {draw!r} (use {' or '.join(map(repr, DRAWS))})")


def draw_words(draw: str, seed: int) -> str:
    """How a limit's rows were picked, for log and report lines."""
    return f"drawn with seed {seed}" if draw == "seeded" else "the first in file order"


_ID_TOKENS = re.compile(r"[^\W_]+")  # the runs of letters and digits of an id


def id_key(value) -> tuple:
    """Sorts ids token by token (the runs of letters and digits), a token of digits alone by its
    value ("item/9" before "item/10", "95" before "100") and before a token with letters; ties of
    spelling ("07", "7") by the text. A seeded sampling limit draws over ids in this order, not
    over the file's: the same rows in another order drew another sample (a user's finding)."""
    text = str(value)
    # a number by its digits' count and then the digits (no int(): an id of 5,000 digits is refused by it)
    return tuple((0, len(t.lstrip("0")), t.lstrip("0")) if t.isdecimal() else (1, 0, t)
                 for t in _ID_TOKENS.findall(text)), text


def draw_indices(n: int, k: int | None, draw: str, rng: np.random.Generator | None) -> list[int]:
    """``k`` of ``range(n)`` in ascending order: a uniform draw from ``rng`` (``draw = "seeded"``),
    or the first ``k``; all of them when ``k`` is None or at least ``n``."""
    if k is None or k >= n:
        return list(range(n))
    if draw == "first" or rng is None:
        return list(range(k))
    return sorted(rng.choice(n, size=k, replace=False).tolist())


def subset_items(table: pa.Table, max_groups: int | None, max_items_per_group: int | None,
                 seed: int | None = None, draw: str = "seeded") -> pa.Table:
    """``max_groups`` groups and ``max_items_per_group`` items of each, kept in table order.

    With a ``seed`` (a study passes its ``[study] seed``) the groups are a uniform sample drawn
    with ``numpy.random.default_rng(seed)`` over the group ids in :func:`id_key` order, and then
    each group's items from the same generator over their item ids in that order (``draw =
    "first"``: each group's first items in table order); without one, the first groups and
    their first items. A seeded draw is the same for any order of the same rows."""
    if max_groups is None and max_items_per_group is None:
        return table
    groups = table["group_id"].to_pylist()
    rng = None if seed is None else np.random.default_rng(seed)
    order = list(dict.fromkeys(groups)) if rng is None else sorted(set(groups), key=id_key)
    chosen = [order[j] for j in draw_indices(len(order), max_groups, "seeded", rng)]
    rows_of: dict = {g: [] for g in chosen}
    for i, g in enumerate(groups):
        if g in rows_of:
            rows_of[g].append(i)
    if rng is not None and draw != "first" and max_items_per_group is not None:
        items = table["item_id"].to_pylist()  # a group the limit keeps whole draws nothing: no sort
        rows_of = {g: sorted(rows, key=lambda i: id_key(items[i])) if len(rows) > max_items_per_group else rows
                   for g, rows in rows_of.items()}
    keep = sorted(rows[j] for rows in rows_of.values()
                  for j in draw_indices(len(rows), max_items_per_group, draw, rng))
    return table.take(pa.array(keep, pa.int64()))


def sample_line(max_groups: int | None, max_items_per_group: int | None, seed: int, draw: str) -> str:
    """How :func:`subset_items` chose a study's items, in one line for the log and the report."""
    if max_groups is None and max_items_per_group is None:
        return ""
    parts = [f"at most {max_groups} groups, drawn with seed {seed}"] if max_groups is not None else []
    if max_items_per_group is not None:
        parts.append(f"at most {max_items_per_group} items of each group, {draw_words(draw, seed)}")
    return "sample: " + "; ".join(parts)


def human_criteria(table: pa.Table) -> list[str]:
    return [n[len(HUMAN_PREFIX):] for n in table.column_names if n.startswith(HUMAN_PREFIX)]
