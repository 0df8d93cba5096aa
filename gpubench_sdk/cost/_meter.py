"""The live cost meter and the budget guard the runner consults before each request.

The meter prices each completed invocation from the client's view: the worker time it used
(server-reported execution where given, else send-to-last-byte) plus, for a cold request,
its boot (``setup_ms``, else latency minus execution), for the phases the provider bills,
plus per-request and per-token fees (``spent_usd``). For a worker-billed provider it also
replays the workers as ``run_cost`` does (``_LiveWorkers``): idle gaps between requests and
every live worker's idle tail until scale-down, so ``estimated_usd`` bounds the bill the run
will be estimated at once it ends, and the guard caps that, not the metered part alone.

Once a target is refused it stays stopped: every slot, every later scenario and, in a
multi-process run, every process (``share_stops``: flags in shared memory) sends nothing more
to it; once the run's cap refuses, nothing more is sent at all.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Mapping, MutableSequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from .._base._errors import ConfigError
from .._base._types import Invocation
from .._contract._billing import BillingModel

DEFAULT_TIMEOUT_S = 300.0  # ProviderOptions.timeout_s's default

if TYPE_CHECKING:
    from ._catalog import PriceCatalog
    from ._pricing import PricedPlan


@dataclass
class _LiveWorkers:
    """``replay_worker_intervals`` one request at a time: billed-phase seconds of the workers
    so far (boots, busy time, idle gaps, idle tails of stopped workers) and the workers still
    up, each of which will idle out ``delay_s`` before it stops.

    The live workers are kept sorted by when they became free, so finding the most recently
    idle one and retiring the expired ones are bisections, not scans: the guard stays cheap
    on the hot path with thousands of requests in flight."""

    billing: BillingModel
    delay_s: float
    free: list[tuple[float, int]] = field(default_factory=list)  # (free since, worker), sorted
    started: int = 0
    closed_s: float = 0.0

    def add(self, start_s: float, busy_s: float, boot_s: float, cold: bool | None) -> None:
        """Place one request as ``replay_worker_intervals`` does: a cold one boots a new
        worker; otherwise the most recently idle worker up takes it (one seen warm takes it
        even past the delay, or queues for the first to free up)."""
        bills = self.billing.bills
        free = self.free
        j = -1
        if cold is not True:
            j = bisect.bisect_right(free, (start_s, math.inf)) - 1
            if j >= 0 and cold is None and start_s - free[j][0] > self.delay_s:
                j = -1  # unknown: only a worker within its delay
            if j < 0 and cold is False and free:
                j = 0  # seen warm with every worker busy: it queued for the first to free
        if j >= 0:
            since, worker = free.pop(j)
            self.closed_s += max(0.0, start_s - since) if bills("idle") else 0.0
            begin = max(start_s, since)
        else:
            worker = self.started
            self.started += 1
            self.closed_s += boot_s if bills("cold_boot") else 0.0
            begin = start_s + boot_s
        self.closed_s += busy_s if bills("execution") else 0.0
        expired = bisect.bisect_left(free, (start_s - self.delay_s, -1))
        if expired:  # scaled down before this request: their tails are final
            del free[:expired]
            self.closed_s += expired * self.delay_s if bills("idle") else 0.0
        bisect.insort(free, (begin + busy_s, worker))

    def billed_s(self) -> float:
        """An upper bound of the replayed bill: every live worker's tail, and one rounding
        step (or the minimum charge) per worker started."""
        tails = len(self.free) * self.delay_s if self.billing.bills("idle") else 0.0
        per_worker = max(self.billing.granularity_s, self.billing.min_billed_s)
        return self.closed_s + tails + self.started * per_worker


@dataclass
class CostMeter:
    """Spend of one target so far, in USD, and its optional cap ``max_cost_usd``.

    ``scale_down_s``: the delay the target's workers idle before they stop (default: the
    billing model's, raised to the platform minimum)."""

    billing: BillingModel
    rate_usd_per_s: float
    max_cost_usd: float | None = None
    scale_down_s: float | None = None
    requests: int = 0
    inflight: int = 0
    raw_billed_s: float = 0.0
    rounded_billed_s: float = 0.0
    fees_usd: float = 0.0
    max_request_usd: float | None = None  # the dearest request so far
    deadline_s: float = 0.0  # the latest request deadline the guard was told (its bound)

    workers: _LiveWorkers | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        if not self.rate_usd_per_s >= 0:
            raise ConfigError("price_per_s_usd", self.rate_usd_per_s, "USD per second >= 0")
        if self.max_cost_usd is not None and not self.max_cost_usd > 0:
            raise ConfigError("max_cost_usd", self.max_cost_usd, "USD > 0")
        self.scale_down_s = self.billing.effective_idle_timeout_s(self.scale_down_s)
        if self.billing.billed_unit == "worker":
            self.workers = _LiveWorkers(self.billing, self.scale_down_s)

    @property
    def tail_s(self) -> float:
        """Billed idle seconds a worker adds after its last request (0 if idle is free)."""
        billed_idle = self.billing.billed_unit == "worker" and self.billing.bills("idle")
        return (self.scale_down_s or 0.0) if billed_idle else 0.0

    @property
    def estimated_usd(self) -> float:
        """What the run so far will be estimated at: ``spent_usd``, plus for a worker-billed
        provider the replayed workers' idle gaps and live tails (an upper bound)."""
        if self.workers is None:
            return self.spent_usd
        billed = max(self.workers.billed_s(), self.billing.billed_s(self.raw_billed_s))
        return billed * self.rate_usd_per_s + self.fees_usd

    @property
    def spent_usd(self) -> float:
        if self.billing.billed_unit == "request":
            billed = self.rounded_billed_s
        else:  # one worker interval: rounded once, not per request
            billed = self.billing.billed_s(self.raw_billed_s)
        return billed * self.rate_usd_per_s + self.fees_usd

    def record(self, inv: Invocation) -> float:
        """Add a completed invocation; returns its own (unrounded) cost in USD."""
        service_s = (inv.end_ns - inv.start_ns) / 1e9
        exec_s = service_s if inv.execution_ms is None else min(inv.execution_ms / 1e3, service_s)
        seconds = exec_s if self.billing.bills("execution") else 0.0
        if inv.cold and self.billing.bills("cold_boot"):
            boot_s = inv.setup_ms / 1e3 if inv.setup_ms is not None else service_s - exec_s
            seconds += max(boot_s, 0.0)
        if inv.queue_ms is not None and self.billing.bills("queue"):
            seconds += inv.queue_ms / 1e3
        if self.workers is not None:
            boot_s = inv.setup_ms / 1e3 if inv.setup_ms is not None else service_s - exec_s
            cold = None if inv.cold is None else bool(inv.cold)
            self.workers.add(inv.start_ns / 1e9, exec_s, max(boot_s, 0.0) if cold else 0.0, cold)
        fees = self.billing.fees_usd(1, inv.input_units or 0, inv.output_units or 0)
        self.requests += 1
        self.raw_billed_s += seconds
        self.rounded_billed_s += self.billing.billed_s(seconds)
        self.fees_usd += fees
        cost = seconds * self.rate_usd_per_s + fees
        if self.max_request_usd is None or cost > self.max_request_usd:
            self.max_request_usd = cost
        return cost


