"""The first three scenario kinds: ``burst`` (closed loop), ``rate`` (open loop) and
``cold_starts``. Plain data; the runner's own drivers (``_runner_drivers``) execute them."""

from __future__ import annotations

import math
import random
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar, Literal

from ._base import (
    DEFAULT_MAX_INFLIGHT,
    MAX_CONCURRENCY,
    MAX_REQUESTS,
    MAX_RPS,
    Count,
    Scenario,
    check,
    check_count,
    check_deadline,
    check_name,
    check_seconds,
    finite,
)

if TYPE_CHECKING:
    from .._runner_load import Load


@dataclass(frozen=True, slots=True)
class Burst(Scenario):
    """Closed loop, hey-style: ``total`` requests per target, ``concurrency`` in flight at once.

    The reference report's autoscaling test is ``Burst(200, 5)``. Each target gets its own
    ``concurrency`` slots and all targets run at the same time.
    """

    kind: ClassVar[str] = "burst"
    total: Count
    concurrency: Count
    warmup: Count = 0
    deadline_s: float | None = None
    name: str | None = None

    def __post_init__(self) -> None:
        check_count("burst.total", self.total, 1, MAX_REQUESTS)
        check_count("burst.concurrency", self.concurrency, 1, MAX_CONCURRENCY)
        check_count("burst.warmup", self.warmup, 0, MAX_REQUESTS)
        check_deadline("burst", self.deadline_s)
        check_name("burst", self.name)

    def planned(self, targets: int) -> int:
        return (self.total + self.warmup) * targets

    def inflight(self) -> int:
        """Most requests in flight at once per target (an open socket each)."""
        return min(self.concurrency, max(self.total, self.warmup))

    async def drive(self, load: Load) -> None:
        await load.runner._burst(load.live, load.index, self)


@dataclass(frozen=True, slots=True)
class Rate(Scenario):
    """Open loop: requests arrive at ``rps`` for ``duration_s``, regardless of responses.

    Latency counts from each request's scheduled time, so when the client or the provider falls
    behind, the wait shows up in latency instead of silently thinning the load (no coordinated
    omission). ``arrivals="poisson"`` draws exponential gaps from ``seed``. Every arrival goes
    to every target at once, so all targets see the same conditions. ``max_inflight`` bounds the
    requests in flight per target (then the schedule waits, and the wait counts in latency);
    unset, it is ``DEFAULT_MAX_INFLIGHT`` or what the open-files limit holds, if less.
    """

    kind: ClassVar[str] = "rate"
    rps: float
    duration_s: float
    arrivals: Literal["constant", "poisson"] = "constant"
    seed: Count = 0
    warmup: Count = 0
    max_inflight: Count | None = None
    deadline_s: float | None = None
    name: str | None = None

    def __post_init__(self) -> None:
        check(
            finite(self.rps) and 0 < self.rps <= MAX_RPS,
            "rate.rps",
            self.rps,
            f"requests per second > 0, at most {MAX_RPS:,.0f}",
        )
        check_seconds("rate.duration_s", self.duration_s)
        check(
            self.arrivals in ("constant", "poisson"),
            "rate.arrivals",
            self.arrivals,
            "'constant' or 'poisson'",
        )
        check_count("rate.warmup", self.warmup, 0, MAX_REQUESTS)
        if self.max_inflight is not None:
            check_count("rate.max_inflight", self.max_inflight, 1, MAX_CONCURRENCY)
        check_deadline("rate", self.deadline_s)
        check_name("rate", self.name)
        arrivals = self.rps * self.duration_s
        check(
            arrivals <= MAX_REQUESTS,
            "rate.duration_s",
            self.duration_s,
            f"a schedule of at most {MAX_REQUESTS:,} requests per target: rps x duration_s "
            f"is {arrivals:,.0f}; lower rps or duration_s",
        )

    def offsets_s(self) -> Iterator[float]:
        """Scheduled send times in seconds from the start of the scenario (lazily)."""
        if self.arrivals == "constant":
            for i in range(self._constant_count()):
                yield i / self.rps
            return
        rng = random.Random(self.seed)
        t = rng.expovariate(self.rps)
        while t < self.duration_s:
            yield t
            t += rng.expovariate(self.rps)

    def _constant_count(self) -> int:
        return int(self.rps * self.duration_s)

    def planned(self, targets: int) -> int:
        """Requests planned over all ``targets``, in O(1): exact for constant arrivals; for
        Poisson arrivals the expected count ``rps * duration_s`` (the seeded draw differs by
        about its square root), which is what progress bars and estimates need."""
        if self.arrivals == "constant":
            arrivals = self._constant_count()
        else:
            arrivals = round(self.rps * self.duration_s)
        return (arrivals + self.warmup) * targets

    def inflight(self) -> int:
        """Most requests in flight at once per target (an open socket each)."""
        cap = DEFAULT_MAX_INFLIGHT if self.max_inflight is None else self.max_inflight
        return max(1, min(cap, math.ceil(self.rps * self.duration_s)))

    async def drive(self, load: Load) -> None:
        await load.runner._rate(load.live, load.index, self)


@dataclass(frozen=True, slots=True)
class ColdStarts(Scenario):
    """``n`` cold requests per target, each after making sure the target has no warm worker.

    Where the provider has cold-start control, it scales the target to zero and verifies it
    (samples marked confirmed). Otherwise the runner waits ``idle_gap_s`` for the platform's
    idle timeout to pass (samples marked inferred). After each cold request, ``warm_after``
    warm requests measure the same target's warm baseline.
    """

    kind: ClassVar[str] = "cold_starts"
    n: Count
    idle_gap_s: float | None = None
    warm_after: Count = 1
    cold_timeout_s: float = 900.0
    deadline_s: float | None = None
    name: str | None = None

    def __post_init__(self) -> None:
        check_count("cold_starts.n", self.n, 1, MAX_REQUESTS)
        if self.idle_gap_s is not None:
            check_seconds("cold_starts.idle_gap_s", self.idle_gap_s, zero_ok=True)
        check_count("cold_starts.warm_after", self.warm_after, 0, MAX_REQUESTS)
        check_seconds("cold_starts.cold_timeout_s", self.cold_timeout_s)
        check_deadline("cold_starts", self.deadline_s)
        check_name("cold_starts", self.name)
        check(
            self.n * (1 + self.warm_after) <= MAX_REQUESTS,
            "cold_starts.warm_after",
            self.warm_after,
            f"n x (1 + warm_after) at most {MAX_REQUESTS:,} requests per target",
        )

    def planned(self, targets: int) -> int:
        return self.n * (1 + self.warm_after) * targets

    def inflight(self) -> int:
        """Most requests in flight at once per target: cold starts are sequential."""
        return 1

    async def drive(self, load: Load) -> None:
        await load.runner._cold_starts(load.live, load.index, self)
