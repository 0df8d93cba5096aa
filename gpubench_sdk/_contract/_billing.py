"""Billing models: how a provider turns worker time into money, and the arithmetic to price it.

Pure functions, no I/O, no catalog: the catalog (``_catalog.py``) says which model and which price
a provider has; this module only knows how to round and add. Every rounding rule lives here:

- a billed *interval* is rounded **up** to ``granularity_s`` (1 ms, 100 ms, 1 s, 1 min...);
- an interval is never billed less than ``min_billed_s``;
- ``billed_unit = "worker"``: one interval per continuous stretch of billed worker time
  (boot + execution + idle until scale-down), rounded once (RunPod, Cloud Run, Hugging Face...);
  ``billed_unit = "request"``: one interval per request's billed phases (Replicate public models).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np
import numpy.typing as npt

from .._base._errors import ConfigError

BilledPhase = Literal["cold_boot", "queue", "execution", "idle"]
BilledUnit = Literal["worker", "request"]
ALL_PHASES: frozenset[BilledPhase] = frozenset({"cold_boot", "queue", "execution", "idle"})

# Durations are rounded to the nanosecond before rounding up, so 12.000000000001 s (float noise
# from summing timestamps) bills 12 s, not 13 s, at 1 s granularity.
_NS_DIGITS = 9


@dataclass(frozen=True, slots=True)
class BillingModel:
    """How a provider turns worker time into money.

    ``granularity_s`` is the billed increment (each billed interval is rounded up to it),
    ``min_billed_s`` the smallest charge per interval, ``billed_phases`` which parts of a
    worker's life are paid for, ``billed_unit`` whether an interval is a worker's continuous
    billed stretch or one request. ``min_idle_timeout_s`` is the shortest scale-down delay the
    platform allows (time a worker stays up, and billed if ``"idle"`` is a billed phase, after
    its last request) and ``default_idle_timeout_s`` the one it uses unless told otherwise.
    ``per_request_usd`` and the per-million-token fees are charged on top of time.
    ``source`` cites where the rules were read.
    """

    granularity_s: float = 1.0
    min_billed_s: float = 0.0
    billed_phases: frozenset[BilledPhase] = frozenset({"cold_boot", "execution", "idle"})
    min_idle_timeout_s: float = 0.0
    default_idle_timeout_s: float | None = None
    source: str = ""
    billed_unit: BilledUnit = "worker"
    per_request_usd: float = 0.0
    per_million_input_tokens_usd: float = 0.0
    per_million_output_tokens_usd: float = 0.0

    def __post_init__(self) -> None:
        if not self.granularity_s > 0:
            raise ConfigError("billing.granularity_s", self.granularity_s, "seconds > 0")
        for name in ("min_billed_s", "min_idle_timeout_s", "per_request_usd"):
            if getattr(self, name) < 0:
                raise ConfigError(f"billing.{name}", getattr(self, name), "a number >= 0")
        unknown = set(self.billed_phases) - ALL_PHASES
        if unknown:
            raise ConfigError(
                "billing.billed_phases", sorted(unknown), f"a subset of {sorted(ALL_PHASES)}"
            )
        if self.billed_unit not in ("worker", "request"):
            raise ConfigError("billing.billed_unit", self.billed_unit, "'worker' or 'request'")

    def bills(self, phase: BilledPhase) -> bool:
        return phase in self.billed_phases

    def billed_s(self, duration_s: float) -> float:
        """Seconds charged for one billed interval of ``duration_s``: rounded up, floored at
        ``min_billed_s``. A zero-length interval is not billed at all."""
        if duration_s <= 0:
            return 0.0
        steps = math.ceil(round(duration_s / self.granularity_s, _NS_DIGITS))
        return max(self.min_billed_s, steps * self.granularity_s)

    def billed_s_array(self, durations_s: npt.ArrayLike) -> npt.NDArray[np.float64]:
        """``billed_s`` over an array (the simulator's fast path); same rounding rules."""
        d = np.asarray(durations_s, dtype=np.float64)
        steps = np.ceil(np.round(d / self.granularity_s, _NS_DIGITS))
        billed = np.maximum(steps * self.granularity_s, self.min_billed_s)
        return np.where(d > 0, billed, 0.0)

    def effective_idle_timeout_s(self, requested_s: float | None) -> float:
        """The scale-down delay the platform actually applies: never below its minimum."""
        wanted = self.default_idle_timeout_s if requested_s is None else requested_s
        return max(self.min_idle_timeout_s, wanted or 0.0)

    def fees_usd(
        self, requests: int, input_tokens: float = 0.0, output_tokens: float = 0.0
    ) -> float:
        """Charges on top of time: per request and per token."""
        return (
            requests * self.per_request_usd
            + input_tokens / 1e6 * self.per_million_input_tokens_usd
            + output_tokens / 1e6 * self.per_million_output_tokens_usd
        )


@dataclass(frozen=True, slots=True)
class WorkerInterval:
    """One phase of one worker's life, in seconds on any common clock."""

    worker: str | int
    phase: BilledPhase
    start_s: float
    end_s: float

    @property
    def duration_s(self) -> float:
        return max(0.0, self.end_s - self.start_s)


@dataclass(frozen=True, slots=True)
class WorkerBill:
    """The price of a set of worker intervals. ``raw_s`` is billed-phase time before rounding,
    ``billed_s`` after; ``seconds_by_phase`` is raw time per phase (billed or not)."""

    cost_usd: float
    billed_s: float
    raw_s: float
    intervals: int
    seconds_by_phase: dict[str, float]


def price_worker_intervals(
    intervals: Iterable[WorkerInterval], billing: BillingModel, rate_usd_per_s: float
) -> WorkerBill:
    """Price worker busy/idle/boot intervals under ``billing`` at ``rate_usd_per_s``.

    For ``billed_unit="worker"`` the billed phases of one worker that touch each other
    (end == next start, within 1 µs) are merged into one billed interval and rounded once;
    a gap (the worker stopped, or an unbilled phase) starts a new interval. For
    ``billed_unit="request"`` each billed interval is rounded on its own.
    Fees are not included: add ``billing.fees_usd(...)``.
    """
    by_phase: dict[str, float] = {p: 0.0 for p in sorted(ALL_PHASES)}
    per_worker: dict[str | int, list[WorkerInterval]] = {}
    for iv in intervals:
        if iv.phase not in ALL_PHASES:
            raise ConfigError("interval.phase", iv.phase, f"one of {sorted(ALL_PHASES)}")
        by_phase[iv.phase] += iv.duration_s
        if billing.bills(iv.phase) and iv.duration_s > 0:
            per_worker.setdefault(iv.worker, []).append(iv)
    stretches: list[float] = []
    for ivs in per_worker.values():
        ivs.sort(key=lambda iv: iv.start_s)
        if billing.billed_unit == "request":
            stretches.extend(iv.duration_s for iv in ivs)
            continue
        begin, end = ivs[0].start_s, ivs[0].end_s
        for iv in ivs[1:]:
            if iv.start_s <= end + 1e-6:
                end = max(end, iv.end_s)
            else:
                stretches.append(end - begin)
                begin, end = iv.start_s, iv.end_s
        stretches.append(end - begin)
    billed = sum(billing.billed_s(s) for s in stretches)
    return WorkerBill(
        cost_usd=billed * rate_usd_per_s,
        billed_s=billed,
        raw_s=sum(stretches),
        intervals=len(stretches),
        seconds_by_phase=by_phase,
    )


def billed_seconds_of_lifetimes(
    billing: BillingModel,
    boot_s: Sequence[float] | npt.NDArray[np.float64],
    busy_s: Sequence[float] | npt.NDArray[np.float64],
    idle_s: Sequence[float] | npt.NDArray[np.float64],
) -> npt.NDArray[np.float64]:
    """Billed seconds of whole worker lifetimes (boot, then busy and idle time interleaved,
    no gaps), one interval each: the fast path equal to ``price_worker_intervals`` for a
    ``"worker"`` model whose unbilled phases only sit at the ends (boot first, idle last)."""
    total = np.zeros(len(boot_s))
    if billing.bills("cold_boot"):
        total += np.asarray(boot_s, dtype=np.float64)
    if billing.bills("execution"):
        total += np.asarray(busy_s, dtype=np.float64)
    if billing.bills("idle"):
        total += np.asarray(idle_s, dtype=np.float64)
    return billing.billed_s_array(total)
