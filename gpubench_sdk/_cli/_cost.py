"""``gpubench cost``: the daily bill across providers, the price of a stored run, what-ifs."""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict
from typing import Any, TypeVar

import click
import numpy as np

from .._base._errors import ConfigError
from .._report._collect import bill_groups
from .._store._store import RunInfo, Store
from ..cost import (
    GroupBill,
    arrivals_from_run,
    distributions_from_run,
    load_catalog,
    poisson_arrivals,
    scenario_bill,
    sweep,
)
from ..cost._policy import WORKER_POLICIES, WorkerPolicy, provider_policy
from ..cost._priced import plan_has_prices, priced_targets, target_rate
from ..cost._reference import (
    REFERENCE_INFERENCE_S,
    REFERENCE_LINES,
    REFERENCE_REQUESTS_PER_DAY,
    REFERENCE_SCALE_DOWN_EVENTS,
    REFERENCE_SCALE_DOWN_S,
)
from ..cost._sensitivity import sweep_sensitivity
from ..cost._tables import (
    TARGET_SPEC,
    TargetSpec,
    bill_table,
    parse_target_spec,
    run_cost_table,
    sweep_table,
)
from ._console import FiniteRange, as_flags, err, existing_store, out, store_option
from ._cost_common import catalog_options, price_warnings
from ._cost_plans import cost_break_even, cost_catalog

F = TypeVar("F", bound=Callable[..., Any])

# Providers on an A100 80GB (or the closest SKU) when `cost scenario` is given no --target.
DEFAULT_TARGETS = (
    "huggingface:aws/A100",
    "replicate:A100 80GB",
    "runpod:A100 80GB",
    "inferless:A100 (shared)",
    "modal:A100-80GB",
)


@click.group("cost")
def cost() -> None:
    """Price runs and traffic scenarios with each provider's billing rules."""


cost.add_command(cost_break_even)
cost.add_command(cost_catalog)


@cost.command("scenario")
@click.option(
    "--requests", "requests_per_day", default=1000, show_default=True, type=click.IntRange(0)
)
@click.option("--inference-s", default=12.0, show_default=True, type=FiniteRange(0))
@click.option("--scale-down-s", default=60.0, show_default=True, type=FiniteRange(0))
@click.option(
    "--events", default=100, show_default=True, type=click.IntRange(1), help="scale-down events/day"
)
@click.option(
    "--cold-start-s",
    default=30.0,
    show_default=True,
    type=FiniteRange(0),
    help="per event, for targets without cold=",
)
@click.option(
    "-t", "--target", "targets", multiple=True, metavar="SPEC", help=TARGET_SPEC + "; repeatable"
)
@click.option("--exact", is_flag=True, help="bill exact seconds, no rounding per interval")
@click.option(
    "--ignore-min-scale-down", is_flag=True, help="do not raise delays to platform minimums"
)
@click.option(
    "--reference",
    is_flag=True,
    help="the reference report's scenario, rates and implied cold starts, "
    "billed its way (exact, 60 s for all)",
)
@click.option(
    "--with-rules",
    is_flag=True,
    help="with --reference: apply each provider's rounding and minimum delay",
)
@click.option("--json", "as_json", is_flag=True, help="machine-readable output")
@catalog_options
def cost_scenario(
    requests_per_day: int,
    inference_s: float,
    scale_down_s: float,
    events: int,
    cold_start_s: float,
    targets: tuple[str, ...],
    exact: bool,
    ignore_min_scale_down: bool,
    reference: bool,
    with_rules: bool,
    as_json: bool,
    prices: tuple[str, ...],
    max_age_days: float,
) -> None:
    """The daily bill of a traffic scenario across providers (the reference report's table)."""
    lines: list[tuple[str, str, float, float]] = []  # label, billing, rate, cold start
    reported: list[float] | None = None
    if with_rules and not reference:  # it would be ignored: say so rather than print a table
        raise ConfigError(
            "--with-rules",
            True,
            "--reference with it (it sets how the reference scenario is billed), or leave it out",
        )
    if reference:
        requests_per_day, inference_s = REFERENCE_REQUESTS_PER_DAY, REFERENCE_INFERENCE_S
        scale_down_s, events = REFERENCE_SCALE_DOWN_S, REFERENCE_SCALE_DOWN_EVENTS
        exact, ignore_min_scale_down = (
            exact or not with_rules,
            ignore_min_scale_down or not with_rules,
        )
        lines = [(r.label, r.billing, r.rate_usd_per_s, r.cold_start_s) for r in REFERENCE_LINES]
        reported = [r.report_total_usd for r in REFERENCE_LINES]
    with price_warnings():
        catalog = load_catalog(prices, max_age_days=max_age_days)
        for text in targets or (() if reference else DEFAULT_TARGETS):
            spec = parse_target_spec(text, cold_start_s)
            lines.append((spec.label, spec.provider, target_rate(catalog, spec), spec.cold_start_s))
        bills = [
            scenario_bill(
                label=label,
                billing=catalog.billing_model(billing),
                rate_usd_per_s=rate,
                requests_per_day=requests_per_day,
                inference_s=inference_s,
                scale_down_s=scale_down_s,
                scale_down_events=events,
                cold_start_s=cold,
                round_per_interval=not exact,
                enforce_min_scale_down=not ignore_min_scale_down,
            )
            for label, billing, rate, cold in lines
        ]
    if as_json:
        rows = [
            {
                **asdict(b),
                "idle_s_per_event": b.idle_s_per_event,
                "cold_start_s_per_event": b.cold_start_s_per_event,
                "per_1k_requests_usd": b.per_1k_requests_usd,
            }
            for b in bills
        ]
        click.echo(json.dumps(rows, indent=2))
        return
    method = "exact seconds" if exact else "rounded per billed interval"
    title = (
        f"daily bill: {requests_per_day:,} requests x {inference_s:g} s, scale-down "
        f"{scale_down_s:g} s, {events} scale-down events ({method})"
    )
    out.print(bill_table(bills, title, reported))


