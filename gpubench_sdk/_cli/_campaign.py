"""``gpubench campaign ...`` (scheduled studies) and ``gpubench compare`` (the regression gate)."""

from __future__ import annotations

import datetime as dt
import json
import secrets
import shlex
import sys
import time
from collections.abc import Callable
from dataclasses import asdict
from typing import Any, TypeVar

import click
from rich.markup import escape
from rich.table import Table

from .._base._errors import ConfigError
from ._console import (
    EXIT_CODES_HELP,
    ExitCode,
    FiniteRange,
    as_flags,
    err,
    existing_store,
    json_safe,
    out,
    resolve_store,
    stdout_may_close,
    store_option,
)
from ._site import campaign_export

F = TypeVar("F", bound=Callable[..., Any])


def _when(t_ns: int, tz: str) -> str:
    from ..campaign._schedule import zone

    return dt.datetime.fromtimestamp(t_ns / 1e9, zone(tz)).strftime("%Y-%m-%d %H:%M:%S %Z")


def _start_ns(text: str, tz: str) -> int:
    if text == "now":
        return time.time_ns()
    from ..campaign._schedule import zone

    try:
        when = dt.datetime.fromisoformat(text)
    except ValueError:
        raise ConfigError(
            "--start", text, '"now" or an ISO 8601 time, e.g. 2024-06-01T09:00 (in --tz)'
        ) from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=zone(tz))
    return round(when.timestamp() * 1e9)


@click.group("campaign")
def campaign() -> None:
    """Repeat a plan on a schedule across days: variability by day and time of day."""


campaign.add_command(campaign_export)


@campaign.command("create")
@click.argument("plan_path", metavar="PLAN.toml", type=click.Path(dir_okay=False))
@click.option("--every", metavar="DURATION", help="slot interval, e.g. 4h (or give --cron)")
@click.option("--cron", "cron_text", metavar="EXPR", help='5-field cron, e.g. "0 */4 * * *"')
@click.option("--for", "for_text", required=True, metavar="DURATION", help="how long, e.g. 5d")
@click.option("--jitter", default="0s", show_default=True, metavar="DURATION",
              help="shift each slot by a seeded random delay below this")  # fmt: skip
@click.option("--grace", metavar="DURATION",
              help="a slot not started this long after its time is missed "
              "(default: half the gap between slots, at most 1h)")  # fmt: skip
@click.option("--start", default="now", show_default=True, help='"now" or an ISO 8601 time')
@click.option("--tz", default="UTC", show_default=True, help="time zone of --cron and the tables")
@click.option("--seed", type=int, default=None, help="jitter seed (default: drawn and stored)")
@click.option("--name", default=None, help="campaign name (default: the plan's run.name)")
@click.option("--slot-max-requests", type=click.IntRange(1), help="requests cap per slot")
@click.option("--slot-max-cost-usd", type=FiniteRange(min=0, min_open=True),
              help="USD cap per slot (needs prices in the plan)")  # fmt: skip
@click.option("--max-requests", type=click.IntRange(1), help="requests cap for the campaign")
@click.option("--max-cost-usd", type=FiniteRange(min=0, min_open=True),
              help="USD cap for the campaign (needs prices in the plan)")  # fmt: skip
@store_option
@as_flags({"cron": "--cron"})
def campaign_create(
    plan_path: str,
    every: str | None,
    cron_text: str | None,
    for_text: str,
    jitter: str,
    grace: str | None,
    start: str,
    tz: str,
    seed: int | None,
    name: str | None,
    slot_max_requests: int | None,
    slot_max_cost_usd: float | None,
    max_requests: int | None,
    max_cost_usd: float | None,
    store_path: str | None,
) -> None:
    """Store a campaign: PLAN.toml's scenarios against every target at each slot."""
    from ..campaign import Budget, Schedule, create_campaign, parse_duration

    if name is not None and not name.strip():
        raise ConfigError("--name", name, "a campaign name, or no --name for the plan's run.name")
    schedule = Schedule(
        start_ns=_start_ns(start, tz),
        duration_s=parse_duration(for_text, "--for"),
        every_s=None if every is None else parse_duration(every, "--every"),
        cron=cron_text,
        jitter_s=parse_duration(jitter, "--jitter"),
        seed=secrets.randbits(31) if seed is None else seed,
        tz=tz,
        grace_s=None if grace is None else parse_duration(grace, "--grace"),
    )
    budget = Budget(slot_max_requests, slot_max_cost_usd, max_requests, max_cost_usd)
    store_path = _store_of(plan_path, store_path)
    record = create_campaign(plan_path, schedule, name=name, store=store_path, budget=budget)
    from ..campaign import CampaignDB

    with CampaignDB(store_path, readonly=True) as db:
        slots = db.slots(record)
        path = db.path
    out.print(
        f"campaign {escape(record.name)!r}: {len(slots)} slots, {schedule.describe()}, "
        f"grace {record.grace_s:g} s; first at {_when(slots[0].scheduled_ns, tz)}, last at "
        f"{_when(slots[-1].scheduled_ns, tz)}",
        highlight=False,
    )
    command = shlex.join(["gpubench", "campaign", "run", record.name, "--store", str(path)])
    out.print(f"run it with: {command}", highlight=False)  # quoted: a name may hold a space


