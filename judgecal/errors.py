"""The one error type users see for bad input: one line, names the place, exit code 2."""

from __future__ import annotations

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


_KEEP_UNREAD: ContextVar[str | None] = ContextVar("judgecal_keep_unread", default=None)


def unread_setting(where: str, problem: str) -> None:
    """A setting nothing reads: refused where a study starts (it would run without it and say
    nothing). Inside :func:`keeping_unread` it is kept: with a warning in a study folder's saved
    config (its collect took it; refusing it there would leave the folder unreadable, since
    report reads no --set to fix it with), silently in a grid's variants (the study's own
    config serves every variant, one of which may turn that part off)."""
    kept = _KEEP_UNREAD.get()
    if kept is None:
        raise InputError(where, problem)
    if kept:
        print(f"judgecal: warning: {where}: {problem.split('; ')[0]} ({kept})", file=sys.stderr, flush=True)


@contextmanager
def keeping_unread(why: str):
    """Settings nothing reads are kept, not refused, while the block runs; ``why`` ("" for
    none) ends the warning line. An enclosing block's ``why`` stands (a grid's silence)."""
    outer = _KEEP_UNREAD.get()
    token = _KEEP_UNREAD.set(why if outer is None else outer)
    try:
        yield
    finally:
        _KEEP_UNREAD.reset(token)
