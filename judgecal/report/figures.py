"""The reports' figures, drawn with matplotlib from the results log alone.

A section of the log gets the figure registered under its name in :data:`FIGURES`, or else
the generic interval plot: one panel per column of Metric cells, each row's estimate and 95%
interval, labelled by its first cell and n. So a new section with Metric cells is drawn with no
edit here; one whose ``data`` holds more registers its own figure (:func:`register`). The
methods tables and URW's coverage check are not sections: :func:`methods_figure` and
:func:`coverage_figure` draw them.

The HTML reports embed each figure beside its table as an inline PNG (:func:`section_html`,
:func:`methods_html`, :func:`coverage_html`); notebooks call :func:`figures` for the same
Figures (``plot.png(fig)`` gives the bytes).
"""

from __future__ import annotations

import inspect
from typing import Callable

from matplotlib.figure import Figure

from judgecal.report import figures_prism as prism
from judgecal.report import figures_urw as urw
from judgecal.report.plot import img_html, interval_figure, png
from judgecal.report.sections import sections, shown_title

SectionFigure = Callable[[dict, dict], "Figure | None"]


def interval_plot(section: dict, log: dict):
    """Point: the estimate; bar: its 95% interval (open point: no interval, the table's note says
    why); n beside each row; dashed: the reference (0 where the values straddle it); rows in
    different units name theirs in brackets; a row without an estimate is in the table only."""
    columns, rows = section["columns"], section["rows"]
    # one axis holding τ, shares and score units: each row says which (a user's finding); a first
    # column named "unit" is the rows' names (screening's probe units), not their units
    if "unit" in columns[1:]:
        k = columns.index("unit", 1)
        if len({str(r[k]) for r in rows if len(r) > k}) > 1:
            rows = [[f"{r[0]} [{r[k]}]", *r[1:]] if len(r) > k else r for r in rows]
    return interval_figure(section["title"], columns, rows)


FIGURES: dict[str, SectionFigure] = {
    "screening": prism.screening_figure,
    "subsets": prism.subsets_figure,
    "omission": prism.omission_figure,
    "penalty": prism.penalty_figure,
    "profile": prism.profile_figure,
    "reliability": prism.reliability_figure,
    "joint_probes": prism.joint_figure,
    "template_count": urw.template_count_figure,
}
METHODS = {"prism": prism.methods_figure, "urw": urw.methods_figure}


def register(name: str, draw: SectionFigure) -> SectionFigure:
    """Draw section ``name`` with ``draw(section, log)`` instead of the interval plot."""
    FIGURES[name] = draw
    return draw


def drawer(section: dict) -> SectionFigure:
    return FIGURES.get(section["name"], interval_plot)


def section_figure(section: dict, log: dict | None = None) -> Figure | None:
    log = log or {}
    return drawer(section)({**section, "title": shown_title(section, log)}, log)


def methods_figure(log: dict) -> Figure | None:
    draw = METHODS.get(log.get("method"))
    return draw(log) if draw else None


def coverage_figure(log: dict) -> Figure | None:
    return urw.coverage_figure(log) if log.get("method") == "urw" else None


def figures(log: dict) -> dict[str, Figure]:
    """Every figure of a log's report, in the report's order, by name (``methods``,
    ``coverage``, then each section's name)."""
    out = {"methods": methods_figure(log), "coverage": coverage_figure(log)}
    out |= {s["name"]: section_figure(s, log) for s in sections(log)}
    return {k: f for k, f in out.items() if f is not None}


# -- HTML: each figure as an inline PNG, its caption the drawing function's docstring ---------
def _html(fig: Figure | None, alt: str, draw) -> str:
    return "" if fig is None else img_html(fig, alt, " ".join((inspect.getdoc(draw) or "").split()))


def section_html(section: dict, log: dict) -> str:
    return _html(section_figure(section, log), section["title"], drawer(section))


def methods_html(log: dict) -> str:
    return _html(methods_figure(log), "methods table", METHODS.get(log.get("method")))


def coverage_html(log: dict) -> str:
    return _html(coverage_figure(log), "coverage check", urw.coverage_figure)


__all__ = ["FIGURES", "coverage_figure", "coverage_html", "figures", "interval_plot", "methods_figure",
           "methods_html", "png", "register", "section_figure", "section_html"]
