"""The tracker's commands: ``gpubench campaign export`` (slots as data documents) and
``gpubench site build`` (the static site from those documents). See docs/tracker.md."""

from __future__ import annotations

import click
from rich.markup import escape

from ._console import existing_store, out, store_option


@click.command("export")
@click.argument("name", required=False)
@store_option
@click.option("-o", "--output", "data_dir", required=True, metavar="DATA_DIR",
              type=click.Path(file_okay=False),
              help="where data/YYYY/MM/DD/*.json go (the repository root)")  # fmt: skip
@click.option("--origin", default=None, metavar="TEXT",
              help='where the client ran, for the methodology page ("GitHub Actions")')  # fmt: skip
def campaign_export(
    name: str | None, store_path: str | None, data_dir: str, origin: str | None
) -> None:
    """Write each finished slot of NAME as a JSON document under DATA_DIR/data/ (for git)."""
    from ..campaign import export_campaign

    report = export_campaign(existing_store(store_path), name, data_dir, origin=origin)
    for label, paths in (("new", report.written), ("rewritten", report.rewritten)):
        for path in paths:
            out.print(f"{label}: {escape(str(path))}", highlight=False)
    out.print(
        f"{len(report.written)} new, {len(report.rewritten)} rewritten, "
        f"{len(report.unchanged)} unchanged document(s) in {escape(data_dir)}",
        highlight=False,
    )


@click.group("site")
def site() -> None:
    """The public tracker: a static site of a campaign's history (docs/tracker.md)."""


@site.command("build")
@click.argument("data_dir", metavar="DATA_DIR", type=click.Path())
@click.option("-o", "--output", "site_dir", required=True, metavar="SITE_DIR",
              type=click.Path(file_okay=False), help="where the site's pages go")  # fmt: skip
@click.option("--title", default="Serverless GPU tracker", show_default=True,
              help="the site's name, on every page")  # fmt: skip
@click.option("--requests-per-day", default=10_000, show_default=True, type=click.IntRange(1),
              help="the traffic the front page's cost per day is priced at")  # fmt: skip
def site_build(data_dir: str, site_dir: str, title: str, requests_per_day: int) -> None:
    """Build the static site (front page, a page per target, methodology, days, downloads,
    index.json) from DATA_DIR's documents into SITE_DIR."""
    from .._report._site import build_site

    built = build_site(data_dir, site_dir, title=title, requests_per_day=requests_per_day)
    out.print(
        f"{built.pages} pages from {built.documents} documents in {escape(site_dir)} "
        f"(front page {built.front_page_bytes / 1024:.0f} KB)",
        highlight=False,
    )
