"""``gpubench advise``: which measured target, with which scaling settings, for a traffic
profile and objectives, with how sure the answer is (docs/advise.md)."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Literal

import click

from .._advise import Advice, Objectives, Traffic, advise, campaign_runs
from .._advise._score import parse_criterion, parse_weights, read_criteria
from .._base._errors import ConfigError
from .._base._files import write_text
from .._store._store import Store
from ..cost._catalog import load_catalog
from ..cost._commitments import Commitment, parse_commitment
from ._console import FINITE, as_flags, existing_store, store_option, writable_path


def _prices(given: tuple[str, ...]) -> dict[str, tuple[str, float]]:
    out = {}
    for text in given:
        name, sep, rest = text.partition("=")
        model, _, rate = rest.rpartition(":")
        try:
            out[name] = (model, float(rate))
        except ValueError:
            raise ConfigError("--price", text, "TARGET=BILLING_MODEL:USD_PER_S") from None
        if not sep or not name or not model:
            raise ConfigError("--price", text, "TARGET=BILLING_MODEL:USD_PER_S")
    return out


def _committed(given: tuple[str, ...]) -> dict[str, float]:
    out = {}
    for text in given:
        name, sep, rate = text.partition("=")
        try:
            out[name] = float(rate)
        except ValueError:
            raise ConfigError("--committed", text, "TARGET=USD_PER_HOUR") from None
        if not sep or not name:
            raise ConfigError("--committed", text, "TARGET=USD_PER_HOUR")
    return out


def _commitments(given: tuple[str, ...]) -> dict[str, list[Commitment]]:
    """``TARGET=USD_PER_MONTH[,term=MONTHS]``, repeatable (several per target allowed)."""
    out: dict[str, list[Commitment]] = {}
    for i, text in enumerate(given):
        name, sep, rest = text.partition("=")
        try:
            c = parse_commitment(rest, "month", i)
        except ConfigError:
            c = None
        if not sep or not name or c is None or "=" in rest.split(",")[0]:
            raise ConfigError(
                "--commit", text, "TARGET=USD_PER_MONTH[,term=MONTHS], e.g. a=900,term=12"
            )
        label = f"${c.usd:g}/month" + (f" for {c.min_months:g} months" if c.min_months else "")
        out.setdefault(name, []).append(replace(c, name=label))
    return out


@click.command("advise")
@click.argument("runs", nargs=-1)
@store_option
@click.option("--rate", type=FINITE, default=None, help="mean requests per second")
@click.option("--per-day", type=FINITE, default=None, help="requests per day")
@click.option("--constant", is_flag=True, help="evenly spaced arrivals (default: Poisson)")
@click.option("--profile", default=None, metavar="R0,R1,...", help="relative rates over the day")
@click.option(
    "--trace",
    "trace_path",
    default=None,
    metavar="FILE",
    help="recorded arrivals (.csv or .jsonl, as a replay scenario reads them) instead of a rate",
)
@click.option("--trace-time-column", default="timestamp", show_default=True)
@click.option(
    "--trace-time-unit",
    type=click.Choice(["s", "ms", "us", "ns", "iso"]),
    default="s",
    show_default=True,
)
@click.option("--p95-ms", type=FINITE, required=True, help="latency objective (ms)")
@click.option("--percentile", type=FINITE, default=95.0, show_default=True)
@click.option("--max-cold-rate", type=FINITE, default=None, help="largest share of cold requests")
@click.option("--budget-usd-per-day", type=FINITE, default=None)
@click.option(
    "--price", "prices", multiple=True, metavar="TARGET=MODEL:USD_PER_S", help="repeatable"
)
@click.option(
    "--committed",
    "committed",
    multiple=True,
    metavar="TARGET=USD_PER_HOUR",
    help="a worker on commitment (reserved/active); adds always-warm options priced so",
)
@click.option(
    "--commit",
    "commit",
    multiple=True,
    metavar="TARGET=USD_PER_MONTH[,term=MONTHS]",
    help="a worker on a monthly commitment with a minimum term; against on demand, break-even",
)
@click.option(
    "--horizon-months",
    type=FINITE,
    default=None,
    help="months the capacity is needed (default: each commitment's term)",
)
@click.option(
    "--overflow-depth",
    type=click.IntRange(2),
    default=3,
    show_default=True,
    help="targets in an overflow chain (primary, warm middles, last scaled to zero)",
)
@click.option(
    "--assume-concurrency",
    is_flag=True,
    help="search concurrency per worker where no run measured its slowdown, assuming none",
)
@click.option("--batch", type=FINITE, default=None, metavar="JOBS", help="a batch of JOBS a day")
@click.option(
    "--batch-hours",
    type=click.IntRange(1, 24),
    default=None,
    help="hours the batch must run within: find the best measured window of the day",
)
@click.option(
    "--campaign",
    default=None,
    help="the runs of this campaign (its time zone places them in the day)",
)
@click.option("--resamples", type=click.IntRange(2), default=40, show_default=True)
@click.option("--confidence", type=FINITE, default=0.9, show_default=True)
@click.option("--max-workers", type=click.IntRange(1), default=None)
@click.option(
    "--no-overflow",
    is_flag=True,
    help="do not try pairs (one target kept warm, overflow to another scaled to zero)",
)
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--json", "as_json", is_flag=True, help="print the advice as JSON")
# advrep22: TTFT objective, weighted scores, the HTML page
@click.option("--ttft-p95-ms", type=FINITE, default=None, help="TTFT objective (ms; streamed runs)")
@click.option("--ttft-percentile", type=FINITE, default=95.0, show_default=True)
@click.option(
    "--weight",
    "weights",
    default=None,
    metavar="NAME=W,...",
    help="rank by weighted score: cost, latency, cold, ttft or a --criterion (unnamed: 0)",
)
@click.option(
    "--criterion",
    "criterion",
    multiple=True,
    metavar="NAME=PROVIDER:NUMBER,...",
    help="a user criterion, higher is better (e.g. sla=runpod:99.9,replicate:99.5); repeatable",
)
@click.option("--criteria", "criteria_path", default=None, metavar="FILE", help="criteria TOML")
@click.option("--html", "html_path", default=None, metavar="PATH", help="also write the page")
@as_flags(
    {
        "traffic.rate_per_s": "--rate",
        "traffic.arrivals": "--trace",
        "traffic.profile": "--profile",
        "latency_percentile": "--percentile",
        "replay.path": "--trace",
        "replay.time_column": "--trace-time-column",
        "replay.time_unit": "--trace-time-unit",
        "replay.start_s": "--trace",
        "price_sku": "--price",
        "provider": "--price",
        "*.rate_usd_per_s": "--price",
        "*.committed_usd_per_hour": "--committed",
        "NAME": "--campaign",
    }
)
def advise_cmd(
    runs: tuple[str, ...],
    store_path: str | None,
    rate: float | None,
    per_day: float | None,
    constant: bool,
    profile: str | None,
    trace_path: str | None,
    trace_time_column: str,
    trace_time_unit: str,
    p95_ms: float,
    percentile: float,
    max_cold_rate: float | None,
    budget_usd_per_day: float | None,
    prices: tuple[str, ...],
    committed: tuple[str, ...],
    commit: tuple[str, ...],
    horizon_months: float | None,
    overflow_depth: int,
    assume_concurrency: bool,
    batch: float | None,
    batch_hours: int | None,
    campaign: str | None,
    resamples: int,
    confidence: float,
    max_workers: int | None,
    no_overflow: bool,
    seed: int,
    as_json: bool,
    ttft_p95_ms: float | None,
    ttft_percentile: float,
    weights: str | None,
    criterion: tuple[str, ...],
    criteria_path: str | None,
    html_path: str | None,
) -> None:
    """Recommend a target and scaling settings for a traffic profile and objectives, from the
    measured runs RUN... (ids or 'latest'), or a campaign's (--campaign)."""
    if horizon_months is not None and not horizon_months > 0:
        raise ConfigError("--horizon-months", horizon_months, "months > 0")
    if batch is not None or batch_hours is not None:
        from ._advise_batch import batch_cmd

        objectives = Objectives(p95_ms / 1e3, percentile, max_cold_rate, budget_usd_per_day)
        if rate is not None or per_day is not None or profile or trace_path or constant:
            raise ConfigError("--batch", batch, "a batch alone (no --rate/--per-day/--trace)")
        if html_path is not None:  # the batch advice has no page: say so, not write nothing
            raise ConfigError("--html", html_path, "no --html with --batch (use --json)")
        batch_cmd(
            store_path, runs, campaign, batch, batch_hours, objectives, _prices(prices),
            resamples, confidence, max_workers, seed, as_json,
        )  # fmt: skip
        return
    if campaign is not None:
        with Store(existing_store(store_path), readonly=True) as store:
            runs = tuple(str(r) for r in campaign_runs(store, campaign)[0])
    if not runs:
        raise ConfigError("RUN", None, "at least one stored run id (or 'latest'), or --campaign")
    if trace_path is not None:
        if rate is not None or per_day is not None or profile is not None or constant:
            raise ConfigError(
                "--trace", trace_path, "a trace alone (no --rate/--per-day/--profile)"
            )
        from .._scenarios._replay import _read

        rows = _read(trace_path, trace_time_column, trace_time_unit, None, (), 0.0, None)
        traffic = Traffic.from_trace([r.at_s for r in rows])
    else:
        traffic = _traffic(rate, per_day, constant, profile)
    objectives = Objectives(
        p95_ms / 1e3,
        percentile,
        max_cold_rate,
        budget_usd_per_day,
        None if ttft_p95_ms is None else ttft_p95_ms / 1e3,
        ttft_percentile,
    )
    criteria = _criteria(criterion, criteria_path)
    store_path = existing_store(store_path)
    if html_path is not None:
        reads = {"--store": store_path, "--criteria": criteria_path, "--trace": trace_path}
        writable_path(html_path, "--html", reads=reads)
    with Store(store_path, readonly=True) as store:
        advice = advise(
            store,
            [int(r) if r.isdigit() else r for r in runs],
            traffic,
            objectives,
            prices=_prices(prices),
            committed=_committed(committed),
            catalog=load_catalog(),
            resamples=resamples,
            confidence=confidence,
            max_workers=max_workers,
            seed=seed,
            overflow=not no_overflow,
            weights=None if weights is None else parse_weights(weights),
            criteria=criteria,
            commitments=_commitments(commit),
            horizon_months=horizon_months,
            overflow_depth=overflow_depth,
            assume_concurrency=assume_concurrency,
        )
    if html_path is not None:
        write_text(html_path, advice.to_html())
    if as_json:
        click.echo(json.dumps(advice.to_json(), indent=2))
    else:
        _print(advice)


