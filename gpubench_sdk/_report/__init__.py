"""Reports of stored runs: one self-contained HTML page, or the same content as JSON/CSV/Markdown.

``build_report`` gathers the figures (all from ``gpubench_sdk.metrics`` and the cost module);
``render_report`` turns them into one of ``FORMATS``. The CLI's ``gpubench report`` is both in a
row; ``gpubench_sdk`` exports ``build_report``, ``render_report`` and ``DailyTraffic``.
"""

from __future__ import annotations

from collections.abc import Callable

from ._collect import build_report
from ._compare import DailyTraffic
from ._html import render_html
from ._read import Report
from ._text import render_csv, render_json, render_markdown

__all__ = ["FORMATS", "DailyTraffic", "Report", "build_report", "render", "render_report"]

FORMATS: dict[str, Callable[[Report], str]] = {
    "html": render_html,
    "json": render_json,
    "csv": render_csv,
    "markdown": render_markdown,
}


def render_report(report: Report, fmt: str = "html") -> str:
    """The report in ``fmt`` (one of ``FORMATS``): ``html`` (one self-contained page), ``json``,
    ``csv`` or ``markdown``."""
    try:
        return FORMATS[fmt](report)
    except KeyError:
        raise ValueError(f"format must be one of {sorted(FORMATS)}, got {fmt!r}") from None


render = render_report  # the name the CLI and the tests have used
