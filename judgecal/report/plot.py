"""Drawing primitives of the report figures: an Agg canvas, inline PNG, Metric cells read from
the log's JSON, and the interval plot that every table of estimates shares."""

from __future__ import annotations

import base64
import html
import io
import math
import re
import textwrap

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter, LogLocator, MaxNLocator, NullFormatter

from judgecal.report.sections import SIMULATED_MARKS, cell_text

DPI = 100
MAX_ROWS = 100  # an interval plot longer than this shows its first rows (the table holds them all)
POINT, FAINT, REFERENCE = "#1f5fa8", "#9bb8d9", "#555555"


def new_figure(width: float, height: float, ncols: int = 1, **subplot_kw) -> tuple[Figure, list]:
    """A figure on its own Agg canvas: no pyplot state and never a display (reports are drawn
    on a head node or a worker; a notebook's own backend is left alone)."""
    fig = Figure(figsize=(width, height), dpi=DPI, layout="constrained")
    FigureCanvasAgg(fig)
    return fig, list(fig.subplots(1, ncols, squeeze=False, **subplot_kw)[0])


def png(fig: Figure) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    return buf.getvalue()


def img_html(fig: Figure, alt: str, caption: str = "") -> str:
    """The figure as an inline PNG, so the report stays one self-contained file."""
    data = base64.b64encode(png(fig)).decode("ascii")
    cap = f"<figcaption>{html.escape(caption)}</figcaption>" if caption else ""
    return (f'<figure><img src="data:image/png;base64,{data}" alt="{html.escape(alt)}" '
            f'style="max-width:100%;height:auto">{cap}</figure>')


def wrap(title: str, width: int = 80) -> str:
    return "\n".join(textwrap.wrap(title, width)) or " "


def finite(x) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def metric(cell) -> dict | None:
    """A Metric cell of the log's JSON with a finite value, else None."""
    if isinstance(cell, dict) and "metric" in cell and finite(cell["metric"].get("value")):
        return cell["metric"]
    return None


def as_metric(d: dict, key: str, n: int | None) -> dict:
    """A Metric cell from a flat ``key``, ``key_low``, ``key_high``, ``key_note`` record (the
    methods tables' rows)."""
    return {"metric": {"value": d.get(key), "low": d.get(f"{key}_low"), "high": d.get(f"{key}_high"), "n": n,
                       "note": d.get(f"{key}_note", ""), **({"edge": d[f"{key}_edge"]} if f"{key}_edge" in d else {})}}


def column(section: dict, name: str) -> list:
    """One column of a section's rows, by its header."""
    j = section["columns"].index(name)
    return [r[j] if j < len(r) else None for r in section["rows"]]


def log_ticks(lo: float, hi: float):
    """Few ticks for a log axis from ``lo`` to ``hi``: evenly stepped numbers within half a
    decade (1-2-5 gave a lone "1" on 0.97-1.85), 1-2-5 up to 1.5 decades, decades beyond (1-2-5
    over 0.05-200 crowded 12 labels into a panel)."""
    span = math.log10(hi / lo) if lo > 0 and hi > lo else 0.0
    if span < 0.5:
        return MaxNLocator(4)
    return LogLocator(subs=(1.0, 2.0, 5.0)) if span <= 1.5 else LogLocator(subs=(1.0,), numticks=6)


def simulated_apart(title: str) -> tuple[str, str]:
    """A title without its " (SIMULATED judge)" mark, and the mark: what a figure adds to the title
    goes before it, so the mark stays the title's last words wherever a caller put it."""
    mark = next((m for m in SIMULATED_MARKS.values() if m in title), "")
    return (title.replace(mark, "", 1), mark) if mark else (title, "")


def percentile_fallback(m: dict) -> bool:
    """Whether a Metric's interval is the percentile one drawn where bootstrap-t could not be
    formed: the table's note said so while the bar looked like every other (a reader's finding).
    The fallback's own words, wherever a note puts them; not a by-design percentile interval."""
    return re.search(r"(^|; )percentile; ", str(m.get("note") or "")) is not None


