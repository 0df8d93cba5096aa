"""The live cost meter and the budget guard the runner consults before each request.

The meter prices each completed invocation from the client's view: the worker time it used
(server-reported execution where given, else send-to-last-byte) plus, for a cold request,
its boot (``setup_ms``, else latency minus execution), for the phases the provider bills,
plus per-request and per-token fees. Idle time until scale-down is not seen live: the meter
is a lower bound of a worker-billed provider's bill (``run_cost`` adds the idle tails).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from .._errors import ConfigError
from .._types import Invocation
from ._billing import BillingModel

if TYPE_CHECKING:
    from .._config import RunConfig
    from ._catalog import PriceCatalog


@dataclass
class CostMeter:
    """Spend of one target so far, in USD, and its optional cap ``max_cost_usd``."""

    billing: BillingModel
    rate_usd_per_s: float
    max_cost_usd: float | None = None
    requests: int = 0
    inflight: int = 0
    raw_billed_s: float = 0.0
    rounded_billed_s: float = 0.0
    fees_usd: float = 0.0
    max_request_usd: float | None = None  # the dearest request so far
    deadline_s: float = 0.0  # the latest request deadline the guard was told (its bound)

    def __post_init__(self) -> None:
        if not self.rate_usd_per_s >= 0:
            raise ConfigError("price_per_s_usd", self.rate_usd_per_s, "USD per second >= 0")
        if self.max_cost_usd is not None and not self.max_cost_usd > 0:
            raise ConfigError("max_cost_usd", self.max_cost_usd, "USD > 0")

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

    ``allow`` reserves a request when the spend so far plus every request in flight (of every
    target, for the run's cap) and the next one stays within the caps, each request counted
    at the most it can cost: its deadline's billed time times the rate plus its per-request
    fee, or the dearest request seen if that was more (token fees are only known after)."""

    meters: Mapping[str, CostMeter]
    max_cost_usd: float | None = None
    stopped: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.max_cost_usd is not None and not self.max_cost_usd > 0:
            raise ConfigError("run.max_cost_usd", self.max_cost_usd, "USD > 0")

    def spent_usd(self) -> dict[str, float]:
        return {name: m.spent_usd for name, m in self.meters.items()}

    @staticmethod
    def _each(meter: CostMeter) -> float:
        # An upper bound, never an average: a cheap (say, failed) first request must not
        # make the requests after it look free.
        bound = meter.billing.billed_s(meter.deadline_s) * meter.rate_usd_per_s
        bound += meter.billing.fees_usd(1, 0, 0)
        return max(bound, meter.max_request_usd or 0.0)

    def _projected(self, meter: CostMeter, deadline_s: float) -> float:
        meter.deadline_s = max(meter.deadline_s, deadline_s)
        return meter.spent_usd + (meter.inflight + 1) * self._each(meter)

    def allow(self, target: str, deadline_s: float) -> str | None:
        """Reserve one request of ``target``; ``None`` if allowed, else why not (stop reason)."""
        meter = self.meters.get(target)
        if meter is None:
            return None
        projected = self._projected(meter, deadline_s)
        if meter.max_cost_usd is not None and projected > meter.max_cost_usd:
            reason = (
                f"max_cost_usd reached for target {target}: ${meter.spent_usd:.6f} spent, "
                f"the next request could pass its ${meter.max_cost_usd:g} cap"
            )
            self.stopped.setdefault(target, reason)
            return reason
        if self.max_cost_usd is not None:
            others = sum(
                m.spent_usd + m.inflight * self._each(m)
                for n, m in self.meters.items()
                if n != target
            )
            if others + projected > self.max_cost_usd:
                reason = (
                    f"run max_cost_usd reached: ${sum(self.spent_usd().values()):.6f} spent, "
                    f"the next request could pass the ${self.max_cost_usd:g} cap"
                )
                self.stopped.setdefault(target, reason)
                return reason
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
    config: RunConfig,
    declared: Mapping[str, BillingModel | None] | None = None,
    catalog: PriceCatalog | None = None,
    *,
    share: float = 1.0,
) -> BudgetGuard | None:
    """The guard a plan asks for (``run.max_cost_usd`` or a target's ``max_cost_usd``), else
    ``None`` (no meter on the hot path). ``declared``: billing models the provider plugins
    declare (``Capabilities.billing``), used when a target names no ``billing`` plan.
    ``share`` (0 < share <= 1) scales every cap: one process's part of a multi-process run."""
    if not 0 < share <= 1:
        raise ValueError(f"share must be in (0, 1], got {share!r}")
    capped = [t for t in config.targets if t.max_cost_usd is not None]
    if config.run.max_cost_usd is None and not capped:
        return None
    from ._catalog import load_catalog

    catalog = catalog or load_catalog()
    meters: dict[str, CostMeter] = {}
    for i, t in enumerate(config.targets):
        if config.run.max_cost_usd is None and t.max_cost_usd is None:
            continue
        model = (declared or {}).get(t.name)
        if t.billing is not None or model is None:
            model = catalog.billing_model(t.billing or t.provider)
        if t.price_per_s_usd is not None:
            rate = t.price_per_s_usd
        elif t.price_sku is not None:
            rate = catalog.rate_usd_per_s(t.billing or t.provider, t.price_sku)
        else:
            raise ConfigError(
                f"targets[{i}].price_sku",
                None,
                'a catalog SKU (e.g. price_sku = "A100 80GB") or price_per_s_usd, so the '
                "budget guard can price this target's requests",
            )
        cap = None if t.max_cost_usd is None else t.max_cost_usd * share
        meters[t.name] = CostMeter(model, rate, cap)
    run_cap = config.run.max_cost_usd
    return BudgetGuard(meters, None if run_cap is None else run_cap * share)
