"""Shapes that decide their next step from the last: ``sweep`` (GuideLLM's synchronous,
throughput, then constant rates between) and ``max_rate`` (the highest rate meeting an SLO).

Each step's requests are numbered from ``step * SEQ_BLOCK``, so the store alone says which
step a request belonged to; the decisions are recomputed from it by ``gpubench_sdk.metrics``
(``sweep_curve``, ``max_rate_search``) with the same functions the run used. In a
multi-process run every process reads every process's requests after a barrier, so all of
them take the same decision.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

from ._base import (
    MAX_CONCURRENCY,
    MAX_RPS,
    Count,
    Scenario,
    check,
    check_count,
    check_max_inflight,
    check_rps,
    check_seconds,
    finite,
)
from ._slo import min_samples, slo_verdict, step_stats  # the one rule, shared with metrics

if TYPE_CHECKING:
    from ._load import Load


def constant_offsets(rps: float, duration_s: float) -> Iterator[float]:
    for i in range(max(1, int(rps * duration_s))):
        yield i / rps


@dataclass(frozen=True, slots=True)
class Sweep(Scenario):
    """GuideLLM's sweep: ``duration_s`` each of a synchronous baseline (one request at a time),
    a throughput probe (``max_concurrency`` in flight: the most the target serves), then
    ``rates`` constant rates evenly spaced between the two. ``metrics.sweep_curve`` gives the
    throughput-latency curve and its knee."""

    kind: ClassVar[str] = "sweep"
    duration_s: float
    rates: Count = 5
    max_concurrency: Count = 64
    max_inflight: Count | None = None
    deadline_s: float | None = None
    name: str | None = None

    def __post_init__(self) -> None:
        check_seconds("sweep.duration_s", self.duration_s)
        check_count("sweep.rates", self.rates, 1, 100)
        check_count("sweep.max_concurrency", self.max_concurrency, 1, MAX_CONCURRENCY)
        check_max_inflight("sweep", self.max_inflight)
        self.check_label()

    def planned(self, targets: int) -> int:
        """An estimate: the rates are only known once the first two steps ran."""
        return (2 + self.rates) * max(1, math.ceil(self.duration_s)) * targets

    def inflight(self) -> int:
        return max(self.max_concurrency, self.max_inflight or 1)

    def inflight_adapts(self) -> bool:
        return False  # the throughput probe's max_concurrency is fixed by the plan

    def inflight_field(self) -> str:
        return "max_concurrency"

    def rates_between(self, sync_rps: float, max_rps: float) -> list[float]:
        """The constant rates: ``rates`` evenly spaced strictly between the two probes."""
        lo, hi = min(sync_rps, max_rps), max(sync_rps, max_rps)
        return [lo + (hi - lo) * (i + 1) / (self.rates + 1) for i in range(self.rates)]

    async def drive(self, load: Load) -> None:

        await load.closed_loop(1, self.duration_s, step=0)
        await load.closed_loop(self.max_concurrency, self.duration_s, step=1)
        await load.sync()
        rates: dict[str, list[float]] = {}  # each target's own rates, between its own probes
        for target in load.targets:
            stats = {s.step: s for s in step_stats(await load.results(target=target))}
            if 0 in stats and 1 in stats:  # else nothing came back: no rate to derive
                rates[target] = self.rates_between(stats[0].throughput_rps, stats[1].throughput_rps)
        for j in range(self.rates):
            if not rates or load.stopped():
                return

            def schedule(target: str, j: int = j) -> list[float]:
                rps = rates[target][j] if target in rates else 0.0
                return list(constant_offsets(rps, self.duration_s)) if rps > 0 else []

            await load.open_loop(schedule, step=2 + j, max_inflight=self.max_inflight)


@dataclass(frozen=True, slots=True)
class MaxRate(Scenario):
    """The highest constant rate a target sustains within an SLO: ``p95_ms`` and
    ``error_rate``, each held with ``confidence`` (a step passes only when the upper
    confidence bounds of its share over ``p95_ms`` and of its error rate are below 5% and
    ``error_rate``). Rates double from ``start_rps`` until a step fails, then bisect until
    the bracket is within ``precision`` (or ``max_trials`` steps ran). Each target is searched
    on its own, the searches in lock step (step j is each target's j-th trial)."""

    kind: ClassVar[str] = "max_rate"
    p95_ms: float
    error_rate: float = 0.01
    confidence: float = 0.9
    start_rps: float = 1.0
    max_rps: float = 10_000.0
    trial_s: float = 10.0
    precision: float = 0.05
    max_trials: Count = 16
    max_inflight: Count | None = None
    deadline_s: float | None = None
    name: str | None = None

    def __post_init__(self) -> None:
        check(
            finite(self.p95_ms) and self.p95_ms > 0,
            "max_rate.p95_ms",
            self.p95_ms,
            "milliseconds > 0: the p95 latency the rate must keep",
        )
        for field, value, low in (
            ("error_rate", self.error_rate, 0.0),
            ("confidence", self.confidence, 0.5),
            ("precision", self.precision, 0.0),
        ):
            # confidence 0.5 would be a one-sided bound at 0 sigma: a verdict with no interval
            open_low = field in ("precision", "confidence")
            check(
                finite(value) and low <= value < 1 and (not open_low or value > low),
                f"max_rate.{field}",
                value,
                f"a fraction in ({low:g}, 1)" if open_low else f"a fraction in [{low:g}, 1)",
            )
        check_rps("max_rate.start_rps", self.start_rps)
        check_rps("max_rate.max_rps", self.max_rps)
        check(
            self.max_rps >= self.start_rps,
            "max_rate.max_rps",
            self.max_rps,
            f"requests per second >= start_rps ({self.start_rps:g}), at most {MAX_RPS:,.0f}",
        )
        check_seconds("max_rate.trial_s", self.trial_s)
        check_count("max_rate.max_trials", self.max_trials, 2, 100)
        check_max_inflight("max_rate", self.max_inflight)
        self.check_label()

    def planned(self, targets: int) -> int:
        """An estimate: the search decides the rates as it goes."""
        return len(self.trial_offsets(self.start_rps)) * self.max_trials * targets

    def inflight(self) -> int:
        return self.max_inflight or max(1, math.ceil(self.max_rps * self.p95_ms / 1000) * 4)

    def trial_offsets(self, rps: float) -> list[float]:
        """A trial at ``rps``: ``trial_s`` long, or longer where that sends too few requests
        for a clean trial to pass at this ``confidence`` (``metrics.min_samples``)."""

        n = max(int(rps * self.trial_s), min_samples(self.error_rate, self.confidence))
        return [i / rps for i in range(n)]

    def next_rate(self, tried: list[tuple[float, bool]]) -> float | None:
        """The next rate to try after ``tried`` (rate, passed), or None: the search is done."""
        if not tried:
            return self.start_rps
        if len(tried) >= self.max_trials:
            return None
        passed = [r for r, ok in tried if ok]
        failed = [r for r, ok in tried if not ok]
        lo = max(passed, default=0.0)
        hi = min((r for r in failed if r > lo), default=None)
        if hi is None:  # still growing
            if lo >= self.max_rps:
                return None
            return min(self.max_rps, lo * 2)
        if lo == 0.0 and hi <= self.start_rps:
            return None  # even the first rate failed: no rate meets the SLO
        if (hi - lo) <= self.precision * hi:
            return None
        return (lo + hi) / 2

    async def drive(self, load: Load) -> None:

        # One search per target, in lock step: step j is every searching target's next trial
        # (each at its own rate), so every process meets the others at the same barriers.
        tried: dict[str, list[tuple[float, bool]]] = {t: [] for t in load.targets}
        for step in range(self.max_trials):
            rates = {t: self.next_rate(done) for t, done in tried.items()}
            if all(r is None for r in rates.values()) or load.stopped():
                return

            def trial(target: str, rates: dict[str, float | None] = rates) -> list[float]:
                rps = rates[target]
                return [] if rps is None else self.trial_offsets(rps)

            await load.open_loop(trial, step=step, max_inflight=self.max_inflight)
            await load.sync()
            for target, rps in rates.items():
                if rps is not None:
                    invs = await load.results(step, target)
                    verdict = slo_verdict(invs, self.p95_ms, self.error_rate, self.confidence)
                    tried[target].append((rps, verdict.passed))
