"""The judge's score scale: a parameter of the prompt, the parser and the expected score."""

from __future__ import annotations

import re
from dataclasses import dataclass

from judgecal.errors import InputError

SUPPORTED = ((1, 5), (1, 10), (0, 100), (0, 1), (1, 2))  # 0-1: binary rubric verdicts; 1-2: which of two
_NUMBER = re.compile(r"-?\d+(?:\.\d+)?")


@dataclass(frozen=True)
class ScoreScale:
    lo: int = 1
    hi: int = 5

    def __post_init__(self):
        if (self.lo, self.hi) not in SUPPORTED:
            raise InputError("scale", f"{self.lo}-{self.hi} is not a supported score scale (use 1-5, 1-10 or 0-100)")

    @classmethod
    def binary(cls) -> "ScoreScale":
        return cls(0, 1)

    @classmethod
    def parse(cls, text: str) -> "ScoreScale":
        m = re.fullmatch(r"\s*(\d+)\s*-\s*(\d+)\s*", str(text))
        if not m:
            raise InputError("scale", f"{text!r} does not parse (write it as 1-5, 1-10 or 0-100)")
        return cls(int(m.group(1)), int(m.group(2)))

    @property
    def values(self) -> list[int]:
        return list(range(self.lo, self.hi + 1))

    def __str__(self) -> str:
        return f"{self.lo}-{self.hi}"

    def parse_score(self, text: str) -> float | None:
        """The first number in ``text`` that lies on the scale, else None."""
        for m in _NUMBER.finditer(text or ""):
            v = float(m.group())
            if self.lo <= v <= self.hi:
                return v
        return None
