"""What a plan will send and cost, before anything is sent (``gpubench run --dry-run``).

Per target and scenario: the request count (the scenario's own ``planned()``; a schedule with
``offsets_s()`` is counted exactly, so a seeded Poisson draw matches the run), how long it
should take and at most, and what it should cost and at most, priced like the budget guard
(``_pricing``): worst case, every request runs to ``timeout_s`` on a worker of its own that
then idles out its scale-down delay; expected, requests take the workload's declared time
(``sleep_ms``) or an assumed one, on as many workers as the scenario keeps busy. A capped
target's worst case is its cap: the guard holds it there.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from .._contract._billing import BillingModel
from ._meter import DEFAULT_TIMEOUT_S, BudgetGuard, CostMeter
from ._pricing import PricedPlan, TargetPrice, plan_prices

if TYPE_CHECKING:
    from .._scenarios import Scenario
    from ._catalog import PriceCatalog


class _Workload(Protocol):
    def workload_options(self) -> dict[str, Any]: ...


class DryRunPlan(PricedPlan, Protocol):
    """What a dry run reads of a plan: its prices' inputs, the workload and the scenarios."""

    @property
    def workload(self) -> _Workload: ...
    def build_scenarios(self) -> list[Scenario]: ...


@dataclass(frozen=True, slots=True)
class PlannedScenario:
    """One scenario of one target: requests, seconds (expected, at most) and USD (same)."""

    target: str
    scenario: int
    kind: str
    requests: int
    expected_s: float | None
    worst_s: float | None
    expected_usd: float | None
    worst_usd: float | None
    name: str | None = None  # the plan's name for it, if any

    @property
    def label(self) -> str:
        """``"<index>:<name>"``, else ``"<index>:<kind>"``, as the run's summary shows it."""
        return f"{self.scenario}:{self.name or self.kind}"


@dataclass(frozen=True)
class DryRun:
    rows: list[PlannedScenario]
    prices: dict[str, TargetPrice | None]
    caps: dict[str, float | None]
    execution_s: float
    execution_from: str

    def requests(self, target: str) -> int:
        return sum(r.requests for r in self.rows if r.target == target)

    def total_usd(self, target: str, *, worst: bool) -> float | None:
        """A target's expected or worst-case cost; worst is held at its cap."""
        values = [r.worst_usd if worst else r.expected_usd for r in self.rows if r.target == target]
        if any(v is None for v in values):
            return None
        total = sum(v for v in values if v is not None)
        cap = self.caps.get(target)
        return min(total, cap) if worst and cap is not None else total

    def duration_s(self, *, worst: bool) -> float | None:
        """The plan's duration: scenarios one after another, targets side by side."""
        total = 0.0
        for sidx in sorted({r.scenario for r in self.rows}):
            values = [r.worst_s if worst else r.expected_s for r in self.rows if r.scenario == sidx]
            if any(v is None for v in values):
                return None
            total += max((v for v in values if v is not None), default=0.0)
        return total


def _count(sc: Any) -> int:
    offsets = getattr(sc, "offsets_s", None)
    if callable(offsets):
        return sum(1 for _ in offsets()) + int(getattr(sc, "warmup", 0))
    return int(sc.planned(1))


def _seconds(sc: Any, n: int, each_s: float, gap_s: float) -> tuple[float | None, int]:
    """How long ``sc`` takes when each request takes ``each_s``, and the workers it keeps
    busy; ``None`` for a kind this module does not know (unless it has a deadline)."""
    kind = getattr(sc, "kind", "")
    if kind == "burst":
        return math.ceil(n / sc.concurrency) * each_s, min(sc.concurrency, n)
    if kind == "rate":
        return sc.duration_s + (1 + sc.warmup) * each_s, max(1, math.ceil(sc.rps * each_s))
    if kind == "cold_starts":
        gap = sc.idle_gap_s if sc.idle_gap_s is not None else gap_s
        return sc.n * (gap + (1 + sc.warm_after) * each_s), sc.n
    if kind == "concurrency":
        return sc.warmup_s + sc.duration_s + each_s, sc.concurrency
    if kind == "users":  # no turn starts after duration_s; the last ones finish
        return sc.duration_s + each_s, sc.users
    if kind == "sweep":  # the synchronous step, the throughput probe, then `rates` steps
        return (2 + sc.rates) * sc.duration_s + each_s, sc.max_concurrency
    if kind == "max_rate":  # the search's longest: every trial it may make, at trial_s each
        return sc.max_trials * sc.trial_s, max(1, math.ceil(sc.max_rps * each_s))
    offsets = getattr(sc, "offsets_s", None)
    if callable(offsets):  # an open loop with a known schedule (stages, replay, a plugin's)
        last = max(offsets(), default=0.0)
        return last + each_s, max(1, math.ceil(n * each_s / max(last, each_s)))
    return None, n


