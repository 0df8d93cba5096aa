"""``gpubench report``: a stored run (or several) as a page people look at."""

from __future__ import annotations

from pathlib import Path

import click

from .._store import Store
from ._console import existing_store, store_option, writable_path

_SUFFIX = {".html": "html", ".htm": "html", ".json": "json", ".csv": "csv", ".md": "markdown"}


@click.command("report")
@click.argument("run_refs", metavar="RUN...", nargs=-1, required=True)
@click.option(
    "-o", "--output", required=True, type=click.Path(dir_okay=False), help="file to write"
)
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["html", "json", "csv", "markdown"]),
    default=None,
    help="default: from the output's suffix (.html .json .csv .md), else html",
)
@store_option
@click.option("--title", default=None, help="the page's title")
def report_cmd(
    run_refs: tuple[str, ...],
    output: str,
    fmt: str | None,
    store_path: str | None,
    title: str | None,
) -> None:
    """Write a report of RUN... (ids, uuid prefixes, 'latest'): one self-contained HTML file
    with the summary, latency box plots, cold-start phases, days, bursts, streaming and cost."""
    from .._report import build_report, render

    store_path = existing_store(store_path)
    writable_path(output, "--output")
    chosen = fmt or _SUFFIX.get(Path(output).suffix.lower(), "html")
    with Store(store_path, readonly=True) as store:
        content = build_report(store, run_refs, title=title)
    Path(output).write_text(render(content, chosen), encoding="utf-8")
    click.echo(f"wrote {output} ({chosen}, {len(content.runs)} run(s))")