@dataclass
class BudgetGuard:
    """Caps per target (each meter's ``max_cost_usd``) and for the run (``max_cost_usd``).

    ``allow`` reserves a request when the estimated bill so far (``CostMeter.estimated_usd``)
    plus every request in flight (of every target, for the run's cap) and the next one stays
    within the caps, each request counted at the most it can cost: its deadline's billed time
    plus the idle tail of the worker it may start, times the rate, plus its per-request fee,
    or the dearest request seen if that was more (token fees are only known after). A refusal
    is final for that target (for every target, when it is the run's cap)."""

    meters: Mapping[str, CostMeter]
    max_cost_usd: float | None = None
    stopped: dict[str, str] = field(default_factory=dict)
    _flags: MutableSequence[int] | None = field(default=None, repr=False)
    _order: list[str] = field(default_factory=list, repr=False)

    def __post_init__(self) -> None:
        if self.max_cost_usd is not None and not self.max_cost_usd > 0:
            raise ConfigError("run.max_cost_usd", self.max_cost_usd, "USD > 0")
        self._order = sorted(self.meters)

    @property
    def flag_count(self) -> int:
        """How many shared flags ``share_stops`` needs: one per metered target, one for the run."""
        return len(self._order) + 1

    def share_stops(self, flags: MutableSequence[int]) -> None:
        """Use ``flags`` (e.g. a ``multiprocessing.Array("b", flag_count)``, the same in every
        process of a run) so a target one process stops is stopped in all of them."""
        if len(flags) < self.flag_count:
            raise ValueError(f"share_stops needs {self.flag_count} flags, got {len(flags)}")
        self._flags = flags

    def spent_usd(self) -> dict[str, float]:
        return {name: m.spent_usd for name, m in self.meters.items()}

    def estimated_usd(self) -> dict[str, float]:
        return {name: m.estimated_usd for name, m in self.meters.items()}

    @staticmethod
    def request_bound_usd(meter: CostMeter, deadline_s: float) -> float:
        """The most one request can add to the bill: its deadline's billed time plus the idle
        tail of a worker it may start, times the rate, plus the per-request fee."""
        bound = meter.billing.billed_s(deadline_s + meter.tail_s) * meter.rate_usd_per_s
        return bound + meter.billing.fees_usd(1, 0, 0)

    def _each(self, meter: CostMeter) -> float:
        # An upper bound, never an average: a cheap (say, failed) first request must not
        # make the requests after it look free.
        return max(self.request_bound_usd(meter, meter.deadline_s), meter.max_request_usd or 0.0)

    def _stop(self, target: str | None, reason: str) -> str:
        key = target if target is not None else "*"
        self.stopped.setdefault(key, reason)
        if self._flags is not None:
            self._flags[len(self._order) if target is None else self._order.index(target)] = 1
        return reason

    def _stopped_reason(self, target: str) -> str | None:
        reason = self.stopped.get("*") or self.stopped.get(target)
        if reason is None and self._flags is not None:
            if self._flags[len(self._order)]:
                reason = self._stop(None, "run max_cost_usd reached in another process")
            elif self._flags[self._order.index(target)]:
                reason = self._stop(
                    target, f"max_cost_usd reached for target {target} in another process"
                )
        return reason

    def allow(self, target: str, deadline_s: float) -> str | None:
        """Reserve one request of ``target``; ``None`` if allowed, else why not (stop reason)."""
        meter = self.meters.get(target)
        if meter is None:
            return None
        stopped = self._stopped_reason(target)
        if stopped is not None:
            return stopped
        meter.deadline_s = max(meter.deadline_s, deadline_s)
        projected = meter.estimated_usd + (meter.inflight + 1) * self._each(meter)
        if meter.max_cost_usd is not None and projected > meter.max_cost_usd:
            return self._stop(
                target,
                f"max_cost_usd reached for target {target}: ${meter.spent_usd:.6f} metered, "
                f"${meter.estimated_usd:.6f} estimated with idle tails; the next request "
                f"could pass its ${meter.max_cost_usd:g} cap",
            )
        if self.max_cost_usd is not None:
            others = sum(
                m.estimated_usd + m.inflight * self._each(m)
                for n, m in self.meters.items()
                if n != target
            )
            if others + projected > self.max_cost_usd:
                return self._stop(
                    None,
                    f"run max_cost_usd reached: ${sum(self.estimated_usd().values()):.6f} "
                    f"estimated, the next request could pass the ${self.max_cost_usd:g} cap",
                )
        meter.inflight += 1
        return None

    def release(self, target: str) -> None:
        """Give back a reservation ``allow`` made for a request that was not sent."""
        meter = self.meters.get(target)
        if meter is not None:
            meter.inflight = max(0, meter.inflight - 1)

    def record(self, inv: Invocation) -> None:
        """Account a completed invocation of a metered target (the runner's hot path)."""
        meter = self.meters.get(inv.target)
        if meter is not None:
            meter.inflight = max(0, meter.inflight - 1)
            meter.record(inv)


