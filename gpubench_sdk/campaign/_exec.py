"""Creating a campaign and running its slots: a long-running scheduler, or one tick.

Crash safety, in the order things happen to a slot:

1. ``claim``: one transaction reaps attempts whose process died, records slots past their
   grace window as missed, and marks the earliest due slot ``running`` with this process's
   host, pid and a heartbeat. Only one slot of a campaign runs at a time.
2. The slot's run is an ordinary run (name ``campaign NAME slot K attempt A``); every request
   is committed as it completes, so a SIGKILL loses nothing already measured.
3. A heartbeat thread refreshes the attempt every ``heartbeat_s``.
4. ``finish`` records the run, its requests and estimated cost, and tags it.

A dead attempt (its pid gone on this host, or no heartbeat for ``stale_s`` from another host)
is recorded as ``interrupted`` with its samples kept, and the slot is **resumed as a new
attempt** if it is still inside its grace window (and has had fewer than ``max_attempts``);
otherwise the slot is recorded as ``interrupted``. The analysis uses each slot's latest attempt.
"""

from __future__ import annotations

import contextlib
import copy
import logging
import signal
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import Any
from urllib.parse import urlsplit

from .._base._errors import ConfigError, GpubenchError
from .._base._secrets import MASK, redact
from .._plan._build import build_run
from .._plan._config import RunConfig, load_config, parse_config
from .._runner._multiproc import run_blocking
from .._store._store import Store
from ._db import CampaignDB
from ._records import Budget, CampaignRecord, Claim
from ._schedule import Schedule, now_ns

log = logging.getLogger("gpubench.campaign")

Echo = Callable[[str], None]


@dataclass(frozen=True, slots=True)
class SlotReport:
    """What one scheduler pass did with one slot."""

    slot: int
    attempt: int
    status: str  # the attempt's: completed, failed, cancelled
    run_id: int | None
    requests: int | None
    cost_usd: float | None
    error: str | None


def _has_price(target: dict[str, Any]) -> bool:
    return bool(target.get("price_sku")) or target.get("price_per_s_usd") is not None


def create_campaign(
    plan: str | Path | RunConfig,
    schedule: Schedule,
    *,
    name: str | None = None,
    store: str | Path | None = None,
    budget: Budget | None = None,
) -> CampaignRecord:
    """Store a new campaign: the plan (without secrets), its slots and budgets.

    ``store`` defaults to the plan's ``run.output``, ``name`` to its ``run.name``.
    """
    budget = budget or Budget()
    config = plan if isinstance(plan, RunConfig) else load_config(plan)
    stored = config.stored()
    masked = _masked_path(config.model_dump(mode="json"), stored)
    if masked is not None:
        raise ConfigError(
            masked,
            "(hidden)",
            "no credential written in the plan (a header, option, URL password or query "
            "value): a campaign "
            "stores its plan and reruns it, so reference secrets with api_key_env / api_key_file",
        )
    regions: dict[str, str | None] = {}
    for i, t in enumerate(config.targets):
        regions[t.name] = t.region
        if budget.needs_prices and not _has_price(t.model_dump()):
            raise ConfigError(
                f"targets[{i}].price_sku",
                None,
                "a catalog SKU or price_per_s_usd for every target when a campaign has a USD "
                "cap (--max-cost-usd / --slot-max-cost-usd)",
            )
    schedule.slots_ns()  # refused before the store is touched: a refusal leaves no file
    schedule.effective_grace_s()
    path = Path(store if store is not None else config.run.output)
    new = not path.exists()
    try:
        with CampaignDB(path) as db:
            return db.create(name or config.run.name, stored, schedule, budget, regions, now_ns())
    except BaseException:
        if new:  # nothing of ours is in a store this call created: leave no empty file behind
            for leftover in (path, path.with_name(path.name + "-wal"),
                             path.with_name(path.name + "-shm")):  # fmt: skip
                leftover.unlink(missing_ok=True)
        raise


def _masked_path(plain: Any, stored: Any, where: str = "") -> str | None:
    """Where the stored plan lost a secret (a value masked, a URL's password dropped)."""
    if isinstance(plain, dict) and isinstance(stored, dict):
        for key, value in plain.items():
            found = _masked_path(value, stored.get(key), f"{where}.{key}" if where else key)
            if found is not None:
                return found
    elif isinstance(plain, list) and isinstance(stored, list):
        for i, (a, b) in enumerate(zip(plain, stored, strict=False)):
            found = _masked_path(a, b, f"{where}[{i}]")
            if found is not None:
                return found
    elif (
        isinstance(plain, str)
        and plain != stored
        and (MASK in str(stored) or urlsplit(plain).password is not None)  # a query value too
    ):
        return where
    return None


