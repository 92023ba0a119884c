"""Results table and HTML report."""

from judgecal.report.html import render_html, write_html
from judgecal.report.table import format_table

__all__ = ["format_table", "render_html", "write_html"]
