"""The first three scenario kinds: ``burst`` (closed loop), ``rate`` (open loop) and
``cold_starts``. Written on the public ``Load`` API, as a third-party shape would be."""

from __future__ import annotations

import math
import random
from collections.abc import Collection, Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar, Literal

import anyio

from .._base._types import ColdCheck, Phase
from ._base import (
    DEFAULT_MAX_INFLIGHT,
    MAX_CONCURRENCY,
    MAX_REQUESTS,
    MAX_RPS,
    Count,
    Scenario,
    check,
    check_count,
    check_max_inflight,
    check_seconds,
    finite,
)

if TYPE_CHECKING:
    from ._load import Load


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
        self.check_label()

    def planned(self, targets: int) -> int:
        return (self.total + self.warmup) * targets

    def inflight(self) -> int:
        """Most requests in flight at once per target (an open socket each)."""
        return min(self.concurrency, max(self.total, self.warmup))

    async def drive(self, load: Load) -> None:
        if self.warmup:  # measured only once every process has warmed up (the next sync)
            await load.burst(
                self.warmup, self.concurrency, first_seq=-self.warmup, phase=Phase.WARMUP
            )
        await load.burst(self.total, self.concurrency)


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
        check_max_inflight("rate", self.max_inflight)
        self.check_label()
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
        if self.warmup:  # one request at a time, before every process starts the schedule
            await load.burst(self.warmup, 1, first_seq=-self.warmup, phase=Phase.WARMUP)
        # each target walks its own schedule: a saturated one never delays the others
        await load.open_loop(lambda _target: self.offsets_s(), max_inflight=self.max_inflight)


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
        self.check_label()
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

    def check_targets(self, capabilities: Mapping[str, Collection[str]]) -> None:
        blind = [t for t, caps in capabilities.items() if "cold_start_control" not in caps]
        check(
            not blind or self.idle_gap_s is not None,
            "cold_starts.idle_gap_s",
            None,
            f"seconds to wait between requests for targets without cold-start control "
            f"({', '.join(blind)}): at least the platform's scale-down delay",
        )

    async def drive(self, load: Load) -> None:
        if load.shard != 0:
            return  # sequential by nature: one slot, the first process's (it sends them all)
        for i in range(self.n):
            if all(load.stopped(t) for t in load.targets):
                return
            async with anyio.create_task_group() as tg:
                for target in load.targets:
                    tg.start_soon(self._probe, load, target, i * (1 + self.warm_after))

    async def _probe(self, load: Load, target: str, first_seq: int) -> None:
        """One cold request to ``target`` made cold first, then its ``warm_after`` warm ones."""
        if load.stopped(target):
            return  # do not wait out an idle gap for a request that will not be sent
        made = await self._make_cold(load, target)
        if not await load.send(target, first_seq, expect_cold=True, cold_check=made):
            return
        for k in range(self.warm_after):
            if not await load.send(target, first_seq + 1 + k, expect_cold=False):
                return

    async def _make_cold(self, load: Load, target: str) -> ColdCheck:
        if "cold_start_control" in load.capabilities(target):
            return await load.ensure_cold(target, self.cold_timeout_s)
        gap = self.idle_gap_s
        assert gap is not None  # check_targets refused the plan otherwise
        await anyio.sleep(gap)
        return ColdCheck(False, gap, f"waited idle gap {gap:g} s")
