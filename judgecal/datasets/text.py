"""What a text cell may hold, for every reader of users' files (items, pairs, criteria)."""

import re

from judgecal.errors import InputError

# characters that show nothing: a response of a zero-width space, a byte-order mark or a
# direction mark alone is an empty answer of RTL and CJK exports (judged as text: a user's finding)
_INVISIBLE = "\u00ad\u200b\u200c\u200d\u200e\u200f\u202a-\u202e\u2060-\u2064\u2066-\u2069\ufeff"
_BLANK = re.compile(rf"[\s{_INVISIBLE}]*")
# a lone UTF-16 surrogate (JSON "\ud83d", a string cut inside an emoji) cannot be stored as UTF-8;
# NUL ends a string in C: neither is text a judge is sent (a traceback, exit 1: a user's finding)
_UNSTORABLE = re.compile("[\ud800-\udfff\x00]")


def column_label(column: str, what: str) -> str:
    """How an error names a column: its name in the file, and its role where that differs
    (no column: the role alone, a reward's "criterion 2")."""
    if not column:
        return what
    return f"column {column!r}" + (f" ({what})" if what != column else "")


def blank(text: str) -> bool:
    """Whitespace or invisible characters alone."""
    return _BLANK.fullmatch(text) is not None


def storable(text: str, where: str, column: str, what: str) -> str:
    """``text`` as it is, or one line naming where it holds what cannot be stored or sent."""
    if (bad := _UNSTORABLE.search(text)) is not None:
        char = "a NUL character (U+0000)" if bad.group() == "\x00" else \
            f"a broken character (U+{ord(bad.group()):04X}, half of a UTF-16 pair: a text cut inside an emoji?)"
        raise InputError(where, f"{column_label(column, what)} holds {char} at character {bad.start() + 1}; "
                         "remove or mend it")
    return text
