"""A user's file as columns, with nested fields reachable by a path and a named subset of rows.

``Columns`` is the ``{column: values}`` mapping the readers return. A name that is not a
column is read as a path into nested records: ``"annotations.Overall Quality.majority_human"``
is the column ``annotations`` (objects, or Parquet structs), then key ``Overall Quality``,
then key ``majority_human``. The longest column name that prefixes the path wins, so a
column whose own name holds dots is still found; a name that is both a column and a path
into another column's records is refused. A record missing a key on the path reads
as empty (the readers refuse an empty required cell, naming the row); a path through a value
that is not an object is one line naming the row.

``where`` (``[dataset] where = {split = "test", lang = ["en", "de"]}``) keeps the rows whose
field equals the value (or one of a list of values); rows keep their file numbers in every
message. Equality on text: ``1`` matches the cell ``1`` and ``"1"`` alike (a CSV's cells
are typed by its reader), so a where never depends on how a reader typed a column.
"""

from __future__ import annotations

from judgecal.errors import InputError


class Columns(dict):
    """``{column: values}``; a missing key is resolved as a path into nested records."""

    def __init__(self, cols: dict, where: str):
        super().__init__(cols)
        self.where = where
        self._paths: set[str] = set()  # keys resolved as paths, or columns checked against a path

    def _split(self, path: str) -> tuple[str, list[str]] | None:
        parts = path.split(".")
        for cut in range(len(parts) - 1, 0, -1):
            head = ".".join(parts[:cut])
            if dict.__contains__(self, head):
                return head, parts[cut:]
        return None

    def __contains__(self, key) -> bool:
        return dict.__contains__(self, key) or (isinstance(key, str) and self._split(key) is not None)

    def __getitem__(self, key):
        if isinstance(key, str) and "." in key and key not in self._paths and dict.__contains__(self, key):
            # a flat "human.mean" beside {"human": {"mean": ...}}: the flat column won without a
            # word, and it held old labels (a user's finding); which is meant is not guessed
            self._paths.add(key)
            if (split := self._split(key)) is not None and (nested := self._nested(key, *split)) is not None \
                    and nested != dict.__getitem__(self, key):  # the same values twice: either serves
                head, keys = split
                raise InputError(self.where, f"{key!r} names both a column of that name and the field "
                                 f"{'.'.join(keys)!r} inside column {head!r}; rename one of them (which is meant "
                                 "is not guessed)")
        return dict.__getitem__(self, key)

    def __missing__(self, key):
        split = self._split(key) if isinstance(key, str) else None
        if split is None:
            raise KeyError(key)
        values = self._resolve(key, *split)
        self._paths.add(key)
        self[key] = values  # resolved once
        return values

    def _nested(self, key: str, head: str, keys: list[str]) -> list | None:
        """The path's values where it reaches a value in some row, else None (a column of other
        values is no path)."""
        try:
            values = self._resolve(key, head, keys)
        except InputError:
            return None
        return values if any(v is not None for v in values) else None

    def _resolve(self, key: str, head: str, keys: list[str]) -> list:
        values = []
        for i, v in enumerate(dict.__getitem__(self, head)):
            for k in keys:
                if v is None:
                    break
                if not isinstance(v, dict):
                    raise InputError(f"{self.where} row {i + 1}", f"column path {key!r}: {head!r} holds "
                                     f"{type(v).__name__} {v!r} where an object with key {k!r} was expected")
                v = v.get(k)
            values.append(v)
        return values


def _text(v) -> str:
    return f"{v:g}" if isinstance(v, float) else str(v)


def row_filter(table: Columns, where: dict, p: str) -> list[bool]:
    """Which rows ``where`` keeps (all when it is empty); an unknown field or a subset with no
    row is one line."""
    n = len(next(iter(table.values())))
    keep = [True] * n
    for field, wanted in where.items():
        if field not in table:
            raise InputError(f"[dataset].where.{field}", f"{p} has no such column or column path (it has: "
                             f"{', '.join(list(table)[:20])})")
        allowed = {_text(w) for w in (wanted if isinstance(wanted, (list, tuple)) else [wanted])}
        for i, v in enumerate(table[field]):
            keep[i] = keep[i] and v is not None and _text(v) in allowed
    if not any(keep):
        raise InputError("[dataset].where", f"no row of {p} matches {dict(where)}")
    return keep