@cost.command("run")
@click.argument("run_ref", metavar="RUN", default="latest")
@store_option
@click.option(
    "--price",
    "price_specs",
    multiple=True,
    metavar="TARGET=SPEC",
    help="TARGET=provider[:SKU][,rate=USD_PER_S]; default: the plan's price_sku/price_per_s_usd",
)
@click.option("--scale-down-s", type=FiniteRange(0), default=None, help="default: the provider's")
@click.option("--json", "as_json", is_flag=True, help="machine-readable output")
@catalog_options
def cost_run(
    run_ref: str,
    store_path: str | None,
    price_specs: tuple[str, ...],
    scale_down_s: float | None,
    as_json: bool,
    prices: tuple[str, ...],
    max_age_days: float,
) -> None:
    """Estimate what each target of a stored RUN was billed (RUN: id, uuid prefix, 'latest')."""
    given: dict[str, TargetSpec] = {}
    for text in price_specs:
        name, sep, rest = text.partition("=")
        if not sep:
            raise ConfigError("--price", text, "TARGET=provider[:SKU][,rate=USD_PER_S]")
        try:
            given[name] = parse_target_spec(rest)
        except ConfigError as exc:  # it names --target, the flag of the other commands
            raise ConfigError(f"--price {name}", rest, exc.expected) from None
    with price_warnings(), Store(existing_store(store_path), readonly=True) as store:
        catalog = load_catalog(prices, max_age_days=max_age_days)
        info = store.run(run_ref)
        unknown = sorted(set(given) - {t.name for t in info.targets})
        if unknown:
            names = [t.name for t in info.targets]
            raise ConfigError("--price", unknown[0], f"a target of run {info.id}: {names}")
        costs = priced_targets(store, info, catalog, given, scale_down_s, require_price=True)
    if as_json:
        rows = [
            {
                "target": c.target,
                "requests": c.requests,
                "workers": c.workers,
                "billed_s": c.bill.billed_s,
                "fees_usd": c.fees_usd,
                "total_usd": c.total_usd,
                **{k: v for k, v in asdict(c.units).items() if k != "total_usd"},
            }
            for c in costs
        ]
        click.echo(json.dumps(rows, indent=2))
        return
    out.print(run_cost_table(costs, f"run {info.id} {info.name!r}: estimated bill"))


def print_run_costs(store: Store, info: RunInfo) -> None:
    """After a run's summary: the estimated bill of the targets whose plan names a price
    (``gpubench run`` gathers its stale-price warnings into one line)."""
    if not plan_has_prices(info):
        return
    costs = priced_targets(store, info, load_catalog(), {}, require_price=False)
    if costs:
        out.print(run_cost_table(costs, "estimated bill (from measured invocations)"))
    for line in bill_group_lines(bill_groups(store, info, costs)):
        out.print(line, highlight=False)


# The unit a group's bill is best read in, most specific first: (UnitCosts field, wording).
_GROUP_UNITS = (
    ("per_image_usd", "image"),
    ("per_audio_minute_usd", "audio min"),
    ("per_million_input_tokens_usd", "1M input tokens"),
    ("per_million_output_tokens_usd", "1M output tokens"),
    ("per_request_usd", "request"),
)