def slot_config(
    campaign: CampaignRecord,
    run_name: str,
    *,
    remaining_requests: int | None = None,
    remaining_usd: float | None = None,
) -> RunConfig:
    """The plan as one slot runs it: named for the slot, with the tightest of the plan's,
    the slot's and what is left of the campaign's budgets."""
    data = copy.deepcopy(dict(campaign.plan))
    run = data.setdefault("run", {})
    run["name"] = run_name
    b = campaign.budget
    run["max_requests"] = _least(run.get("max_requests"), b.slot_max_requests, remaining_requests)
    run["max_cost_usd"] = _least(run.get("max_cost_usd"), b.slot_max_cost_usd, remaining_usd)
    return parse_config(data, f"campaign {campaign.name}")


def _least(*caps: Any) -> Any:
    given = [c for c in caps if c is not None]
    return min(given) if given else None


def campaign_spend(db: CampaignDB, campaign: CampaignRecord) -> tuple[int, float | None]:
    """Requests sent and estimated USD over the campaign's finished attempts so far.

    The USD figure is ``gpubench cost run``'s estimate of each run (idle tails included), filled
    in for attempts that lack one; ``None`` when the plan prices no target.
    """
    priced = any(_has_price(t) for t in campaign.plan.get("targets", []))
    requests, usd = 0, 0.0
    for a in db.attempts(campaign):
        if a.status == "running":
            continue
        requests += a.requests or 0
        if priced and a.run_id is not None:
            cost = a.cost_usd
            if cost is None:
                cost = price_run(db.path, a.run_id) or 0.0
                db.set_cost(campaign, a.slot, a.attempt, cost)
            usd += cost
    return requests, usd if priced else None


def price_run(store_path: Path, run_id: int) -> float | None:
    """The estimated bill of a stored run's priced targets (``gpubench cost run``), in USD."""
    from ..cost import load_catalog
    from ..cost._priced import priced_targets

    with Store(store_path, readonly=True) as store:
        info = store.run(run_id)
        costs = priced_targets(store, info, load_catalog(), {}, require_price=False)
    return sum(c.total_usd for c in costs) if costs else None


def _budget_spent(campaign: CampaignRecord, requests: int, usd: float | None) -> str | None:
    b = campaign.budget
    if b.max_requests is not None and requests >= b.max_requests:
        return f"campaign budget spent: {requests} requests of max_requests {b.max_requests}"
    if b.max_cost_usd is not None and usd is not None and usd >= b.max_cost_usd:
        return f"campaign budget spent: ${usd:.4f} of max_cost_usd ${b.max_cost_usd:g}"
    return None


class _Heartbeat(threading.Thread):
    """Refreshes a claim's heartbeat on its own connection until stopped."""

    def __init__(self, path: Path, claim: Claim, interval_s: float) -> None:
        super().__init__(name="gpubench-campaign-heartbeat", daemon=True)
        self._path, self._claim, self._interval_s = path, claim, interval_s
        self._done = threading.Event()

    def run(self) -> None:
        db: CampaignDB | None = None
        try:
            while not self._done.wait(self._interval_s):
                # a busy file: the next beat retries (opening included); stale_s allows
                # several misses
                with contextlib.suppress(GpubenchError):
                    db = db or CampaignDB(self._path)
                    if not db.heartbeat(self._claim, now_ns()):
                        log.warning(
                            "slot %d attempt %d was taken over by another scheduler after its "
                            "heartbeat went silent; this attempt's end will not be recorded "
                            "over the new one",
                            self._claim.slot,
                            self._claim.attempt,
                        )
                        return
        finally:
            if db is not None:
                db.close()

    def stop(self) -> None:
        self._done.set()
        self.join(5)


