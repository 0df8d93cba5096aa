"""``concurrency`` (closed loop for a duration, k6's constant VUs) and ``stages`` (open loop
whose rate follows piecewise-linear stages, k6's ramping arrival rate / Locust's load shapes)."""

from __future__ import annotations

import math
import random
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar, Literal

from .._base._types import Phase
from ._base import (
    DEFAULT_MAX_INFLIGHT,
    MAX_CONCURRENCY,
    MAX_REQUESTS,
    STRICT,
    Count,
    Scenario,
    check,
    check_count,
    check_max_inflight,
    check_rps,
    check_seconds,
    finite,
)

if TYPE_CHECKING:
    from ._load import Load


@dataclass(frozen=True, slots=True)
class Concurrency(Scenario):
    """Closed loop: ``concurrency`` requests in flight per target for ``duration_s``, each slot
    sending its next request ``think_s`` after its last response (k6's constant VUs).

    ``warmup_s`` runs the same loop that long first, its requests stored as warm-up (negative
    ``seq``, ``Phase.WARMUP``, left out of every summary), so the measured part starts on a
    warmed fleet; the warm-up's last requests finish before the measured part begins."""

    kind: ClassVar[str] = "concurrency"
    concurrency: Count
    duration_s: float
    think_s: float = 0.0
    warmup_s: float = 0.0
    deadline_s: float | None = None
    name: str | None = None

    def __post_init__(self) -> None:
        check_count("concurrency.concurrency", self.concurrency, 1, MAX_CONCURRENCY)
        check_seconds("concurrency.duration_s", self.duration_s)
        check_seconds("concurrency.think_s", self.think_s, zero_ok=True)
        check_seconds("concurrency.warmup_s", self.warmup_s, zero_ok=True)
        self.check_label()

    def planned(self, targets: int) -> int:
        """An estimate: one request per slot per second of thinking (or per second)."""
        per_slot = (self.warmup_s + self.duration_s) / max(self.think_s, 1.0)
        return max(1, math.ceil(per_slot * self.concurrency)) * targets

    def inflight(self) -> int:
        return self.concurrency

    async def drive(self, load: Load) -> None:
        if self.warmup_s:  # numbered from -SEQ_BLOCK up: negative, as rate's warm-up is
            await load.closed_loop(
                self.concurrency, self.warmup_s, think_s=self.think_s, step=-1, phase=Phase.WARMUP
            )
        await load.closed_loop(self.concurrency, self.duration_s, think_s=self.think_s)


@dataclass(frozen=True, slots=True)
class Stage:
    """Over ``over_s`` seconds the rate goes linearly to ``to_rps`` (0 s: a step)."""

    __pydantic_config__ = STRICT
    to_rps: float
    over_s: float