def bill_group_lines(bills: Sequence[tuple[str, str, GroupBill]]) -> list[str]:
    """One line per target and grouping: each group's cost per its most specific unit."""
    lines: dict[tuple[str, str], list[str]] = {}
    for target, grouping, bill in bills:
        field, unit = next(
            ((f, u) for f, u in _GROUP_UNITS if getattr(bill.units, f) is not None),
            ("per_request_usd", "request"),
        )
        value = getattr(bill.units, field) or 0.0
        each = f"{bill.group} ${value:.6g} per {unit} ({bill.requests})"
        lines.setdefault((target, grouping), []).append(each)
    return [f"{t}: bill by {g}: " + ", ".join(parts) for (t, g), parts in lines.items()]


def _numbers(text: str, name: str) -> list[float]:
    try:
        values = [math.inf if v.strip() in ("inf", "never") else float(v) for v in text.split(",")]
    except ValueError:
        raise ConfigError(name, text, "comma-separated numbers, e.g. 5,30,60,300") from None
    if any(not v >= 0 for v in values):
        raise ConfigError(name, text, "comma-separated numbers >= 0")
    return values


WHATIF_MAX_REQUESTS = 5_000_000  # ~30 s a setting on one core: a bound a typo cannot pass
_QUIET_BELOW = 200_000  # requests a sweep simulates in a second or two: no progress lines


def _sweep_progress(requests: int) -> Callable[[int, int], None] | None:
    """A line on stderr after each simulated setting, for a sweep long enough to wait for."""
    if requests < _QUIET_BELOW:
        return None
    started = time.monotonic()

    def report(done: int, total: int) -> None:
        took = time.monotonic() - started
        err.print(f"simulated {done}/{total} settings on {requests:,} requests ({took:.0f} s)")

    return report


