"""``gpubench report``: stored runs (or a campaign's) as a page people compare providers by."""

from __future__ import annotations

from pathlib import Path

import click

from .._base._errors import ConfigError
from .._base._files import write_text
from .._store._store import Store
from ._console import FiniteRange, existing_store, store_option, writable_path

_SUFFIX = {".html": "html", ".htm": "html", ".json": "json", ".csv": "csv", ".md": "markdown"}


@click.command("report")
@click.argument("run_refs", metavar="[RUN]...", nargs=-1)
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
@click.option(
    "--campaign",
    default=None,
    metavar="NAME",
    help="report every run of this campaign (its slots' latest attempts), with any RUN given",
)
@click.option(
    "--layout",
    type=click.Choice(["comparison", "reference"]),
    default="comparison",
    show_default=True,
    help="comparison: the four verdicts first, then details; reference: the reference "
    "report's sections in its order",
)
@click.option(
    "--requests-per-day",
    default=1000,
    show_default=True,
    type=click.IntRange(1),
    help="the traffic the cost-per-day comparison prices",
)
@click.option(
    "--advice",
    "advice_path",
    default=None,
    metavar="FILE",
    help="add gpubench advise's page (its --json output) to the report",
)
@click.option("--scale-down-s", default=60.0, show_default=True, type=FiniteRange(0))
@click.option(
    "--scale-down-events",
    default=100,
    show_default=True,
    type=click.IntRange(1),
    help="times a day the workers scale to zero (each: a cold start and an idle delay billed)",
)
def report_cmd(
    run_refs: tuple[str, ...],
    output: str,
    fmt: str | None,
    store_path: str | None,
    title: str | None,
    campaign: str | None,
    layout: str,
    advice_path: str | None,
    requests_per_day: int,
    scale_down_s: float,
    scale_down_events: int,
) -> None:
    """Write a report of RUN... (ids, uuid prefixes, 'latest') and/or a campaign's runs: one
    self-contained HTML file that answers which target is best at cold start, day-to-day
    variability, latency under a burst and cost per day, then the details."""
    from .._report import DailyTraffic, build_report, render

    if not run_refs and not campaign:
        raise ConfigError("RUN", "", "run ids, uuid prefixes or 'latest', or --campaign NAME")
    store_path = existing_store(store_path)
    writable_path(output, "--output", reads={"--store": store_path, "--advice": advice_path})
    chosen = fmt or _SUFFIX.get(Path(output).suffix.lower(), "html")
    traffic = DailyTraffic(requests_per_day, scale_down_s, scale_down_events)
    with Store(store_path, readonly=True) as store:
        refs: list[int | str] = list(run_refs)
        if campaign:
            from ..campaign import campaign_summary

            runs = campaign_summary(store, campaign).runs
            if not runs:
                raise ConfigError("--campaign", campaign, "a campaign with at least one run")
            refs += runs
        advice = None
        if advice_path is not None:
            from .._report._advise import read_advice

            advice = read_advice(advice_path)
        content = build_report(
            store, refs, title=title, traffic=traffic, layout=layout, advice=advice
        )
    write_text(output, render(content, chosen))
    click.echo(f"wrote {output} ({chosen}, {layout} layout, {len(content.runs)} run(s))")
