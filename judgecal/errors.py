"""The one error type users see for bad input: one line, names the place, exit code 2."""

from __future__ import annotations

import re
import sys
from contextlib import contextmanager
from contextvars import ContextVar


class InputError(ValueError):
    """Bad user input. ``where`` names the file, row or field; the CLI prints one line and exits 2."""

    exit_code = 2

    def __init__(self, where: str, problem: str):
        self.where = where
        self.problem = problem
        super().__init__(f"{where}: {problem}")

    def __reduce__(self):  # raised in a Ray worker, it reaches the driver whole (BaseException's pickling
        return _rebuilt, (type(self), self.where, self.problem, dict(self.__dict__))  # called cls(message))


def _rebuilt(cls, where: str, problem: str, state: dict) -> InputError:
    e = cls.__new__(cls)
    InputError.__init__(e, where, problem)
    e.__dict__.update(state)
    return e


def set_key(item: str) -> str:
    """``section.field`` of a ``--set section.field=value`` item."""
    return item.split("=", 1)[0].strip()


def field_key(where: str) -> str | None:
    """``section.field`` of the ``[section].field`` a refusal's ``where`` names, else None."""
    m = re.search(r"\[(\w+)\]\.(\w+)", where)
    return f"{m[1]}.{m[2]}" if m else None


# (why, the fields this command's --set gives, the warnings said in the block)
_KEEP_UNREAD: ContextVar[tuple[str, frozenset, set] | None] = ContextVar("judgecal_keep_unread", default=None)


def saved_setting(where: str, problem: str) -> None:
    """A value an older judgecal took that a rule now refuses (a bootstrap under 100 resamples, a
    target scale that is no scale): refused where a study starts and in this command's --set; a
    study folder's saved config keeps it, with a warning (the folder must stay readable)."""
    unread_setting(where, problem)


def unread_setting(where: str, problem: str) -> None:
    """A setting nothing reads: refused where a study starts (it would run without it and say
    nothing). Inside :func:`keeping_unread` it is kept: with a warning in a study folder's saved
    config (its collect took it; refusing it there would leave the folder unreadable, since
    report reads no --set to fix it with), silently in a grid's variants (the study's own
    config serves every variant, one of which may turn that part off)."""
    kept = _KEEP_UNREAD.get()
    if kept is None or field_key(where) in kept[1]:  # a --set of this command: refused
        raise InputError(where, problem)
    said = (field_key(where) or where, problem)
    if kept[0] and said not in kept[2]:  # once: each stage reads the design again (it came three times)
        kept[2].add(said)
        print(f"judgecal: warning: {where}: {problem.split('; ')[0]} ({kept[0]})", file=sys.stderr, flush=True)


@contextmanager
def keeping_unread(why: str, sets: list[str] | None = None):
    """Settings nothing reads are kept, not refused, while the block runs, but for the fields
    ``sets`` (``--set section.field=...`` of this command) gives; ``why`` ("" for none) ends
    the warning line. An enclosing block's stands (a grid's silence)."""
    outer = _KEEP_UNREAD.get()
    keys = frozenset(set_key(item) for item in sets or [])
    token = _KEEP_UNREAD.set((why, keys, set()) if outer is None else outer)
    try:
        yield
    finally:
        _KEEP_UNREAD.reset(token)
