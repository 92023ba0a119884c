"""Renderers of the results log: text tables and HTML reports (PRISM and URW)."""

from judgecal.report.html import render_html
from judgecal.report.table import format_table
from judgecal.report.urw import format_urw_table, render_urw_html

__all__ = ["format_table", "format_urw_table", "render_html", "render_urw_html"]