@cost.command("whatif")
@click.option(
    "-t",
    "--target",
    "spec_text",
    required=True,
    metavar="SPEC",
    help="provider[/plan][:SKU][,rate=USD_PER_S]",
)
@click.option("--rps", type=FiniteRange(0), default=None, help="mean requests per second (Poisson)")
@click.option("--hours", default=24.0, show_default=True, type=FiniteRange(0, min_open=True))
@click.option("--profile", default=None, metavar="R0,R1,...", help="relative rates over the day")
@click.option("--exec-s", type=FiniteRange(0), default=None, help="execution seconds (fixed)")
@click.option("--cold-s", type=FiniteRange(0), default=None, help="cold start seconds (fixed)")
@click.option(
    "--from-run",
    default=None,
    metavar="RUN",
    help="use RUN's measured cold starts and execution (and its arrivals without --rps)",
)
@click.option("--run-target", default=None, help="the target of --from-run")
@store_option
@click.option("--scale-down", "scale_downs", default="5,30,60,300,900", show_default=True)
@click.option("--min-workers", "min_workers", default="0,1", show_default=True)
@click.option("--max-workers", default=10, show_default=True, type=click.IntRange(1))
@click.option("--concurrency", default=1, show_default=True, type=click.IntRange(1))
@click.option("--slo-s", default=60.0, show_default=True, type=FiniteRange(0))
@click.option(
    "--slo-percentile",
    default=95.0,
    show_default=True,
    type=FiniteRange(0, 100, min_open=True),
)
@click.option("--seed", default=0, show_default=True, type=int)
@click.option(
    "--resamples",
    default=20,
    show_default=True,
    type=click.IntRange(0),
    help="with measured samples (--from-run): bootstrap resamples for the answer's interval "
    "(0: none)",
)
@click.option(
    "--worker-policy",
    type=click.Choice(WORKER_POLICIES),
    default=None,
    help="which idle worker takes a request; default: the provider's stated policy",
)
@click.option(
    "--max-requests",
    default=WHATIF_MAX_REQUESTS,
    show_default=True,
    type=click.IntRange(1),
    help="refuse a --rps x --hours that would simulate more requests than this",
)
@catalog_options
@as_flags(
    {
        "price_sku": "--target",
        "provider": "--target",
        "price_per_s_usd": "--target",
        "rate_per_s": "--rps",
        "daily_profile": "--profile",
        "slo_percentile": "--slo-percentile",
        "scale_down_s": "--scale-down",
        "execution_s": "--exec-s",
        "cold_start_s": "--cold-s",
    }
)
def cost_whatif(
    spec_text: str,
    rps: float | None,
    hours: float,
    profile: str | None,
    exec_s: float | None,
    cold_s: float | None,
    from_run: str | None,
    run_target: str | None,
    store_path: str | None,
    scale_downs: str,
    min_workers: str,
    max_workers: int,
    concurrency: int,
    slo_s: float,
    slo_percentile: float,
    seed: int,
    resamples: int,
    worker_policy: WorkerPolicy | None,
    max_requests: int,
    prices: tuple[str, ...],
    max_age_days: float,
) -> None:
    """Sweep scale-down delays and min workers on a traffic trace; pick the cheapest meeting
    the latency SLO."""
    execution: Any = exec_s
    cold: Any = cold_s
    arrivals = None
    if from_run is not None:
        if run_target is None:
            raise ConfigError("--run-target", None, "the target of --from-run to take samples from")
        with Store(existing_store(store_path), readonly=True) as store:
            names = [t.name for t in store.run(from_run).targets]
            if run_target not in names:
                raise ConfigError("--run-target", run_target, f"a target of the run: {names}")
            dist = distributions_from_run(store, from_run, run_target)
            if rps is None:
                arrivals = arrivals_from_run(store, from_run, run_target)
        execution = dist.execution_s if execution is None else execution
        if cold is None and dist.cold_start_s.size:
            cold = dist.cold_start_s
    if execution is None or cold is None:
        raise ConfigError("--exec-s/--cold-s", None, "seconds, or --from-run with measured ones")
    if arrivals is None:
        if rps is None:
            raise ConfigError(
                "--rps", None, "a mean request rate, or --from-run to replay arrivals"
            )
        shape = _numbers(profile, "--profile") if profile else None
        expected = rps * hours * 3600  # a profile keeps the mean rate, so the count too
        if expected > max_requests:
            raise ConfigError(
                "--rps",
                rps,
                f"at most --max-requests={max_requests:,} simulated requests: {rps:g}/s for "
                f"{hours:g} h is about {expected:,.0f}; lower --rps or --hours, or raise "
                f"--max-requests (each setting takes ~1 s per 150,000 requests)",
            )
        arrivals = poisson_arrivals(
            rps, hours * 3600, daily_profile=shape, seed=seed, limit=max_requests
        )
    mins = [int(v) for v in _numbers(min_workers, "--min-workers")]
    spec = parse_target_spec(spec_text)
    policy = worker_policy or provider_policy(spec.provider).policy
    with price_warnings():
        catalog = load_catalog(prices, max_age_days=max_age_days)
        common: dict[str, Any] = dict(
            billing=catalog.billing_model(spec.provider),
            rate_usd_per_s=target_rate(catalog, spec),
            scale_down_s=_numbers(scale_downs, "--scale-down"),
            min_workers=mins,
            max_workers=max(max_workers, *mins),
            concurrency=concurrency,
            horizon_s=hours * 3600 if rps is not None else None,
            worker_policy=policy,
        )
        result = sweep(
            arrivals,
            execution_s=execution,
            cold_start_s=cold,
            slo_latency_s=slo_s,
            slo_percentile=slo_percentile,
            seed=seed,
            progress=_sweep_progress(len(arrivals)),
            **common,
        )
    title = f"what-if: {spec_text}, {len(arrivals):,} requests, {policy.replace('_', ' ')} first"
    out.print(sweep_table(result, title))
    target = f"p{slo_percentile:g} <= {slo_s:g} s"
    if result.best is None:
        out.print(f"no setting meets {target}: try more min workers or a looser SLO")
    else:
        s = result.best.settings
        out.print(
            f"cheapest meeting {target}: min_workers={s.min_workers}, "
            f"scale_down_s={s.scale_down_s:g} (${result.best.cost_usd:,.3f})"
        )
    measured = not (np.isscalar(execution) and np.isscalar(cold))
    if measured and resamples:
        spread = sweep_sensitivity(
            arrivals, result, execution_s=execution, cold_start_s=cold,
            resamples=resamples, seed=seed, **common,
        )  # fmt: skip
        if spread is not None:
            q = f"p{slo_percentile:g}"
            out.print(
                f"sensitivity to the measured samples ({spread.resamples} bootstrap resamples, "
                f"{spread.low_pct:g}-{spread.high_pct:g}%): bill ${spread.cost_usd[0]:,.3f}"
                f"-${spread.cost_usd[1]:,.3f}, {q} {spread.latency_s[0]:.2f}-"
                f"{spread.latency_s[1]:.2f} s; the same setting chosen in "
                f"{100 * spread.same_best:.0f}% of them"
            )
