"""What every page of the site shares: the frame (header, navigation, footer), the stylesheet
and small HTML pieces. Pages are plain HTML with inline CSS and SVG, no script and no external
URL, so the site works from a file:// URL and from any static host."""

from __future__ import annotations

import math
from collections.abc import Sequence
from html import escape

from ..._base._version import __version__
from .._compare import duration
from .._style import CSS
from .._summary import percent

SITE_CSS = """
header.site{display:flex;flex-wrap:wrap;gap:.3rem 1.2rem;align-items:baseline;
border-bottom:1px solid #ddd;padding-bottom:.4rem}
header.site .name{font-weight:700;font-size:1.05rem;color:inherit;text-decoration:none}
header.site nav{display:flex;flex-wrap:wrap;gap:.2rem .9rem}
code,.kv td,p{overflow-wrap:anywhere}footer{margin-top:3rem;color:#5a5f68;font-size:12px}
.flagged{color:#b01f1f;font-weight:600}ul.flags li{margin:.25rem 0}
.lede{font-size:1.05rem}.kv th{text-align:left;background:none;font-weight:600}
.kv td{white-space:normal;text-align:left}
@media (max-width:640px){body{margin:1rem auto;padding:0 .6rem}h1{font-size:1.25rem}
td:first-child{white-space:normal;min-width:8rem}
figure.chart{overflow-x:auto}figure.chart svg{min-width:600px}}
@media print{header.site nav,footer .nav{display:none}body{max-width:none;margin:0;padding:0}
a{color:inherit;text-decoration:none}figure,table{break-inside:avoid}\nfigure.chart svg{min-width:0}
.scroll{overflow:visible}td{white-space:normal}}
"""
# The same belt and braces as the report's: nothing in a page may fetch anything.
_CSP = "default-src 'none'; style-src 'unsafe-inline'; img-src data:"


def page(title: str, site_title: str, body: str, *, root: str, documents: int) -> str:
    """A whole page; ``root`` is the way back to the site's top ("" or "../")."""
    nav = (
        f'<a href="{root}index.html#targets">Targets</a>'
        f'<a href="{root}methodology.html">Methodology</a>'
        f'<a href="{root}downloads.html">Data</a>'
        f'<a href="{root}index.json">index.json</a>'
    )
    return (
        '<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">'
        f'<meta http-equiv="Content-Security-Policy" content="{_CSP}">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{escape(title)}</title><style>{CSS}{SITE_CSS}</style></head><body>"
        f'<header class="site"><a class="name" href="{root}index.html">{escape(site_title)}</a>'
        f"<nav>{nav}</nav></header><main>{body}</main>"
        f"<footer>Built by gpubench {escape(__version__)} from {documents:,} data documents "
        f'(<a href="{root}downloads.html">all of them</a>, '
        f'<a href="{root}methodology.html">how they were measured</a>).</footer>'
        "</body></html>\n"
    )


def table(head: Sequence[str], rows: Sequence[Sequence[str]], *, left: int = 1) -> str:
    """A table of HTML cells (already escaped); the first ``left`` columns read from the left."""
    if not rows:
        return "<p>none</p>"

    def cls(i: int) -> str:
        return ' class="l"' if i < left else ""

    top = "".join(f"<th{cls(i)}>{escape(h)}</th>" for i, h in enumerate(head))
    body = "".join(
        "<tr>" + "".join(f"<td{cls(i)}>{c}</td>" for i, c in enumerate(r)) + "</tr>" for r in rows
    )
    return f'<div class="scroll"><table><tr>{top}</tr>{body}</table></div>'


def link(href: str, text: str) -> str:
    return f'<a href="{escape(href)}">{escape(text)}</a>'


def ms(value: float) -> str:
    return escape(duration(value)) if math.isfinite(value) else "-"


def ci(lo: float, hi: float) -> str:
    if not (math.isfinite(lo) and math.isfinite(hi)):
        return "-"
    return f"{escape(duration(lo))} - {escape(duration(hi))}"


def rate(value: float) -> str:
    return escape(percent(value))
