"""The runner watching itself: is the client, not the provider, the bottleneck?

Any load generator saturates somewhere. When its event loop falls behind (timers fire late)
or its process uses a whole core, latencies it records include its own queueing. The monitor
samples both every ``tick_s`` and closes a window every ``window_s``; a window is flagged
client-bound when the loop lagged more than ``max_lag_ms`` on at least ``min_late_ticks`` ticks,
or CPU use exceeded ``max_cpu``, or the requests' send delay was over ``max_send_ms`` at the
99th percentile. One late tick is a hiccup (the OS scheduled something else for 30 ms, once); a
saturated loop is late tick after tick.

The send delay (``note_send``: a request's bytes handed to the socket minus when it was due) is
the client's own error in every latency and TTFT it reports, which count from the due instant.
Timer lag and CPU rise only once the loop is far behind (tens of milliseconds late, a core
used): a client already holds requests back by a millisecond at p99 before either (issue 32,
``bench/client_tail_bench.py``), so the flag rises on the send delay at the tail first. A
window's 99th percentile is judged from ``min_sends`` sends or more (below that it is the
window's single worst send, a scheduler hiccup as often as not; such light loads are left to
the timer and CPU rules), and as with ticks, fewer than ``min_late_ticks`` late sends are a
hiccup, not a flag.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

import anyio


@dataclass(frozen=True, slots=True)
class HealthWindow:
    t_ns: int  # window end, perf_counter_ns relative to the run origin
    window_ms: float  # window length (the last window of a run is shorter)
    loop_lag_ms: float  # worst timer lateness in the window
    cpu_pct: float  # process CPU time / wall time, 100 = one full core
    inflight: int  # requests in flight at the window's end
    client_bound: bool
    # requests sent in the window and how many of them left over ``max_send_ms`` late (not
    # stored: the store keeps the flag they raised)
    sends: int = 0
    late_sends: int = 0


class Monitor:
    def __init__(
        self,
        *,
        origin_ns: int,
        inflight: Callable[[], int],
        sink: Callable[[HealthWindow], None],
        tick_s: float = 0.05,
        window_s: float = 1.0,
        max_lag_ms: float = 20.0,
        min_late_ticks: int = 2,
        max_cpu: float = 0.90,
        max_send_ms: float = 1.0,
        send_quantile: float = 0.99,
        min_sends: int = 100,
    ) -> None:
        self._origin_ns = origin_ns
        self._inflight = inflight
        self._sink = sink
        self._tick_s = tick_s
        self._window_s = window_s
        self._max_lag_ms = max_lag_ms
        self._min_late_ticks = min_late_ticks
        self._max_cpu = max_cpu
        self._late_send_ns = int(max_send_ms * 1e6)
        self._late_share = 1.0 - send_quantile
        self._min_sends = min_sends
        self._sends = self._late_sends = 0
        self.windows: list[HealthWindow] = []

    def note_send(self, delay_ns: int) -> None:
        """A request went out ``delay_ns`` after it was due (its ``start_ns - scheduled_ns``)."""
        self._sends += 1
        if delay_ns > self._late_send_ns:
            self._late_sends += 1

    async def run(self) -> None:
        """Sample until cancelled; the partial last window is emitted on cancellation."""
        tick_ns = int(self._tick_s * 1e9)
        win_start = time.perf_counter_ns()
        cpu_start = time.process_time_ns()
        late_ns = int(self._max_lag_ms * 1e6)
        worst_lag_ns = late = 0
        try:
            while True:
                before = time.perf_counter_ns()
                await anyio.sleep(self._tick_s)
                now = time.perf_counter_ns()
                lag = now - before - tick_ns
                worst_lag_ns = max(worst_lag_ns, lag)
                late += lag > late_ns
                if now - win_start >= self._window_s * 1e9:
                    self._emit(now, win_start, cpu_start, worst_lag_ns, late)
                    win_start, cpu_start = now, time.process_time_ns()
                    worst_lag_ns = late = 0
        finally:
            now = time.perf_counter_ns()
            if now - win_start > tick_ns:
                self._emit(now, win_start, cpu_start, worst_lag_ns, late)

    def _emit(self, now: int, win_start: int, cpu_start: int, lag_ns: int, late: int) -> None:
        cpu = (time.process_time_ns() - cpu_start) / max(1, now - win_start)
        lag_ms = max(0.0, lag_ns / 1e6)
        sends, late_sends = self._sends, self._late_sends
        self._sends = self._late_sends = 0
        # the quantile's delay is over max_send_ms when more than its share of sends were
        send_late = (
            sends >= self._min_sends
            and late_sends >= self._min_late_ticks
            and late_sends > sends * self._late_share
        )
        window = HealthWindow(
            t_ns=now - self._origin_ns,
            window_ms=(now - win_start) / 1e6,
            loop_lag_ms=lag_ms,
            cpu_pct=cpu * 100.0,
            inflight=self._inflight(),
            client_bound=late >= self._min_late_ticks or cpu > self._max_cpu or send_late,
            sends=sends,
            late_sends=late_sends,
        )
        self.windows.append(window)
        self._sink(window)


def client_bound_spans(windows: list[HealthWindow]) -> list[tuple[float, float]]:
    """The stretches of a run, in seconds from its origin, when the client was the bottleneck.

    Windows of several load-generating processes overlap in time; they are merged, so the total
    is wall-clock seconds, not seconds summed over processes.
    """
    spans: list[tuple[float, float]] = []
    flagged = sorted(
        ((w.t_ns - w.window_ms * 1e6) / 1e9, w.t_ns / 1e9) for w in windows if w.client_bound
    )
    for start, end in flagged:
        if spans and start <= spans[-1][1]:
            spans[-1] = (spans[-1][0], max(spans[-1][1], end))
        else:
            spans.append((start, end))
    return spans