def _cost(
    billing: BillingModel,
    rate: float,
    n: int,
    workers: int,
    wall_s: float | None,
    each_s: float,
    tail_s: float,
) -> float | None:
    fees = billing.fees_usd(n)
    if billing.billed_unit == "request":
        return n * billing.billed_s(each_s) * rate + fees
    if wall_s is None:
        return None
    busy = n * each_s
    if billing.bills("idle"):
        billed = max(busy, workers * wall_s) + workers * tail_s
        return workers * billing.billed_s(billed / workers) * rate + fees if workers else fees
    return billing.billed_s(busy) * rate + fees


def dry_run(
    config: DryRunPlan,
    *,
    declared: Mapping[str, BillingModel | None] | None = None,
    catalog: PriceCatalog | None = None,
    execution_s: float | None = None,
) -> DryRun:
    """The plan's requests, duration and cost per target and scenario; sends nothing.

    ``execution_s``: seconds a request is assumed to take when the workload does not say
    (its ``sleep_ms``); default 1 s. Raises ``ConfigError`` where the run would (a price it
    cannot bill by, a cap too small for one request)."""
    from ._meter import budget_guard

    prices = plan_prices(config, declared, catalog)
    budget_guard(config, declared, catalog)  # the same refusals the run would make
    sleep_ms = config.workload.workload_options().get("sleep_ms")
    if execution_s is not None:
        each_s, each_from = execution_s, "given"
    elif isinstance(sleep_ms, int | float) and not isinstance(sleep_ms, bool):
        each_s, each_from = float(sleep_ms) / 1e3, "the workload's sleep_ms"
    else:
        each_s, each_from = 1.0, "assumed (pass --exec-s)"
    scenarios = config.build_scenarios()
    rows: list[PlannedScenario] = []
    caps: dict[str, float | None] = {}
    for t in config.targets:
        options = t.provider_options()
        timeout_s = float(options.get("timeout_s", DEFAULT_TIMEOUT_S))
        price = prices[t.name]
        meter = None
        if price is not None:
            delay = options.get("idle_timeout_s")
            meter = CostMeter(
                price.billing, price.rate_usd_per_s, None, None if delay is None else float(delay)
            )
        caps[t.name] = _cap(t.max_cost_usd, config.run.max_cost_usd)
        gap_s = meter.scale_down_s if meter is not None and meter.scale_down_s else 0.0
        if meter is None and options.get("idle_timeout_s") is not None:
            gap_s = float(options["idle_timeout_s"])
        for sidx, sc in enumerate(scenarios):
            n = _count(sc)
            expected_s, workers = _seconds(sc, n, each_s, gap_s)
            worst_s, _ = _seconds(sc, n, timeout_s, gap_s)
            deadline = getattr(sc, "deadline_s", None)
            if deadline is not None:
                expected_s = deadline if expected_s is None else min(expected_s, deadline)
                worst_s = deadline if worst_s is None else min(worst_s, deadline)
            expected_usd = worst_usd = None
            if meter is not None:
                worst_usd = n * BudgetGuard.request_bound_usd(meter, timeout_s)
                rate = meter.rate_usd_per_s
                expected_usd = _cost(
                    meter.billing, rate, n, workers, expected_s, each_s, meter.tail_s
                )
            rows.append(
                PlannedScenario(
                    target=t.name,
                    scenario=sidx,
                    kind=getattr(sc, "kind", type(sc).__name__),
                    name=getattr(sc, "name", None),
                    requests=n,
                    expected_s=expected_s,
                    worst_s=worst_s,
                    expected_usd=expected_usd,
                    worst_usd=worst_usd,
                )
            )
    return DryRun(rows, prices, caps, each_s, each_from)


def _cap(target_cap: float | None, run_cap: float | None) -> float | None:
    caps = [c for c in (target_cap, run_cap) if c is not None]
    return min(caps) if caps else None
