"""``gpubench advise --batch N --batch-hours H``: the best measured window of the day for a batch,
against the batch spread over the day (docs/advise.md, "Batch work")."""

from __future__ import annotations

import json

import click

from .._advise import BatchAdvice, Objectives, advise_batch
from .._base._errors import ConfigError
from .._store._store import Store
from ..cost._catalog import load_catalog
from ._console import existing_store


def batch_cmd(
    store_path: str | None,
    runs: tuple[str, ...],
    campaign: str | None,
    batch: float | None,
    batch_hours: int | None,
    objectives: Objectives,
    prices: dict[str, tuple[str, float]],
    resamples: int,
    confidence: float,
    max_workers: int | None,
    seed: int,
    as_json: bool,
) -> None:
    if batch is None or batch_hours is None:
        raise ConfigError("--batch", batch, "both --batch JOBS_PER_DAY and --batch-hours H")
    if not runs and campaign is None:
        raise ConfigError("RUN", None, "runs measured at different hours, or --campaign")
    with Store(existing_store(store_path), readonly=True) as store:
        advice = advise_batch(
            store,
            [int(r) if r.isdigit() else r for r in runs],
            batch,
            batch_hours,
            objectives,
            campaign=campaign,
            prices=prices,
            catalog=load_catalog(),
            resamples=resamples,
            confidence=confidence,
            max_workers=max_workers,
            seed=seed,
        )
    if as_json:
        click.echo(json.dumps(advice.to_json(), indent=2))
    else:
        print_batch(advice)


def print_batch(advice: BatchAdvice) -> None:
    from rich.console import Console
    from rich.table import Table

    q = f"p{advice.spread.advice.objectives.latency_percentile:g}"
    hours = Table(title="measured by hour of day (local)")
    for col in ("hour", "runs", "days", "cold starts", "cold p50 s", "execution p50 s"):
        hours.add_column(col)
    for s in advice.slots:
        hours.add_row(
            f"{s.hour:02d}:00", str(len(s.runs)), str(s.days), str(s.cold_starts),
            f"{s.cold_start_p50_s:.2f}", f"{s.execution_p50_s:.2f}",
        )  # fmt: skip
    table = Table(title=f"a batch of {advice.jobs_per_day:,.0f} jobs a day within {advice.hours} h")
    for col in ("", "window", "days/slot", "recommended setting", "$/day (5-95%)", f"{q} s",
                "P(meets all)"):  # fmt: skip
        table.add_column(col)
    for w in (*advice.windows, advice.spread):
        e = w.advice.recommended
        if e is None:
            continue
        c, lat = e.cost_usd_per_day, e.latency_s
        table.add_row(
            "*" if w is advice.best else "",
            w.label,
            "-" if w.start_hour is None else str(w.fewest_days),
            e.option.label,
            f"{c[0]:,.2f} ({c[1]:,.2f}-{c[2]:,.2f})",
            f"{lat[0]:,.2f} ({lat[1]:,.2f}-{lat[2]:,.2f})",
            f"{e.meets_all[0]:.0%}",
        )
    console = Console(soft_wrap=True)
    console.print(hours)
    console.print(table)
    console.print(f"Recommendation: {advice.reason}", markup=False)
    for note in advice.notes:
        console.print(f"note: {note}", markup=False)