@dataclass(frozen=True, slots=True)
class Stages(Scenario):
    """Open loop whose rate starts at ``start_rps`` and follows ``stages`` piecewise-linearly.

    Arrival ``i`` is sent when the integral of the rate reaches ``i`` (exact, not sampled), so
    a constant stage sends exactly what ``Rate`` would. ``arrivals="poisson"`` makes the
    arrivals an inhomogeneous Poisson process with that rate (time rescaling: arrival ``i`` when
    the integral reaches the sum of ``i + 1`` unit exponential draws from ``seed``). Each stage
    whose level differs from the one before is a *change*;
    ``gpubench_sdk.metrics.scaling_response`` measures how long the target took to answer it
    (latency back within ``tolerance`` of the level before, in a sliding window of
    ``window_s``; ready workers at their new steady count).
    """

    kind: ClassVar[str] = "stages"
    stages: tuple[Stage, ...]
    start_rps: float = 0.0
    arrivals: Literal["constant", "poisson"] = "constant"
    seed: Count = 0
    max_inflight: Count | None = None
    window_s: float = 5.0
    tolerance: float = 0.25
    deadline_s: float | None = None
    name: str | None = None

    def __post_init__(self) -> None:
        check(len(self.stages) >= 1, "stages.stages", [], "at least one {to_rps, over_s} stage")
        check_rps("stages.start_rps", self.start_rps, zero_ok=True)
        for j, st in enumerate(self.stages):
            check_rps(f"stages.stages[{j}].to_rps", st.to_rps, zero_ok=True)
            check_seconds(f"stages.stages[{j}].over_s", st.over_s, zero_ok=True)
        check(
            self.arrivals in ("constant", "poisson"),
            "stages.arrivals",
            self.arrivals,
            "'constant' or 'poisson'",
        )
        check(
            self.duration_s > 0,
            "stages.stages",
            "(all over_s are 0)",
            "stages lasting some time: a step is {to_rps, over_s = 0} followed by a hold",
        )
        check(
            self.expected() >= 1,
            "stages.stages",
            f"{self.expected():g} requests",
            "stages that send at least one request: the rate's integral over them (to_rps "
            "times over_s, summed) is below 1",
        )
        check_max_inflight("stages", self.max_inflight)
        check_seconds("stages.window_s", self.window_s)
        check(
            finite(self.tolerance) and 0 < self.tolerance <= 10,
            "stages.tolerance",
            self.tolerance,
            "a fraction > 0 (0.25: p95 back within 25% of its level before the change)",
        )
        self.check_label()
        check(
            self.expected() <= MAX_REQUESTS,
            "stages.stages",
            f"{self.expected():,.0f} requests",
            f"a schedule of at most {MAX_REQUESTS:,} requests per target",
        )

    @property
    def duration_s(self) -> float:
        return sum(st.over_s for st in self.stages)

    def segments(self) -> Iterator[tuple[float, float, float, float]]:
        """``(start_s, over_s, from_rps, to_rps)`` per stage."""
        t, rps = 0.0, self.start_rps
        for st in self.stages:
            yield t, st.over_s, rps, st.to_rps
            t, rps = t + st.over_s, st.to_rps

    def rate_at(self, t_s: float) -> float:
        """The planned rate ``t_s`` seconds into the scenario."""
        for start, over, a, b in self.segments():
            if t_s < start + over:
                return a + (b - a) * (t_s - start) / over
        return self.stages[-1].to_rps

    def expected(self) -> float:
        """The integral of the rate: how many requests the schedule sends per target."""
        return sum((a + b) / 2 * over for _, over, a, b in self.segments())

    def _levels(self) -> Iterator[float]:
        """The rate's integral at each arrival: 0, 1, 2, ... or a unit-rate Poisson process."""
        if self.arrivals == "constant":
            i = 0
            while True:
                yield float(i)
                i += 1
        rng = random.Random(self.seed)
        level = 0.0
        while True:
            level += rng.expovariate(1.0)
            yield level

    def offsets_s(self) -> Iterator[float]:
        """Each arrival at the time the rate's integral reaches its level (lazily)."""
        done = 0.0  # the integral up to the current segment's start
        levels = self._levels()
        i = next(levels)
        for start, over, a, b in self.segments():
            if over == 0:
                continue
            area = (a + b) / 2 * over
            slope = (b - a) / over
            while i - done < area - 1e-9 * max(1.0, area):  # arrival i lies in this segment
                need = i - done
                if need <= 0:
                    tau = 0.0
                elif slope == 0:
                    tau = need / a
                else:  # solve a*tau + slope*tau^2/2 = need, in the form stable for both signs
                    tau = 2 * need / (a + math.sqrt(max(0.0, a * a + 2 * slope * need)))
                yield start + min(tau, over)
                i = next(levels)
            done += area

    def changes(self) -> list[tuple[float, float, float]]:
        """``(at_s, until_s, rps)``: each stage that changes the level, when it starts, when
        the next change starts (or the end), and the level it goes to."""
        out: list[tuple[float, float, float]] = []
        level = self.start_rps
        for start, over, _a, b in self.segments():
            if b != level:
                out.append((start, start + over, b))
                level = b
            elif out:  # a hold extends the change before it
                out[-1] = (out[-1][0], start + over, b)
        return out

    def planned(self, targets: int) -> int:
        """Exact for constant arrivals (the integers below the rate's integral); for Poisson
        arrivals the expected count (the seeded draw differs by about its square root)."""
        if self.arrivals == "poisson":
            return round(self.expected()) * targets
        return max(0, math.ceil(self.expected() - 1e-9 * max(1.0, self.expected()))) * targets

    def inflight(self) -> int:
        cap = self.max_inflight or DEFAULT_MAX_INFLIGHT
        peak = max([self.start_rps, *(st.to_rps for st in self.stages)])
        return max(1, min(cap, math.ceil(peak * self.duration_s)))

    async def drive(self, load: Load) -> None:
        await load.open_loop(lambda _target: self.offsets_s(), max_inflight=self.max_inflight)