def _store_of(plan_path: str, store_path: str | None) -> str:
    """The store rule, with the plan's ``run.output`` below --store and $GPUBENCH_STORE."""
    if store_path is not None:
        return store_path
    from .._plan._config import load_config

    return resolve_store(None, load_config(plan_path).run.output)


def _run(
    name: str | None, store_path: str | None, once: bool, heartbeat_s: float, attempts: int
) -> None:
    from ..campaign import run_campaign

    reports = run_campaign(
        existing_store(store_path),
        name,
        once=once,
        heartbeat_s=heartbeat_s,
        max_attempts=attempts,
        echo=lambda line: out.print(escape(line), highlight=False, soft_wrap=True),
    )
    if any(r.status == "failed" for r in reports):
        sys.exit(1)


_HEARTBEAT = click.option("--heartbeat", "heartbeat_s", default=10.0, show_default=True,
                          type=FiniteRange(min=0, min_open=True),
                          help="seconds between liveness updates of a running slot")  # fmt: skip
_ATTEMPTS = click.option("--max-attempts", "attempts", default=3, show_default=True,
                         type=click.IntRange(1),
                         help="tries of a slot whose scheduler died while running it")  # fmt: skip


@campaign.command("run")
@click.argument("name", required=False)
@store_option
@_HEARTBEAT
@_ATTEMPTS
def campaign_run(
    name: str | None, store_path: str | None, heartbeat_s: float, attempts: int
) -> None:
    """Run NAME's slots as they fall due until none is left; resumes after a crash."""
    _run(name, store_path, False, heartbeat_s, attempts)


@campaign.command("tick")
@click.argument("name", required=False)
@store_option
@_HEARTBEAT
@_ATTEMPTS
def campaign_tick(
    name: str | None, store_path: str | None, heartbeat_s: float, attempts: int
) -> None:
    """Run the slot that is due now, if any, and exit (for cron, timers, CronJobs, CI)."""
    _run(name, store_path, True, heartbeat_s, attempts)


@campaign.command("list")
@store_option
def campaign_list(store_path: str | None) -> None:
    """List the campaigns in the store."""
    from collections import Counter

    from ..campaign import CampaignDB

    table = Table()
    for col in ("name", "schedule", "slots", "done", "missed", "pending", "first", "last"):
        table.add_column(col)
    with CampaignDB(existing_store(store_path), readonly=True) as db:
        for name in db.names():
            c = db.get(name)
            slots = db.slots(c)
            n = Counter(s.status for s in slots)
            table.add_row(
                c.name, c.schedule.describe(), str(len(slots)), str(n["done"]),
                str(n["missed"]), str(n["pending"] + n["running"]),
                _when(slots[0].scheduled_ns, c.schedule.tz),
                _when(slots[-1].scheduled_ns, c.schedule.tz),
            )  # fmt: skip
    out.print(table)


@campaign.command("status")
@click.argument("name", required=False)
@store_option
@click.option("--json", "as_json", is_flag=True, help="machine-readable output")
def campaign_status(name: str | None, store_path: str | None, as_json: bool) -> None:
    """Slots by status, the next slot, the running attempt, and spend against the caps."""
    from collections import Counter

    from ..campaign import CampaignDB

    with CampaignDB(existing_store(store_path), readonly=True) as db:
        c = db.get(name)
        slots = db.slots(c)
        attempts = db.attempts(c)
    counts = Counter(s.status for s in slots)
    pending = [s for s in slots if s.status == "pending"]
    running = [a for a in attempts if a.status == "running"]
    requests = sum(a.requests or 0 for a in attempts)
    costs = [a.cost_usd for a in attempts if a.cost_usd is not None]
    data: dict[str, Any] = {
        "name": c.name,
        "schedule": c.schedule.describe(),
        "slots": dict(counts),
        "next_slot": None if not pending else {"slot": pending[0].idx,
                                               "at": _when(pending[0].scheduled_ns, c.schedule.tz)},
        "running": [asdict(a) for a in running],
        "requests": requests,
        "cost_usd": sum(costs) if costs else None,
        "budget": asdict(c.budget),
        "problems": [{"slot": s.idx, "status": s.status, "reason": s.reason}
                     for s in slots if s.status in ("missed", "interrupted", "failed", "skipped")],
    }  # fmt: skip
    if as_json:
        click.echo(json.dumps(data, indent=2))
        return
    out.print(f"campaign {escape(c.name)!r}: {escape(c.schedule.describe())}", highlight=False)
    out.print("slots: " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())))
    if pending:
        out.print(f"next: slot {pending[0].idx} at {data['next_slot']['at']}")
    now = time.time_ns()
    for a in running:
        out.print(
            f"running: slot {a.slot} attempt {a.attempt}, pid {a.pid} on {escape(a.host)}, "
            f"last heartbeat {(now - a.heartbeat_ns) / 1e9:.0f} s ago"
        )
    caps = c.budget
    spend = f"spent: {requests} requests" + (
        f" of max {caps.max_requests}" if caps.max_requests else ""
    )
    if data["cost_usd"] is not None:
        spend += f", ${data['cost_usd']:.4f}" + (
            f" of max ${caps.max_cost_usd:g}" if caps.max_cost_usd else ""
        )
    out.print(spend)
    for p in data["problems"]:
        out.print(f"slot {p['slot']}: {p['status']} ({escape(str(p['reason']))})", highlight=False)