@contextmanager
def _stop_on_signals(stop: threading.Event) -> Iterator[None]:
    """While waiting for the next slot, SIGINT/SIGTERM end the scheduler cleanly."""

    def handler(signum: int, _frame: FrameType | None) -> None:
        stop.set()

    if threading.current_thread() is not threading.main_thread():
        yield  # signals are delivered to the main thread only
        return
    previous = {s: signal.signal(s, handler) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for s, h in previous.items():
            signal.signal(s, h)


def _run_claim(
    db: CampaignDB,
    claim: Claim,
    spent: tuple[int, float | None],
    heartbeat_s: float,
    echo: Echo,
) -> SlotReport:
    campaign = claim.campaign
    b = campaign.budget
    left_req = None if b.max_requests is None else b.max_requests - spent[0]
    left_usd = None if b.max_cost_usd is None else b.max_cost_usd - (spent[1] or 0.0)
    beat = _Heartbeat(db.path, claim, heartbeat_s)
    beat.start()
    try:
        try:
            config = slot_config(
                campaign, claim.run_name, remaining_requests=left_req, remaining_usd=left_usd
            )
            runner = build_run(config, store=db.path)
        except GpubenchError as exc:
            # The plan cannot be built (a plugin or an API key is missing): the slot goes back
            # to pending, so a restart after the fix still runs it within its grace window.
            beat.stop()
            db.finish(claim, status="cancelled", now_ns=now_ns(), error=redact(str(exc)))
            raise
        echo(f"slot {claim.slot} (attempt {claim.attempt}): running")
        try:
            result = run_blocking(runner)
        except Exception as exc:  # the run failed as a whole; the next slot still runs
            beat.stop()
            error = redact(f"{type(exc).__name__}: {exc}")
            run_id = db.finish(claim, status="failed", now_ns=now_ns(), error=error)
            return SlotReport(claim.slot, claim.attempt, "failed", run_id, None, None, error)
    finally:
        beat.stop()
    cost = price_run(db.path, result.run.id) if _priced(campaign) else None
    why = result.run.error or result.stop_reason
    run_id = db.finish(claim, status=result.status, now_ns=now_ns(), cost_usd=cost, error=why)
    return SlotReport(
        claim.slot, claim.attempt, result.status, run_id, result.run.samples, cost, why
    )


def _priced(campaign: CampaignRecord) -> bool:
    return any(_has_price(t) for t in campaign.plan.get("targets", []))


def run_campaign(
    store: str | Path,
    name: str | None = None,
    *,
    once: bool = False,
    heartbeat_s: float = 10.0,
    stale_s: float | None = None,
    max_attempts: int = 3,
    poll_s: float = 30.0,
    echo: Echo = lambda line: None,
) -> list[SlotReport]:
    """Run the campaign's slots as they fall due, until none is left (or one pass: ``once``).

    Resumes where a previous scheduler stopped or crashed (see the module doc). SIGINT or
    SIGTERM stops it: a slot running then is recorded as cancelled and is retried by the
    next scheduler while inside its grace window.
    """
    if heartbeat_s <= 0:
        raise ConfigError("heartbeat_s", heartbeat_s, "seconds > 0")
    stale = stale_s if stale_s is not None else max(60.0, 6 * heartbeat_s)
    reports: list[SlotReport] = []
    stop = threading.Event()
    with CampaignDB(store) as db:
        campaign = db.get(name)
        while not stop.is_set():
            spent = campaign_spend(db, campaign)
            got = db.claim(
                campaign,
                now_ns(),
                stale_s=stale,
                max_attempts=max_attempts,
                budget_spent=_budget_spent(campaign, *spent),
            )
            if isinstance(got, Claim):
                report = _run_claim(db, got, spent, heartbeat_s, echo)
                reports.append(report)
                echo(_describe(report))
                if report.status == "cancelled" or once:
                    break
                continue
            pending = [s for s in db.slots(campaign) if s.status in ("pending", "running")]
            if once or not pending:
                echo(_idle_line(got, pending))
                break
            upcoming = [s.scheduled_ns for s in pending if s.status == "pending"]
            wake_ns = min(upcoming) if upcoming else now_ns() + round(poll_s * 1e9)
            # a due slot held by another scheduler: look again after a heartbeat, not at once
            floor_s = heartbeat_s if any(s.status == "running" for s in pending) else 0.05
            with _stop_on_signals(stop):
                stop.wait(min(max((wake_ns - now_ns()) / 1e9, floor_s), poll_s))
    return reports


def _describe(r: SlotReport) -> str:
    cost = f", ${r.cost_usd:.4f}" if r.cost_usd is not None else ""
    why = f" ({r.error})" if r.error else ""
    run = f"run {r.run_id}" if r.run_id is not None else "no run"
    done = f"{r.status}, {run}, {r.requests} requests{cost}{why}"
    return f"slot {r.slot} (attempt {r.attempt}): {done}"


def _idle_line(why: str, pending: list[Any]) -> str:
    upcoming = [s.scheduled_ns for s in pending if s.status == "pending"]
    if not upcoming:
        return f"nothing to run: {why}; no slot left"
    wait_s = (min(upcoming) - now_ns()) / 1e9
    when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(min(upcoming) / 1e9))
    return f"nothing to run: {why}; next slot at {when} (in {max(wait_s, 0):.0f} s)"
