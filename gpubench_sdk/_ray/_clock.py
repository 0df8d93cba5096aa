"""Clock offsets between the driver and a worker, measured over round trips (best of N).

Every stored time of a run is relative to the driver's ``perf_counter_ns`` origin. A worker on
another machine has its own monotonic clock with an unrelated zero, so the driver asks it for
its clocks ``rounds`` times: the round trip with the smallest delay bounds the error best
(Cristian's algorithm; NTP's clock filter keeps the same sample). The worker's reading is
taken as simultaneous with the midpoint of that round trip, so the offset is exact to within
half of its round-trip time, which is recorded with it.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class ClockOffset:
    """``worker clock - driver clock`` for the monotonic (``perf_ns``) and wall clocks."""

    perf_ns: int
    wall_ns: int
    rtt_ns: int  # the best round trip: the offsets are exact to within half of it

    def to_worker(self, driver_perf_ns: int) -> int:
        return driver_perf_ns + self.perf_ns

    def as_record(self) -> dict[str, float]:
        return {
            "clock_offset_ms": self.perf_ns / 1e6,
            "wall_offset_ms": self.wall_ns / 1e6,
            "rtt_ms": self.rtt_ns / 1e6,
        }


def clocks() -> tuple[int, int]:
    """This process's clocks, as a worker answers the driver: (perf_counter_ns, time_ns)."""
    return time.perf_counter_ns(), time.time_ns()


def measure(ask: Callable[[], tuple[int, int]], rounds: int = 8) -> ClockOffset:
    """The offset of the clocks ``ask`` reads (a round trip to the worker) from this process's."""
    best: ClockOffset | None = None
    for _ in range(rounds):
        p0, w0 = time.perf_counter_ns(), time.time_ns()
        perf, wall = ask()
        p1, w1 = time.perf_counter_ns(), time.time_ns()
        rtt = p1 - p0
        if best is None or rtt < best.rtt_ns:
            best = ClockOffset(perf - (p0 + p1) // 2, wall - (w0 + w1) // 2, rtt)
    assert best is not None, "rounds must be >= 1"
    return best