@campaign.command("show")
@click.argument("name", required=False)
@store_option
@click.option("--json", "as_json", is_flag=True, help="machine-readable output")
def campaign_show(name: str | None, store_path: str | None, as_json: bool) -> None:
    """Per-slot series, per-day and per-hour variability tables, and drift, per target."""
    from .._store._store import Store
    from ..campaign import campaign_summary
    from ..campaign._render import summary_renderables

    with Store(existing_store(store_path), readonly=True) as store:
        summary = campaign_summary(store, name)
    if as_json:
        click.echo(json.dumps(json_safe(asdict(summary)), indent=2, default=str))
        return
    for part in summary_renderables(summary):
        out.print(part)


@click.command("compare", epilog=EXIT_CODES_HELP)
@click.option("--baseline", required=True, metavar="RUN_OR_CAMPAIGN",
              help="run (id, uuid prefix, latest) or campaign (NAME or campaign:NAME)")  # fmt: skip
@click.option("--candidate", default="latest", show_default=True, metavar="RUN_OR_CAMPAIGN",
              help="what is judged against the baseline")  # fmt: skip
@click.option(
    "--fail-on",
    "fail_on",
    required=True,
    multiple=True,
    metavar="RULES",
    help='what fails the candidate: changes from the baseline, e.g. "p95>+20%,cold_start.p50>+2s"'
    ', or limits on the candidate, e.g. "p95>500ms"; repeatable (docs/cli.md)',
)
@click.option("--target", default=None, help="compare only this target")
@click.option("--scenario", type=click.IntRange(0), default=None,
              help="scenario index (default: all measured requests)")  # fmt: skip
@click.option(
    "--significant",
    "significant_only",
    is_flag=True,
    help="fail only when the whole 95% CI of the change is past the threshold",
)
@store_option
@click.option("--json", "as_json", is_flag=True, help="machine-readable output")
def compare(
    baseline: str,
    candidate: str,
    fail_on: tuple[str, ...],
    target: str | None,
    scenario: int | None,
    significant_only: bool,
    store_path: str | None,
    as_json: bool,
) -> None:
    """Gate on a regression: exit 1 when a --fail-on rule fails (a candidate with no data to
    judge fails too), 2 when one cannot be checked (the baseline lacks the data, a bad rule,
    an unknown run), 0 when all pass."""
    from .._store._store import Store
    from ..campaign import parse_fail_on, regression_gate
    from ..campaign._render import gate_table

    rules = parse_fail_on(fail_on)  # before opening anything: a typo fails fast
    with Store(existing_store(store_path), readonly=True) as store:
        base, cand, report = regression_gate(
            store, baseline, rules, candidate=candidate, target=target, scenario=scenario,
            significant_only=significant_only,
        )  # fmt: skip
    with stdout_may_close():  # the verdict is known: a closed pipe cannot change it
        if as_json:
            data = {
                "baseline": base.label,
                "candidate": cand.label,
                "passed": report.passed,
                "rows": [asdict(r) for r in report.rows],
            }
            click.echo(json.dumps(json_safe(data), indent=2, default=str))
        else:
            title = f"{base.label} (baseline) vs {cand.label} (candidate)"
            out.print(gate_table(report.rows, title))
            failed, missing = report.failed, report.missing
            if failed:
                rules_text = ", ".join(f"{r.target}: {r.threshold.text}" for r in failed)
                out.print(f"[bold red]FAIL[/]: {escape(rules_text)}", highlight=False)
            if missing:
                rules_text = ", ".join(f"{r.target}: {r.threshold.metric}" for r in missing)
                err.print(
                    f"[yellow]cannot check[/] {escape(rules_text)}: the baseline has no such data "
                    "(no cold start, no first byte, or no price in the plan)",
                    highlight=False,
                )
            if report.passed:
                out.print("[green]PASS[/]: every rule holds")
    if report.failed:
        sys.exit(ExitCode.THRESHOLD_FAILED)
    if report.missing:
        sys.exit(ExitCode.USAGE)