def budget_guard(
    config: PricedPlan,
    declared: Mapping[str, BillingModel | None] | None = None,
    catalog: PriceCatalog | None = None,
    *,
    share: float = 1.0,
) -> BudgetGuard | None:
    """The guard a plan asks for (``run.max_cost_usd`` or a target's ``max_cost_usd``), else
    ``None`` (no meter on the hot path). Every target's price is checked first, capped or not
    (``plan_prices``). ``declared``: billing models the provider plugins declare
    (``Capabilities.billing``), used when a target names no ``billing`` plan.
    ``share`` (0 < share <= 1) scales every cap: one process's part of a multi-process run."""
    if not 0 < share <= 1:
        raise ValueError(f"share must be in (0, 1], got {share!r}")
    from ._pricing import plan_prices  # here: pricing builds on the meter's caps

    prices = plan_prices(config, declared, catalog)  # a price it cannot bill by: refused now
    capped = [t for t in config.targets if t.max_cost_usd is not None]
    if config.run.max_cost_usd is None and not capped:
        return None
    meters: dict[str, CostMeter] = {}
    for i, t in enumerate(config.targets):
        price = prices[t.name]
        if (config.run.max_cost_usd is None and t.max_cost_usd is None) or price is None:
            continue  # plan_prices refused a capped target without a price
        model, rate = price.billing, price.rate_usd_per_s
        cap = None if t.max_cost_usd is None else t.max_cost_usd * share
        options = t.provider_options()
        delay = options.get("idle_timeout_s")
        meter = CostMeter(model, rate, cap, None if delay is None else float(delay))
        meters[t.name] = meter
        timeout_s = float(options.get("timeout_s", DEFAULT_TIMEOUT_S))
        one = BudgetGuard.request_bound_usd(meter, timeout_s)
        for field_name, limit in (
            (f"targets[{i}].max_cost_usd", cap),
            (
                "run.max_cost_usd",
                None if config.run.max_cost_usd is None else config.run.max_cost_usd * share,
            ),
        ):
            if limit is not None and one > limit:
                raise ConfigError(
                    field_name,
                    limit,
                    f"at least ${one:.6g} (for {t.name}): one request can cost that much "
                    f"(timeout_s={timeout_s:g} s + a {meter.tail_s:g} s idle tail, billed at "
                    f"${rate:g}/s{_share_note(share)}); raise the cap, or lower timeout_s",
                )
    run_cap = config.run.max_cost_usd
    return BudgetGuard(meters, None if run_cap is None else run_cap * share)


def _share_note(share: float) -> str:
    return "" if share == 1 else f"; each of {round(1 / share)} processes gets {share:.3g} of a cap"
