"""Cost calculators: the daily scenario bill, per-unit costs, break-even, and measured runs."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from .._base._errors import ConfigError
from .._base._types import Invocation
from .._contract._billing import BillingModel, WorkerBill, WorkerInterval, price_worker_intervals

if TYPE_CHECKING:
    from .._store._store import Store

SECONDS_PER_DAY = 86_400.0


def _positive(name: str, value: float, *, allow_zero: bool = True) -> None:
    if not (value >= 0 if allow_zero else value > 0):
        raise ConfigError(name, value, "a number >= 0" if allow_zero else "a number > 0")


@dataclass(frozen=True, slots=True)
class UnitCosts:
    """A total spread over what it bought. ``None`` where that unit was not counted (a
    workload reports tokens, images or audio through its ``units``)."""

    total_usd: float
    per_request_usd: float | None
    per_1k_requests_usd: float | None
    per_million_output_tokens_usd: float | None = None
    per_image_usd: float | None = None
    per_1k_output_tokens_usd: float | None = None
    per_1k_input_tokens_usd: float | None = None
    per_million_input_tokens_usd: float | None = None
    per_audio_minute_usd: float | None = None


def _per(total: float, amount: float | None, scale: float = 1.0) -> float | None:
    return total / amount * scale if amount else None


def unit_costs(
    total_usd: float,
    requests: int,
    *,
    output_tokens: float | None = None,
    images: float | None = None,
    input_tokens: float | None = None,
    audio_minutes: float | None = None,
) -> UnitCosts:
    """Cost per request, per 1,000 requests, per 1k and 1M input/output tokens, per image and
    per minute of audio (each ``None`` where the amount is unknown or zero)."""
    per_req = _per(total_usd, requests)
    return UnitCosts(
        total_usd=total_usd,
        per_request_usd=per_req,
        per_1k_requests_usd=None if per_req is None else per_req * 1000,
        per_million_output_tokens_usd=_per(total_usd, output_tokens, 1e6),
        per_image_usd=_per(total_usd, images),
        per_1k_output_tokens_usd=_per(total_usd, output_tokens, 1e3),
        per_1k_input_tokens_usd=_per(total_usd, input_tokens, 1e3),
        per_million_input_tokens_usd=_per(total_usd, input_tokens, 1e6),
        per_audio_minute_usd=_per(total_usd, audio_minutes),
    )


# What a workload's ``units`` name, as amounts ``unit_costs`` prices (audio in seconds or
# minutes becomes minutes).
_UNIT_KEYS = {
    "tokens": ("tokens", 1.0),
    "images": ("images", 1.0),
    "audio_ms": ("audio_minutes", 1 / 60_000),
    "audio_seconds": ("audio_minutes", 1 / 60),
    "audio_minutes": ("audio_minutes", 1.0),
}


def units_of(
    total_usd: float,
    requests: int,
    units: tuple[str, str],
    input_amount: float,
    output_amount: float,
) -> UnitCosts:
    """``unit_costs`` for a workload whose ``units`` are ``(input, output)`` unit names."""
    amounts: dict[str, float] = {}
    for side, name, amount in (
        ("input", units[0], input_amount),
        ("output", units[1], output_amount),
    ):
        key, scale = _UNIT_KEYS.get(name, ("", 0.0))
        if key == "tokens":
            amounts[f"{side}_tokens"] = amount
        elif key:
            amounts[key] = amounts.get(key, 0.0) + amount * scale
    return unit_costs(total_usd, requests, **{k: v or None for k, v in amounts.items()})


# -- (c) the reference report's daily scenario -----------------------------------------------


@dataclass(frozen=True, slots=True)
class ScenarioBill:
    """One provider's line of the daily bill. Seconds are per day, before rounding except
    ``billed_s``; ``scale_down_s`` is the delay actually applied (after the platform minimum)."""

    label: str
    rate_usd_per_s: float
    scale_down_s: float
    inference_s: float
    idle_s: float
    cold_start_s: float
    billed_s: float
    fees_usd: float
    total_usd: float
    requests: int
    scale_down_events: int = 1

    @property
    def cold_start_s_per_event(self) -> float:
        return self.cold_start_s / self.scale_down_events

    @property
    def idle_s_per_event(self) -> float:
        return self.idle_s / self.scale_down_events

    @property
    def per_1k_requests_usd(self) -> float:
        return self.total_usd / self.requests * 1000 if self.requests else 0.0


def scenario_bill(
    *,
    label: str,
    billing: BillingModel,
    rate_usd_per_s: float,
    requests_per_day: int,
    inference_s: float,
    scale_down_s: float,
    scale_down_events: int,
    cold_start_s: float,
    round_per_interval: bool = True,
    enforce_min_scale_down: bool = True,
    output_tokens_per_request: float = 0.0,
    input_tokens_per_request: float = 0.0,
) -> ScenarioBill:
    """The reference report's daily bill for one provider.

    ``idle = (scale_down_s - inference_s) x scale_down_events`` (the report's formula: the
    worker idles out its scale-down delay after the last request of each busy spell, less one
    inference), ``cold = cold_start_s x scale_down_events``, ``inference = requests x
    inference_s``. Only the provider's billed phases count. With ``round_per_interval`` each
    of the ``scale_down_events`` worker lifetimes (or, for per-request billing, each request)
    is one billed interval, rounded up to the granularity; without it the seconds are billed
    exactly, as the report did. ``enforce_min_scale_down`` raises the delay to the platform's
    minimum (Hugging Face: 15 min), which the report states but did not apply.
    """
    _positive("requests_per_day", requests_per_day)
    _positive("inference_s", inference_s)
    _positive("scale_down_s", scale_down_s)
    _positive("cold_start_s", cold_start_s)
    _positive("rate_usd_per_s", rate_usd_per_s)
    if scale_down_events < 1:
        raise ConfigError("scale_down_events", scale_down_events, "an integer >= 1")
    delay_s = (
        max(scale_down_s, billing.min_idle_timeout_s) if enforce_min_scale_down else scale_down_s
    )
    inference_total = requests_per_day * inference_s
    idle_total = max(0.0, delay_s - inference_s) * scale_down_events
    cold_total = cold_start_s * scale_down_events
    if billing.billed_unit == "request":
        per_request = (inference_s if billing.bills("execution") else 0.0) + (
            cold_total / requests_per_day
            if billing.bills("cold_boot") and requests_per_day
            else 0.0
        )
        exact = per_request * requests_per_day
        billed = billing.billed_s(per_request) * requests_per_day if round_per_interval else exact
    else:
        exact = (
            (inference_total if billing.bills("execution") else 0.0)
            + (idle_total if billing.bills("idle") else 0.0)
            + (cold_total if billing.bills("cold_boot") else 0.0)
        )
        per_life = exact / scale_down_events
        billed = billing.billed_s(per_life) * scale_down_events if round_per_interval else exact
    fees = billing.fees_usd(
        requests_per_day,
        input_tokens_per_request * requests_per_day,
        output_tokens_per_request * requests_per_day,
    )
    return ScenarioBill(
        label=label,
        rate_usd_per_s=rate_usd_per_s,
        scale_down_s=delay_s,
        inference_s=inference_total,
        idle_s=idle_total,
        cold_start_s=cold_total,
        billed_s=billed,
        fees_usd=fees,
        total_usd=billed * rate_usd_per_s + fees,
        requests=requests_per_day,
        scale_down_events=scale_down_events,
    )


# -- (d) reserved / always-on vs on-demand ---------------------------------------------------


@dataclass(frozen=True, slots=True)
class BreakEven:
    """Where an always-on (reserved/active) worker costs the same as on-demand billing.

    ``utilization`` is the fraction of the day an on-demand worker must be billed for the two
    to cost the same; ``requests_per_day`` the same point in requests, when the billed seconds
    per request were given. All three are ``None`` when it never pays: the always-on worker
    costs more than a whole day on demand (``never``)."""

    reserved_usd_per_day: float
    billed_s_per_day: float | None
    utilization: float | None
    requests_per_day: float | None

    @property
    def never(self) -> bool:
        return self.utilization is None


def break_even(
    *,
    on_demand_usd_per_s: float,
    reserved_usd_per_s: float,
    billed_s_per_request: float | None = None,
) -> BreakEven:
    """On-demand billed seconds per day at which one always-on worker is as cheap.

    ``billed_s = reserved_usd_per_s x 86,400 / on_demand_usd_per_s``; above it, reserve. Past
    86,400 s (a worker billed all day) it never pays: ``utilization is None``."""
    _positive("on_demand_usd_per_s", on_demand_usd_per_s, allow_zero=False)
    _positive("reserved_usd_per_s", reserved_usd_per_s)
    if billed_s_per_request is not None:
        _positive("billed_s_per_request", billed_s_per_request, allow_zero=False)
    per_day = reserved_usd_per_s * SECONDS_PER_DAY
    billed = per_day / on_demand_usd_per_s
    if billed > SECONDS_PER_DAY:
        return BreakEven(per_day, None, None, None)
    reqs = None if billed_s_per_request is None else billed / billed_s_per_request
    return BreakEven(per_day, billed, billed / SECONDS_PER_DAY, reqs)


# -- (a) a measured run ----------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class RunCost:
    """What a stored run's target would have been billed, estimated from its invocations.

    Worker time is replayed from the client's view: each request runs on the most recently
    used worker that is still up (idle for no more than the scale-down delay), else on a new
    worker that boots first; a request the run saw cold or warm is placed accordingly. Every
    worker idles out its scale-down delay after its last request. ``workers`` counts the
    workers the replay started."""

    target: str
    requests: int
    workers: int
    bill: WorkerBill
    fees_usd: float
    units: UnitCosts

    @property
    def total_usd(self) -> float:
        return self.bill.cost_usd + self.fees_usd


@dataclass(frozen=True, slots=True)
class GroupBill:
    """A share of a target's bill: what its requests in one group (an image size, an audio
    duration...) cost, by the worker time they took (``split_bill``)."""

    group: str
    requests: int
    cost_usd: float
    units: UnitCosts


def split_bill(
    cost: RunCost,
    invocations: Sequence[Invocation],
    groups: Mapping[str, Sequence[Invocation]],
    units: tuple[str, str] = ("tokens", "tokens"),
) -> list[GroupBill]:
    """``cost`` (a target's bill) shared among ``groups`` of its ``invocations`` by the
    worker time each request took (``execution_ms`` where the server gave it, else send to
    last byte), as a worker's boot and idle time serve the requests it ran: a 1024x1024 image
    that keeps a GPU four times as long as a 512x512 one bears four times the cost. The
    groups are ``metrics.members(invocations, grouping)`` of the target's invocations."""

    def busy_s(invs: Sequence[Invocation]) -> float:
        return sum(
            inv.execution_ms / 1e3
            if inv.execution_ms is not None and inv.execution_ms >= 0
            else max(0.0, (inv.end_ns - inv.start_ns) / 1e9)
            for inv in invs
        )

    total = busy_s(invocations)
    bills = []
    for label, invs in groups.items():
        usd = cost.total_usd * busy_s(invs) / total if total > 0 else 0.0
        given = float(sum(i.input_units for i in invs if i.input_units and i.input_units > 0))
        made = float(sum(i.output_units for i in invs if i.output_units and i.output_units > 0))
        bills.append(GroupBill(label, len(invs), usd, units_of(usd, len(invs), units, given, made)))
    return bills


def replay_worker_intervals(
    start_s: Sequence[float] | np.ndarray,
    busy_s: Sequence[float] | np.ndarray,
    boot_s: Sequence[float] | np.ndarray,
    scale_down_s: float,
    cold: Sequence[int] | np.ndarray | None = None,
) -> list[WorkerInterval]:
    """Worker intervals that serve requests starting at ``start_s`` and keeping a worker busy
    ``busy_s``; a request that finds no warm idle worker waits ``boot_s`` for a new one.

    ``cold`` (1 cold, 0 warm, -1 unknown per request) is what the run observed, and wins over
    the scale-down rule: a warm request reuses the most recently idle worker even past
    ``scale_down_s`` (the platform kept it longer), a cold one always boots a new worker."""
    order = np.argsort(np.asarray(start_s, dtype=np.float64), kind="stable")
    workers = 0
    free_at: dict[int, float] = {}  # workers still up: when their last request ends
    out: list[WorkerInterval] = []
    for i in order:
        t = float(start_s[i])
        seen = -1 if cold is None else int(cold[i])
        best = -1
        if seen != 1:  # the idle worker idle the shortest time (most recently used)
            for w, since in free_at.items():
                usable = since <= t and (seen == 0 or t - since <= scale_down_s)
                if usable and (best < 0 or since > free_at[best]):
                    best = w
        if best < 0 and seen == 0 and free_at:
            # seen warm, yet every worker is busy: it queued for the first to free up
            best = min(free_at, key=free_at.__getitem__)
        if best >= 0:
            since = free_at.pop(best)
            if t > since:
                out.append(WorkerInterval(best, "idle", since, t))
            begin = max(t, since)
        else:
            best, workers = workers, workers + 1
            boot = float(boot_s[i])
            if boot > 0:
                out.append(WorkerInterval(best, "cold_boot", t, t + boot))
            begin = t + boot
        end = begin + float(busy_s[i])
        out.append(WorkerInterval(best, "execution", begin, end))
        # retire workers whose scale-down delay passed: their idle tail is final
        for w in [w for w, since in free_at.items() if t - since > scale_down_s]:
            since = free_at.pop(w)
            out.append(WorkerInterval(w, "idle", since, since + scale_down_s))
        free_at[best] = end
    for w, since in free_at.items():
        out.append(WorkerInterval(w, "idle", since, since + scale_down_s))
    return out


def run_cost(
    store: Store,
    run: int | str,
    target: str,
    *,
    billing: BillingModel,
    rate_usd_per_s: float,
    scale_down_s: float | None = None,
    units: tuple[str, str] = ("tokens", "tokens"),
) -> RunCost:
    """Estimate the bill of ``target`` in a stored run from its measured invocations.

    ``units``: the workload's ``(input, output)`` unit names (``Workload.units``: tokens,
    images, audio_seconds...), which say what ``input_units``/``output_units`` count.

    A worker is busy for the server-reported ``execution_ms`` where given, else the client's
    send-to-last-byte time; a new worker boots for ``setup_ms`` where given, else for the
    cold request's latency minus its execution. ``scale_down_s`` defaults to the billing
    model's (raised to the platform minimum). Token fees use ``input_units``/``output_units``.
    """
    info = store.run(run)
    cols = store.columns(info.id, target=target, phase=None)
    start_s = cols["start_ns"] / 1e9
    service_s = (cols["end_ns"] - cols["start_ns"]) / 1e9
    exec_s = cols["execution_ms"] / 1e3
    busy_s = np.where(np.isnan(exec_s), service_s, np.minimum(exec_s, service_s))
    setup_s = cols["setup_ms"] / 1e3
    inferred_boot = np.where(cols["cold"] == 1, np.maximum(service_s - busy_s, 0.0), 0.0)
    boot_s = np.where(np.isnan(setup_s), inferred_boot, setup_s)
    delay = billing.effective_idle_timeout_s(scale_down_s)
    intervals = replay_worker_intervals(start_s, busy_s, boot_s, delay, cols["cold"])
    bill = price_worker_intervals(intervals, billing, rate_usd_per_s)
    inputs = cols["input_units"]
    outputs = cols["output_units"]
    in_amount = float(inputs[inputs > 0].sum())
    out_amount = float(outputs[outputs > 0].sum())
    fees = billing.fees_usd(
        len(start_s),
        in_amount if units[0] == "tokens" else 0.0,  # token fees only where they are tokens
        out_amount if units[1] == "tokens" else 0.0,
    )
    total = bill.cost_usd + fees
    return RunCost(
        target=target,
        requests=len(start_s),
        workers=len({iv.worker for iv in intervals}),
        bill=bill,
        fees_usd=fees,
        units=units_of(total, len(start_s), units, in_amount, out_amount),
    )
