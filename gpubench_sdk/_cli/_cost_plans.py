"""``gpubench cost break-even``, ``gpubench cost catalog`` and ``gpubench run --dry-run``:
what to commit to, what the prices rest on, and what a plan will cost, before anything is
spent."""

from __future__ import annotations

import datetime as dt
import json

import click
from rich.table import Table

from .._base._errors import ConfigError
from .._plan._config import RunConfig
from ..cost import load_catalog
from ..cost._commitments import compare_commitments, parse_commitment
from ..cost._dryrun import dry_run
from ..cost._priced import target_rate
from ..cost._tables import commitments_table, dry_run_table, parse_target_spec
from ._console import FiniteRange, out
from ._cost_common import catalog_options, price_warnings


@click.command("break-even")
@click.option(
    "-t",
    "--target",
    "spec_text",
    required=True,
    metavar="SPEC",
    help="the on-demand price: provider[/plan]:SKU or provider,rate=USD_PER_S",
)
@click.option(
    "--hourly",
    multiple=True,
    metavar="[NAME=]USD[,term=MONTHS]",
    help="a worker kept on, billed per hour (reserved/active); repeatable",
)
@click.option(
    "--monthly",
    multiple=True,
    metavar="[NAME=]USD[,term=MONTHS]",
    help="a worker committed per month, paid for at least `term` months; repeatable",
)
@click.option(
    "--need-months",
    type=FiniteRange(0, min_open=True),
    default=None,
    help="how long you need the capacity (default: each option's term, at least a month)",
)
@click.option(
    "--billed-s-per-request",
    type=FiniteRange(0, min_open=True),
    default=None,
    help="also give the break-even point in requests per day",
)
@click.option("--json", "as_json", is_flag=True, help="machine-readable output")
@catalog_options
def cost_break_even(
    spec_text: str,
    hourly: tuple[str, ...],
    monthly: tuple[str, ...],
    need_months: float | None,
    billed_s_per_request: float | None,
    as_json: bool,
    prices: tuple[str, ...],
    max_age_days: float,
) -> None:
    """The utilisation at which a commitment beats on demand, and which option wins where
    ("never" when a commitment costs more than a worker billed all day on demand)."""
    options = [parse_commitment(t, "hour", i) for i, t in enumerate(hourly)]
    options += [parse_commitment(t, "month", i) for i, t in enumerate(monthly)]
    if not options:
        raise ConfigError("--hourly/--monthly", None, "at least one commitment to compare")
    spec = parse_target_spec(spec_text)
    with price_warnings():
        rate = target_rate(load_catalog(prices, max_age_days=max_age_days), spec)
    result = compare_commitments(
        rate, options, need_months=need_months, billed_s_per_request=billed_s_per_request
    )
    if as_json:
        rows = [
            {
                "option": line.commitment.name,
                "per": line.commitment.per,
                "usd": line.commitment.usd,
                "min_months": line.commitment.min_months,
                "usd_per_day": line.usd_per_day,
                "break_even_utilization": line.break_even_utilization,
                "break_even": "never" if line.break_even_utilization is None else "pays",
                "break_even_requests_per_day": line.break_even_requests_per_day,
                "wins_from_utilization": line.wins_from,
            }
            for line in result.lines
        ]
        doc = {
            "on_demand_usd_per_s": rate,
            "on_demand_wins_below": result.on_demand_wins_below,
            "options": rows,
        }
        click.echo(json.dumps(doc, indent=2))
        return
    out.print(commitments_table(result, f"break-even against {spec_text} (${rate:g}/s)"))
    below = result.on_demand_wins_below
    if below >= 1.0:
        out.print("on demand wins at every utilisation: no commitment ever pays")
    else:
        best = next(line for line in result.lines if line.wins_from is not None)
        out.print(
            f"on demand wins below {100 * below:.1f}% utilisation "
            f"({below * 24:.1f} billed hours a day); above it, {best.commitment.name}"
        )


def print_dry_run(config: RunConfig) -> None:
    """``gpubench run --dry-run``: what the plan will send and cost; nothing is sent."""
    with price_warnings():
        plan = dry_run(config)
    title = f"dry run of {config.run.name!r}: nothing sent"
    out.print(dry_run_table(plan, title))
    expected, worst = plan.duration_s(worst=False), plan.duration_s(worst=True)
    span = "?" if expected is None else f"{expected:,.0f} s"
    most = "?" if worst is None else f"{worst:,.0f} s"
    out.print(
        f"duration: about {span}, at most {most} (requests taking {plan.execution_s:g} s, "
        f"{plan.execution_from}; at most: each to its timeout_s)"
    )
    for name, price in plan.prices.items():
        if price is None:
            out.print(f"{name}: no price (set price_sku or price_per_s_usd to see its cost)")
        else:
            out.print(
                f"{name}: ${price.rate_usd_per_s:g}/s ({price.rate_from}), billing rules from "
                f"{price.billing_from}"
            )


@click.command("catalog")
@click.option("--provider", default=None, help="only this provider's entries")
@click.option("--stale", is_flag=True, help="only entries older than --max-age-days")
@click.option("--json", "as_json", is_flag=True, help="machine-readable output")
@click.option(
    "--prices",
    multiple=True,
    type=click.Path(dir_okay=False, exists=True),
    help="price override file (TOML or JSON, the catalog's schema); repeatable",
)
@click.option(
    "--max-age-days",
    default=180.0,
    show_default=True,
    type=FiniteRange(0),
    help="mark prices read longer ago than this",
)
def cost_catalog(
    provider: str | None,
    stale: bool,
    as_json: bool,
    prices: tuple[str, ...],
    max_age_days: float,
) -> None:
    """Every catalog price with its unit, source and the date it was read, oldest first."""
    catalog = load_catalog(prices, max_age_days=max_age_days)
    today = dt.date.today()
    entries = sorted(catalog.prices.values(), key=lambda e: (e.read_on, e.provider, e.sku))
    if provider is not None:
        entries = [e for e in entries if e.provider == provider.strip().lower()]
        if not entries:
            raise ConfigError("--provider", provider, f"one of {catalog.providers()}")
    rows = [
        {
            "provider": e.provider,
            "sku": e.sku,
            "price_usd": e.price_usd,
            "unit": e.unit,
            "read_on": e.read_on.isoformat(),
            "age_days": (today - e.read_on).days,
            "stale": (today - e.read_on).days > max_age_days,
            "source": e.source,
            "note": e.note,
        }
        for e in entries
    ]
    if stale:
        rows = [r for r in rows if r["stale"]]
    if as_json:
        click.echo(json.dumps(rows, indent=2))
        return
    table = Table(title=f"price catalog {catalog.version} ({len(rows)} entries, oldest first)")
    for name in ("provider", "sku", "price", "read on", "age d", "source"):
        table.add_column(name, overflow="fold")
    for r in rows:
        age = f"[yellow]{r['age_days']}[/]" if r["stale"] else str(r["age_days"])
        price = f"{r['price_usd']:g} {str(r['unit']).removeprefix('usd_')}"
        cells = (str(r["provider"]), str(r["sku"]), price, str(r["read_on"]), age)
        table.add_row(*cells, str(r["source"]))
    out.print(table)
