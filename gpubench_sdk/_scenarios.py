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
        _check(self.total >= 1, "burst.total", self.total, "an integer >= 1")
        _check(self.concurrency >= 1, "burst.concurrency", self.concurrency, "an integer >= 1")
        _check(self.warmup >= 0, "burst.warmup", self.warmup, "an integer >= 0")
        _check(
            self.deadline_s is None or (_finite(self.deadline_s) and self.deadline_s > 0),
            "burst.deadline_s",
            self.deadline_s,
            "seconds > 0",
        )

    def planned(self, targets: int) -> int:
        return (self.total + self.warmup) * targets


@dataclass(frozen=True, slots=True)
class Rate:
    """Open loop: requests arrive at ``rps`` for ``duration_s``, regardless of responses.

    Latency counts from each request's scheduled time, so when the client or the provider falls
    behind, the wait shows up in latency instead of silently thinning the load (no coordinated
    omission). ``arrivals="poisson"`` draws exponential gaps from ``seed``. Every arrival goes
    to every target at once, so all targets see the same conditions.
    """

    kind: ClassVar[str] = "rate"
    __pydantic_config__ = _STRICT
    rps: float
    duration_s: float
    arrivals: Literal["constant", "poisson"] = "constant"
    seed: Count = 0
    warmup: Count = 0
    max_inflight: Count = 10_000
    deadline_s: float | None = None

    def __post_init__(self) -> None:
        _check(_finite(self.rps) and self.rps > 0, "rate.rps", self.rps, "requests per second > 0")
        _check(
            _finite(self.duration_s) and self.duration_s > 0,
            "rate.duration_s",
            self.duration_s,
            "seconds > 0",
        )
        _check(
            self.arrivals in ("constant", "poisson"),
            "rate.arrivals",
            self.arrivals,
            "'constant' or 'poisson'",
        )
        _check(self.warmup >= 0, "rate.warmup", self.warmup, "an integer >= 0")
        _check(self.max_inflight >= 1, "rate.max_inflight", self.max_inflight, "an integer >= 1")

    def offsets_s(self) -> Iterator[float]:
        """Scheduled send times in seconds from the start of the scenario."""
        if self.arrivals == "constant":
            count = int(self.rps * self.duration_s)
            for i in range(count):
                yield i / self.rps
            return
        rng = random.Random(self.seed)
        t = rng.expovariate(self.rps)
        while t < self.duration_s:
            yield t
            t += rng.expovariate(self.rps)

    def planned(self, targets: int) -> int:
        arrivals = sum(1 for _ in self.offsets_s())  # exact: the Poisson draw is seeded
        return (arrivals + self.warmup) * targets


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
        _check(self.n >= 1, "cold_starts.n", self.n, "an integer >= 1")
        _check(
            self.idle_gap_s is None or self.idle_gap_s >= 0,
            "cold_starts.idle_gap_s",
            self.idle_gap_s,
            "seconds >= 0",
        )
        _check(self.warm_after >= 0, "cold_starts.warm_after", self.warm_after, "an integer >= 0")
        _check(
            self.cold_timeout_s > 0,
            "cold_starts.cold_timeout_s",
            self.cold_timeout_s,
            "seconds > 0",
        )

    def planned(self, targets: int) -> int:
        return self.n * (1 + self.warm_after) * targets


Scenario = Burst | Rate | ColdStarts
