"""Scenarios: how requests are scheduled. Plain data; the runner executes them."""

from __future__ import annotations

import math
import random
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Annotated, Any, ClassVar, Literal

from pydantic import ConfigDict, Strict

from ._errors import ConfigError

# Plans are validated by building these dataclasses through pydantic: unknown fields are refused.
_STRICT = ConfigDict(extra="forbid", allow_inf_nan=False)
# A count from a plan must be an integer: `concurrency = true` is refused, not read as 1.
Count = Annotated[int, Strict()]


def _check(cond: bool, field: str, value: Any, expected: str) -> None:
    if not cond:
        raise ConfigError(field, value, expected)


def _finite(value: float | None) -> bool:
    """TOML and Python both allow inf and nan; no duration or rate here may be either."""
    return value is None or math.isfinite(value)


# Bounds that only an absurd plan passes (a typo, a unit mistake): refused with the field
# named instead of running for years or hanging while the schedule is built.
MAX_REQUESTS = 1_000_000_000
"""Most requests one scenario may plan per target (a day at 10,000 req/s is 864 million)."""
MAX_RPS = 1_000_000.0
"""Most requests per second a ``Rate`` may ask for (beyond any one client machine)."""
MAX_DURATION_S = 30 * 86_400.0
"""Longest ``Rate.duration_s``, ``deadline_s`` and other waits: 30 days."""
MAX_CONCURRENCY = 1_000_000
"""Most requests in flight a scenario may ask for per target (each needs an open socket)."""
DEFAULT_MAX_INFLIGHT = 10_000
"""``Rate.max_inflight`` when the plan sets none (lowered to what the open-files limit holds)."""


def _check_deadline(kind: str, deadline_s: float | None) -> None:
    _check(
        deadline_s is None or (_finite(deadline_s) and 0 < deadline_s <= MAX_DURATION_S),
        f"{kind}.deadline_s",
        deadline_s,
        f"seconds > 0 (at most {MAX_DURATION_S:.0f}), or no deadline_s for none",
    )


def _check_count(field: str, value: int, low: int, high: int) -> None:
    _check(low <= value <= high, field, value, f"an integer >= {low}, at most {high:,}")


def _check_seconds(field: str, value: float, *, zero_ok: bool = False) -> None:
    ok = _finite(value) and (value >= 0 if zero_ok else value > 0) and value <= MAX_DURATION_S
    _check(ok, field, value, f"seconds {'>=' if zero_ok else '>'} 0, at most {MAX_DURATION_S:.0f}")


@dataclass(frozen=True, slots=True)
class Burst:
    """Closed loop, hey-style: ``total`` requests per target, ``concurrency`` in flight at once.

    The reference report's autoscaling test is ``Burst(200, 5)``. Each target gets its own
    ``concurrency`` slots and all targets run at the same time.
    """

    kind: ClassVar[str] = "burst"
    __pydantic_config__ = _STRICT
    total: Count
    concurrency: Count
    warmup: Count = 0
    deadline_s: float | None = None

    def __post_init__(self) -> None:
        _check_count("burst.total", self.total, 1, MAX_REQUESTS)
        _check_count("burst.concurrency", self.concurrency, 1, MAX_CONCURRENCY)
        _check_count("burst.warmup", self.warmup, 0, MAX_REQUESTS)
        _check_deadline("burst", self.deadline_s)

    def planned(self, targets: int) -> int:
        return (self.total + self.warmup) * targets

    def inflight(self) -> int:
        """Most requests in flight at once per target (an open socket each)."""
        return min(self.concurrency, max(self.total, self.warmup))


@dataclass(frozen=True, slots=True)
class Rate:
    """Open loop: requests arrive at ``rps`` for ``duration_s``, regardless of responses.

    Latency counts from each request's scheduled time, so when the client or the provider falls
    behind, the wait shows up in latency instead of silently thinning the load (no coordinated
    omission). ``arrivals="poisson"`` draws exponential gaps from ``seed``. Every arrival goes
    to every target at once, so all targets see the same conditions. ``max_inflight`` bounds the
    requests in flight per target (then the schedule waits, and the wait counts in latency);
    unset, it is ``DEFAULT_MAX_INFLIGHT`` or what the open-files limit holds, if less.
    """

    kind: ClassVar[str] = "rate"
    __pydantic_config__ = _STRICT
    rps: float
    duration_s: float
    arrivals: Literal["constant", "poisson"] = "constant"
    seed: Count = 0
    warmup: Count = 0
    max_inflight: Count | None = None
    deadline_s: float | None = None

    def __post_init__(self) -> None:
        _check(
            _finite(self.rps) and 0 < self.rps <= MAX_RPS,
            "rate.rps",
            self.rps,
            f"requests per second > 0, at most {MAX_RPS:,.0f}",
        )
        _check_seconds("rate.duration_s", self.duration_s)
        _check(
            self.arrivals in ("constant", "poisson"),
            "rate.arrivals",
            self.arrivals,
            "'constant' or 'poisson'",
        )
        _check_count("rate.warmup", self.warmup, 0, MAX_REQUESTS)
        if self.max_inflight is not None:
            _check_count("rate.max_inflight", self.max_inflight, 1, MAX_CONCURRENCY)
        _check_deadline("rate", self.deadline_s)
        arrivals = self.rps * self.duration_s
        _check(
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


@dataclass(frozen=True, slots=True)
class ColdStarts:
    """``n`` cold requests per target, each after making sure the target has no warm worker.

    Where the provider has cold-start control, it scales the target to zero and verifies it
    (samples marked confirmed). Otherwise the runner waits ``idle_gap_s`` for the platform's
    idle timeout to pass (samples marked inferred). After each cold request, ``warm_after``
    warm requests measure the same target's warm baseline.
    """

    kind: ClassVar[str] = "cold_starts"
    __pydantic_config__ = _STRICT
    n: Count
    idle_gap_s: float | None = None
    warm_after: Count = 1
    cold_timeout_s: float = 900.0
    deadline_s: float | None = None

    def __post_init__(self) -> None:
        _check_count("cold_starts.n", self.n, 1, MAX_REQUESTS)
        if self.idle_gap_s is not None:
            _check_seconds("cold_starts.idle_gap_s", self.idle_gap_s, zero_ok=True)
        _check_count("cold_starts.warm_after", self.warm_after, 0, MAX_REQUESTS)
        _check_seconds("cold_starts.cold_timeout_s", self.cold_timeout_s)
        _check_deadline("cold_starts", self.deadline_s)
        _check(
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


Scenario = Burst | Rate | ColdStarts