def interval_figure(title: str, columns: list[str], rows: list[list], log_scale: bool = False,
                    reference: float | dict[str, float] | None = None) -> Figure | None:
    """One panel per column holding Metric cells: per row, the estimate (point) and its 95%
    interval (bar; drawn to the panel's edge with an arrow where one end is infinite; an open
    point where the interval is undefined), labelled by the row's first cell, with n beside it.
    A column of differences (its header starts with "diff", or names a shift) always shows its 0
    line; ``reference`` draws a dashed line at that value in every panel, or (a dict) in the
    panels it names by header. Rows without a Metric are left out, and the title counts them; None
    when no column holds one."""
    cols = [j for j in range(1, len(columns)) if any(metric(r[j]) for r in rows if j < len(r))]
    if not cols:
        return None
    drawn = [r for r in rows if any(metric(r[j]) for j in cols if j < len(r))]  # a row of text alone: not drawn
    shown = drawn[:MAX_ROWS]
    title, mark = simulated_apart(title)  # the simulated mark stays the title's last words
    if len(drawn) > MAX_ROWS:
        title += f" (first {MAX_ROWS} of {len(drawn)} rows)"
    if len(drawn) < len(rows):  # a row left out unsaid read as a row that was never measured (carried finding)
        left = len(rows) - len(drawn)
        title += f"; {left} row{'s' * (left > 1)} without an interval in the table only"
    title += mark
    width = max(6.5, min(4.5 * len(cols), 13))
    fig, axes = new_figure(width, 1.3 + 0.24 * len(shown), len(cols), sharey=True)
    for ax, j in zip(axes, cols):
        values, open_ended, edges, percentile = [], [], False, False
        for i, r in enumerate(shown):
            m = metric(r[j]) if j < len(r) else None
            if m is None:
                continue
            lo, hi, v = m.get("low"), m.get("high"), m["value"]
            if finite(lo) and finite(hi):
                fallback = percentile_fallback(m)
                ax.hlines(i, lo, hi, color=FAINT, lw=3, linestyles="--" if fallback else "-")
                percentile |= fallback
                ax.plot(v, i, "o", color=POINT, ms=5)
                values += [lo, hi]
            elif finite(lo) and hi == math.inf or finite(hi) and lo == -math.inf:  # one end open: drawn to the edge
                ax.plot(v, i, "o", color=POINT, ms=5)
                end = lo if finite(lo) else hi
                open_ended.append((i, end, 1 if finite(lo) else -1))
                values.append(end)
            else:  # an undefined interval: the table's note says why
                ax.plot(v, i, "o", mfc="white", color=POINT, ms=5)
            values.append(v)
            if finite(m.get("edge")):  # a bar past it reaches further than a correlation can (a user's finding)
                ax.plot(m["edge"], i, "|", color="#c00", ms=11, mew=1.5)
                edges = True
            if m.get("n") is not None:  # at the panel's right edge: a column of n's, never over a bar
                ax.annotate(f"n={m['n']}", (1.01, i), xycoords=ax.get_yaxis_transform(), fontsize=7, va="center",
                            color=REFERENCE)
        # 0 is what a difference (or a shift) is read against: a shift panel from 0.3 hid it (a user's finding)
        differences = str(columns[j]).lower().startswith("diff") or "shift" in str(columns[j]).lower()
        ref = reference.get(columns[j]) if isinstance(reference, dict) else reference
        if ref is None:
            ref = 0.0 if differences or values and min(values) < 0 < max(values) else None
        if ref is not None:
            ax.axvline(ref, color=REFERENCE, lw=0.8, ls="--")
        if open_ended:  # the finite end to the panel's edge, an arrow where the interval goes on
            x0, x1 = ax.get_xlim()
            pad = 0.08 * (x1 - x0)
            x0, x1 = x0 - pad * any(s < 0 for *_, s in open_ended), x1 + pad * any(s > 0 for *_, s in open_ended)
            for i, end, side in open_ended:
                edge = x1 if side > 0 else x0
                ax.hlines(i, end, edge, color=FAINT, lw=3)
                ax.plot(edge, i, ">" if side > 0 else "<", color=FAINT, ms=6)
            ax.set_xlim(x0, x1)
        if log_scale and values and min(values) > 0:
            ax.set_xscale("log")
            # matplotlib labels the minor ticks of a range under a decade, which overlap in a
            # narrow panel: a few plain labels for the range shown, the minor ticks unlabelled
            ax.xaxis.set_major_locator(log_ticks(*ax.get_xlim()))
            ax.xaxis.set_major_formatter(FuncFormatter(lambda x, _: f"{x:g}"))
            ax.xaxis.set_minor_formatter(NullFormatter())
        else:
            ax.xaxis.set_major_locator(MaxNLocator(5))  # narrow panels: few ticks, never overlapping
        reach = "; red |: as far as a correlation of 1 (or -1) reaches" if edges else ""
        reach += "; dashed bar: percentile interval (the table's note says why)" if percentile else ""
        ax.set_xlabel(wrap(str(columns[j]) + reach, 40))
        ax.tick_params(axis="x", labelsize=8)
        ax.grid(axis="x", alpha=0.3)
        ax.tick_params(labelleft=False)
    axes[0].set_yticks(range(len(shown)), [wrap(cell_text(r[0]) if r else "", 40) for r in shown], fontsize=8)
    axes[0].tick_params(labelleft=True)
    axes[0].set_ylim(len(shown) - 0.5, -0.5)  # the table's first row on top
    fig.suptitle(wrap(title, int(11 * width)), fontsize=10)
    return fig
