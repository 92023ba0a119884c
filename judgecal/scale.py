"""The judge's score scale: a parameter of the prompt, the parser and the expected score."""

from __future__ import annotations

import re
from dataclasses import dataclass

from judgecal.errors import InputError
from judgecal.schemas import (PARSE_EMPTY, PARSE_NON_UTF8, PARSE_OK, PARSE_OUT_OF_SCALE, PARSE_REFUSAL, PARSE_SEVERAL,
                              PARSE_UNPARSED)

# the scales whose token ids vLLM's stage looks up once (others ask for the top-k); 0-1: binary
# rubric verdicts; 1-2: which of two
SUPPORTED = ((1, 5), (1, 10), (0, 100), (0, 1), (1, 2))
MAX_VALUE = 100
_NUMBER = re.compile(r"-?\d+(?:\.\d+)?")
# "I can't", "as an AI", "I'm sorry": read as a refusal only when the answer holds no score
_REFUSAL = re.compile(r"\b(?:I\s+(?:can(?:not|'t|’t)|won't|will\s+not|am\s+(?:unable|not\s+able))|I'm\s+(?:unable|"
                      r"not\s+able|sorry)|I\s+apologi[sz]e|as\s+an\s+AI|unable\s+to\s+(?:rate|score|evaluate|"
                      r"assess|provide))", re.IGNORECASE)
_UNDECODED = re.compile("[\ufffd\ud800-\udfff]")  # a replacement character or a lone surrogate


@dataclass(frozen=True)
class ScoreScale:
    lo: int = 1
    hi: int = 5

    def __post_init__(self):
        # any integer scale a person rates on (1-4, 1-7, 0-10, 0-100); past 100 values a
        # judge's answers are no longer a distribution over a few numbers
        if not (0 <= self.lo < self.hi <= MAX_VALUE):
            raise InputError("scale", f"{self.lo}-{self.hi} is not a score scale judgecal reads (integers lo-hi with "
                             f"0 <= lo < hi <= {MAX_VALUE}, such as 1-4, 1-5, 1-7, 0-10 or 0-100)")

    @classmethod
    def binary(cls) -> "ScoreScale":
        return cls(0, 1)

    @classmethod
    def parse(cls, text: str) -> "ScoreScale":
        m = re.fullmatch(r"\s*(\d+)\s*-\s*(\d+)\s*", str(text))
        if not m:
            raise InputError("scale", f"{text!r} does not parse (write it as lo-hi: 1-5, 1-7, 0-10, 0-100)")
        return cls(int(m.group(1)), int(m.group(2)))

    @property
    def span(self) -> int:
        """The largest change a score on this scale can make."""
        return self.hi - self.lo

    @property
    def values(self) -> list[int]:
        return list(range(self.lo, self.hi + 1))

    def __str__(self) -> str:
        return f"{self.lo}-{self.hi}"

    def read(self, text: str | None) -> tuple[float | None, str]:
        """A free-text answer -> (score, parse status). The score is the answer's one number on
        the scale, once the scale's own mentions are set aside ("4/5", "4 out of 5", "on a 1-5
        scale"); the same number repeated is one number. Without one, the status says why:
        ``empty``, ``non_utf8`` (bytes that did not decode), ``several_numbers`` (two different
        on-scale numbers: which one is the score is a guess), ``out_of_scale`` (numbers, none
        on the scale), ``refusal`` (no number and refusal wording), else ``unparsed``."""
        text = text or ""
        if not text.strip():
            return None, PARSE_EMPTY
        numbers = self.numbers(text)
        on_scale = list(dict.fromkeys(v for v in numbers if self.lo <= v <= self.hi))
        if len(on_scale) == 1:
            return on_scale[0], PARSE_OK
        if _UNDECODED.search(text):
            return None, PARSE_NON_UTF8
        if on_scale:
            return None, PARSE_SEVERAL
        if numbers:
            return None, PARSE_OUT_OF_SCALE
        return None, PARSE_REFUSAL if _REFUSAL.search(text) else PARSE_UNPARSED

    def numbers(self, text: str) -> list[float]:
        """The numbers of an answer once the scale's own mentions ("4/5", "4 out of 5", "on a
        1-5 scale") are set aside (:meth:`read`'s, and the injection diagnostic's off-scale side)."""
        bare = re.sub(rf"(?:/|\bout\s+of)\s*{self.hi}(?:\.0+)?(?!\.?\d)", " ", text, flags=re.IGNORECASE)
        bare = re.sub(rf"(?<![\d.]){self.lo}\s*(?:-|–|to)\s*{self.hi}(?!\.?\d)", " ", bare)
        return [float(m.group()) for m in _NUMBER.finditer(bare)]

    def parse_score(self, text: str) -> float | None:
        """The first number in ``text`` that lies on the scale, else None (one token of a
        distribution, a greedy answer checked against its distribution's choice; a whole
        free-text answer is :meth:`read`)."""
        for m in _NUMBER.finditer(text or ""):
            v = float(m.group())
            if self.lo <= v <= self.hi:
                return v
        return None


def slope(src: tuple[float, float], dst: tuple[float, float]) -> float:
    """How far one step on the scale ``src`` (lo, hi) moves on ``dst`` read linearly onto it."""
    return (dst[1] - dst[0]) / (src[1] - src[0])


def onto(x, src: tuple[float, float], dst: tuple[float, float]):
    """``x`` on the scale ``src`` read linearly onto ``dst`` (ends onto ends): one map for
    Vanilla's stated reading, PRISM's features and the simulated judge's truth."""
    return dst[0] + slope(src, dst) * (x - src[0])