def _criteria(given: tuple[str, ...], path: str | None) -> dict[str, dict[str, float]] | None:
    out = read_criteria(path) if path is not None else {}
    for text in given:
        name, values = parse_criterion(text)
        if name in out:
            raise ConfigError("--criterion", name, "each criterion named once")
        out[name] = values
    return out or None


def _traffic(
    rate: float | None, per_day: float | None, constant: bool, profile: str | None
) -> Traffic:
    if (rate is None) == (per_day is None):
        raise ConfigError(
            "--rate/--per-day", None, "exactly one of --rate R or --per-day N (or --trace FILE)"
        )
    kind: Literal["poisson", "constant"] = "constant" if constant else "poisson"
    shape = None
    if profile is not None:
        try:
            shape = tuple(float(x) for x in profile.split(","))
        except ValueError:
            raise ConfigError("--profile", profile, "relative rates, e.g. 1,1,2,4,2,1") from None
    mean = rate if rate is not None else Traffic.per_day(per_day or 0).rate_per_s
    return Traffic(mean, kind, shape)


def _print(advice: Advice) -> None:
    from rich.console import Console
    from rich.table import Table

    q = f"p{advice.objectives.latency_percentile:g}"
    table = Table(title=f"{advice.traffic.describe()}; {advice.resamples} resamples")
    cols = ["", "option", "$/day (5-95%)", f"{q} ms (5-95%)", "cold", "P(meets all)"]
    ttft_q = f"TTFT p{advice.objectives.ttft_percentile:g} ms"
    if advice.objectives.ttft_s is not None:
        cols.insert(4, ttft_q)
    if advice.scores is not None:
        cols.append("score")
    for col in cols:
        table.add_column(col)
    for e in advice.options:
        mark = ("*" if e is advice.recommended else "") + ("f" if e.frontier else "")
        c, lat, share = e.cost_usd_per_day, e.latency_s, e.meets_all
        row = [
            mark,
            e.option.label,
            f"{c[0]:,.2f} ({c[1]:,.2f}-{c[2]:,.2f})",
            f"{lat[0] * 1e3:,.0f} ({lat[1] * 1e3:,.0f}-{lat[2] * 1e3:,.0f})",
            f"{e.cold_rate[0]:.1%}",
            f"{share[0]:.0%} ({share[1]:.0%}-{share[2]:.0%})",
        ]
        if e.ttft_s is not None:
            t = e.ttft_s
            row.insert(4, f"{t[0] * 1e3:,.0f} ({t[1] * 1e3:,.0f}-{t[2] * 1e3:,.0f})")
        points = advice.score_of(e)
        if points is not None:
            row.append(f"{points.score:.2f}")
        table.add_row(*row)
    console = Console(soft_wrap=True)
    console.print(table)
    console.print("* recommended, f on the cost/latency frontier (not dominated)")
    if advice.scoring is not None:
        how = "ranks the options" if advice.scoring.ranks else "shown only (--weight ranks)"
        console.print(
            "score: weighted mean of each criterion normalised min-max over the options "
            f"(1 best); {how}",
            markup=False,
        )
    console.print(f"Recommendation: {advice.reason}", markup=False)
    unsettled = advice.unsettled_by
    ranks = advice.scoring is not None and advice.scoring.ranks
    above = "higher-scoring" if ranks else "cheaper"
    if unsettled is None:
        console.print("Stable: no cheaper option is left undecided by the resamples.")
    else:
        console.print(
            f"Unstable: the {above} {unsettled.option.label} met every objective in "
            f"{unsettled.meets_all[0]:.0%} of the resamples, neither ruled in nor out; about "
            f"{advice.more_cold_starts} cold starts of {unsettled.option.target} in all (now "
            f"{advice.cold_starts_measured}) would settle it"
            + (
                f", or about {advice.more_days} days of campaign in all (now "
                f"{advice.days_measured})."
                if advice.more_days is not None
                else "."
            ),
            markup=False,
        )
    for note in advice.notes:
        console.print(f"note: {note}", markup=False)
