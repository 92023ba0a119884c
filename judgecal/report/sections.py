"""Typed sections of a results log, and the one way every renderer walks them.

A study section is a table of typed cells: each cell is a number, text, or an estimate with
its interval and n (:class:`Metric`). ``results["sections"]`` holds them in order; the text
report, the HTML report and ``judgecal compare`` iterate over what they find, so a new
section or row appears everywhere with no renderer edit.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field

from judgecal.evaluate.metrics import Interval


@dataclass
class Metric:
    """A value with its 95% interval, the n it averages, and a note where the interval is
    undefined (shown instead of the interval) or is not the bootstrap-t (shown after it)."""

    value: float
    low: float | None = None
    high: float | None = None
    n: int | None = None
    note: str = ""
    clusters: int | None = None  # what a clustered bootstrap resampled (prompts): beside n, which counts pairs
    edge: float | None = None  # a difference's reach (Interval.edge): the figure marks it

    @classmethod
    def of(cls, iv: Interval) -> "Metric":
        return cls(iv.estimate, iv.low, iv.high, iv.n, iv.note, iv.clusters, iv.edge)

    def text(self) -> str:
        if self.value is None or (isinstance(self.value, float) and math.isnan(self.value)):
            return "n/a" + (f" ({self.note})" if self.note else "")  # why it is undefined
        bounded = self.low is not None and not math.isnan(self.low)
        if self.note and not bounded:
            return f"{self.value:+.3f} ({self.note})"
        n = f" n={self.n}" if self.n is not None else ""
        n += f" in {self.clusters} clusters" if n and self.clusters is not None else ""
        if not bounded:
            return f"{self.value:+.3f}{n}"
        note = f" ({self.note})" if self.note else ""
        return f"{self.value:+.3f} [{self.low:+.3f}, {self.high:+.3f}]{n}{note}"


@dataclass
class Section:
    name: str  # a stable key (``screening``, ``confirmation``, ``subsets``, ...)
    title: str
    columns: list[str]
    rows: list[list] = field(default_factory=list)  # cells: Metric | float | int | str | None
    note: str = ""  # how to read it: units, n, protocol
    data: dict = field(default_factory=dict)  # raw numbers for notebooks and compare (not rendered)

    def to_dict(self) -> dict:
        return {"name": self.name, "title": self.title, "columns": self.columns, "note": self.note,
                "rows": [[_cell_dict(c) for c in r] for r in self.rows], "data": self.data}


def _cell_dict(c):
    if isinstance(c, Metric):  # no edge key where there is none: the logs' metrics stay as they were
        return {"metric": {k: v for k, v in asdict(c).items() if k != "edge" or v is not None}}
    if isinstance(c, float) and math.isnan(c):
        return None
    return c


def penalty_text(gamma: float) -> str:
    """A ridge penalty as the grid reads: 0.00316 ... 316, then 1,000 (not "1e+03" among decimals)."""
    return f"{gamma:,.0f}" if gamma >= 1000 else f"{gamma:.3g}"


def cell_text(c) -> str:
    """One cell as text, from the log's JSON form."""
    if isinstance(c, dict) and "metric" in c:
        return Metric(**c["metric"]).text()
    if c is None:
        return "-"
    if isinstance(c, bool):
        return "yes" if c else "no"
    if isinstance(c, float):
        return f"{c:+.3f}" if abs(c) < 100 else f"{c:,.0f}"
    return str(c)


def sections(log: dict) -> list[dict]:
    return log.get("results", {}).get("sections", [])


SIMULATED_MARKS = {"prism": " (SIMULATED judge)", "urw": " (SIMULATED verifier)"}


def simulated_mark(log: dict) -> str:
    """" (SIMULATED judge)" (or verifier) where a simulated judge answered, else "": on every
    section, table and figure title, so one copied on its own still says so (a user's finding:
    only the methods table did)."""
    if not log.get("simulated_judge"):
        return ""
    return SIMULATED_MARKS["urw" if log.get("method") == "urw" else "prism"]


def shown_title(s: dict, log: dict) -> str:
    return s["title"] + simulated_mark(log)


def format_sections(log: dict) -> list[str]:
    from judgecal.report.table import grid

    out = []
    for s in sections(log):
        out += ["", f"== {shown_title(s, log)} =="]
        if s["rows"]:
            out += grid([s["columns"], *[[cell_text(c) for c in r] for r in s["rows"]]])
        if s.get("note"):
            out.append(s["note"])
    return out


def html_sections(log: dict) -> str:
    import html

    from judgecal.report.figures import section_html
    from judgecal.report.html import html_table

    parts = []
    for s in sections(log):
        parts.append(f"<h2>{html.escape(shown_title(s, log))}</h2>")
        if s["rows"]:
            parts.append(html_table(s["columns"], [[cell_text(c) for c in r] for r in s["rows"]]))
        if s.get("note"):
            parts.append(f"<p>{html.escape(s['note'])}</p>")
        parts.append(section_html(s, log))  # its registered figure, else the interval plot of its Metric cells
    return "\n".join(parts)
