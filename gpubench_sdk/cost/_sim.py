"""What-if fleet simulation: a discrete-event model of a serverless fleet, priced.

Requests arrive at given times (Poisson with a daily profile, or recorded from a stored run);
a fleet of workers (at least ``min_workers`` always on, up to ``max_workers``, ``concurrency``
requests each) serves them FIFO. A request that finds no free slot waits; a new worker is
started when the queue outgrows the slots already booting. A worker idle for ``scale_down_s``
stops unless that would leave fewer than ``min_workers``: the minimum is a *count*, not a set
of pinned workers (``_policy.may_stop``). Cold-start and execution times are fixed or sampled
from measured arrays; with ``slowdown``, a request's execution is stretched by how many
requests its worker runs once it has begun. Seeded.

Events live in a ``heapq``; arrivals are merged in from their sorted array, and scale-down is
evaluated lazily: before each arrival the workers whose delay has run out stop, in the order
their delays ran out, while more than ``min_workers`` remain. A request costs about two heap
operations. Which idle worker takes a request is ``FleetSettings.worker_policy``
(``_policy.py``: most recently idle, longest idle or random, per provider with its source), the
same rule the testing kit's metered fleet applies; ties go to the worker started first.
"""

from __future__ import annotations

import heapq
import math
import random
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace

import numpy as np
import numpy.typing as npt

from .._base._errors import ConfigError
from .._contract._billing import BillingModel, WorkerInterval, billed_seconds_of_lifetimes
from ._policy import DEFAULT_WORKER_POLICY, WorkerPolicy, check_policy, may_stop

Samples = float | Sequence[float] | npt.NDArray[np.float64]
_READY, _DONE = 0, 1


@dataclass(frozen=True, slots=True)
class FleetSettings:
    """The scaling knobs a platform offers. ``scale_down_s``: idle time before a worker stops;
    ``worker_policy``: which idle worker takes a request (see ``provider_policy``)."""

    min_workers: int = 0
    max_workers: int = 1
    scale_down_s: float = 60.0
    concurrency: int = 1
    worker_policy: WorkerPolicy = DEFAULT_WORKER_POLICY

    def __post_init__(self) -> None:
        if self.min_workers < 0:
            raise ConfigError("min_workers", self.min_workers, "an integer >= 0")
        if self.max_workers < max(1, self.min_workers):
            raise ConfigError("max_workers", self.max_workers, ">= 1 and >= min_workers")
        if self.scale_down_s < 0:
            raise ConfigError("scale_down_s", self.scale_down_s, "seconds >= 0 (math.inf: never)")
        if self.concurrency < 1:
            raise ConfigError("concurrency", self.concurrency, "an integer >= 1")
        check_policy(self.worker_policy)


@dataclass(frozen=True)
class SimResult:
    """A simulated day (or any horizon): its bill, its cold starts and its latencies."""

    settings: FleetSettings
    requests: int
    cold_requests: int
    latency_p50_s: float
    latency_p90_s: float
    latency_p95_s: float
    latency_p99_s: float
    waited_fraction: float
    mean_wait_s: float
    workers_started: int
    worker_s: float
    billed_s: float
    cost_usd: float
    horizon_s: float
    latency_s: npt.NDArray[np.float64] = field(repr=False)
    intervals: list[WorkerInterval] | None = field(default=None, repr=False)
    # each request's wait for a worker (queue and boot), arrivals sorted: advise's TTFT
    wait_s: npt.NDArray[np.float64] | None = field(default=None, repr=False)

    @property
    def cold_rate(self) -> float:
        return self.cold_requests / self.requests if self.requests else 0.0

    def latency_percentile_s(self, q: float) -> float:
        return float(np.percentile(self.latency_s, q)) if self.requests else math.nan


def _samples(name: str, value: Samples, n: int, rng: np.random.Generator) -> list[float]:
    if np.isscalar(value):
        v = float(value)  # type: ignore[arg-type]
        if not v >= 0:
            raise ConfigError(name, value, "seconds >= 0, or an array of measured seconds")
        return [v] * n
    arr = np.asarray(value, dtype=np.float64)
    arr = arr[np.isfinite(arr)]
    if arr.size == 0 or (arr < 0).any():
        raise ConfigError(name, "(array)", "a non-empty array of seconds >= 0 (NaN dropped)")
    out: list[float] = rng.choice(arr, size=n).tolist()
    return out


def simulate(
    arrivals_s: Sequence[float] | npt.NDArray[np.float64],
    *,
    execution_s: Samples,
    cold_start_s: Samples,
    settings: FleetSettings,
    billing: BillingModel,
    rate_usd_per_s: float,
    horizon_s: float | None = None,
    seed: int = 0,
    record_intervals: bool = False,
    slowdown: Sequence[float] = (),
) -> SimResult:
    """Simulate ``settings`` serving ``arrivals_s`` (seconds, sorted or not) and price it.

    ``horizon_s`` (default: the last arrival) is how long the ``min_workers`` still up at the
    end are billed. ``record_intervals`` also returns every worker interval (for
    ``price_worker_intervals``; slower). ``slowdown`` (with ``concurrency`` > 1): the
    execution-time factor by level, ``slowdown[j - 1]`` for a request that is the ``j``-th
    running on its worker once it has begun, itself included (the last factor beyond them);
    the level is fixed when the request begins, as ``_advise._concurrency.levels`` measures
    it. Deterministic for a given ``seed``.
    """
    arr = np.sort(np.asarray(arrivals_s, dtype=np.float64))
    n = int(arr.size)
    rng = np.random.default_rng(seed)
    exec_list = _samples("execution_s", execution_s, n, rng)
    boots = _samples("cold_start_s", cold_start_s, n + settings.max_workers, rng)
    k = settings.concurrency
    delay = settings.scale_down_s
    max_w, min_w = settings.max_workers, settings.min_workers
    factors = [float(f) for f in slowdown][:k]
    if any(not f > 0 for f in factors):
        raise ConfigError("slowdown", list(slowdown), "execution-time factors > 0 by level")
    ran_s = exec_list if not factors else [0.0] * n  # each request's execution as it ran

    # per-worker state, in parallel lists (index = worker id)
    w_start: list[float] = []
    w_ready: list[float] = []
    w_stop: list[float] = []
    w_busy: list[float] = []  # seconds with at least one request running
    w_free: list[int] = []  # free slots; -1 while booting
    w_idle_since: list[float] = []
    w_freed: list[float] = []  # when a slot last freed (or the worker became ready)
    w_busy_since: list[float] = []
    w_avail: list[bool] = []  # in the `avail` stack
    execs: list[list[tuple[float, float]]] = []

    # Python lists, not numpy arrays, in the loop: indexing a list is several times faster,
    # and the loop is advise's whole cost (thousands of simulated days per recommendation)
    times: list[float] = arr.tolist()
    lat_list = [0.0] * n
    wait_list = [0.0] * n
    cold_list = [False] * n
    # (time, kind, worker): at one instant boots end first, then requests in the order their
    # workers started, so the queue's head goes to the worker started first among those freed
    # together, as the fleet's policy gives it (ties in idle time: the worker started first)
    heap: list[tuple[float, int, int]] = []
    heappush, heappop = heapq.heappush, heapq.heappop
    avail: list[int] = []  # workers with a free slot, most recently freed last
    # (idle since, worker) in the order workers fell wholly idle, so in the order their delays
    # run out; an entry is stale once its worker has served again or stopped
    idled: deque[tuple[float, int]] = deque()
    queue: deque[int] = deque()
    alive = booting = 0
    boot_i = 0
    n_factors = len(factors)

    def new_worker(t: float, boot_s: float) -> int:
        w = len(w_start)
        w_start.append(t)
        w_ready.append(t + boot_s)
        w_stop.append(math.inf)
        w_busy.append(0.0)
        w_free.append(-1)
        w_idle_since.append(t + boot_s)
        w_freed.append(t + boot_s)
        w_busy_since.append(0.0)
        w_avail.append(False)
        execs.append([])
        return w

    def run_on(w: int, i: int, t: float, was_cold: bool) -> None:
        """Start request ``i`` on a slot of ``w`` already counted as taken."""
        if factors:
            ran_s[i] = exec_list[i] * factors[min(k - w_free[w], n_factors) - 1]
        done = t + ran_s[i]
        lat_list[i] = done - times[i]
        wait_list[i] = t - times[i]
        cold_list[i] = was_cold
        if record_intervals:
            execs[w].append((t, done))
        heappush(heap, (done, _DONE, w))

    def stop_expired(t: float) -> None:
        """Stop the idle workers whose delay ran out before ``t``, first run out first, while
        the platform's minimum allows (the testing fleet's and RunPod's rule: each worker
        has its own idle timer, and ``workersMin`` is a count)."""
        nonlocal alive
        while idled and may_stop(alive, min_w):
            since, w = idled[0]
            if w_stop[w] != math.inf or w_free[w] != k or w_idle_since[w] != since:
                idled.popleft()  # served again since, or already stopped
                continue
            if not t > since + delay:
                return
            idled.popleft()
            w_stop[w] = since + delay
            if w_avail[w]:
                w_avail[w] = False
                avail.remove(w)
            alive -= 1

    for _ in range(min_w):
        w = new_worker(0.0, 0.0)
        w_free[w] = k
        w_avail[w] = True
        avail.append(w)
        idled.append((0.0, w))
        alive += 1

    policy = settings.worker_policy
    pick_rng = random.Random(seed)

    def pick() -> int:
        """The index in ``avail`` (two or more workers) of the worker ``policy`` gives a
        request."""
        if policy == "random":
            # drawn over the candidates in start order, as the fleet lists its workers, so a
            # seeded simulator and fleet draw the same worker
            return avail.index(sorted(avail)[pick_rng.randrange(len(avail))])
        # ``avail`` is ordered by when each worker's slot last freed: the chosen end, then ties
        # (equal times) resolved to the worker started first, as the fleet does.
        newest = policy == "most_recently_idle"
        j = len(avail) - 1 if newest else 0
        best, since = j, w_freed[avail[j]]
        step = -1 if newest else 1
        j += step
        while 0 <= j < len(avail) and w_freed[avail[j]] == since:
            if avail[j] < avail[best]:
                best = j
            j += step
        return best

    # One pass per arrival, and a last one at infinity that drains the events left. The
    # events due before an arrival are handled inline (a call per event is measurable here).
    for i in range(n + 1):
        t = times[i] if i < n else math.inf
        while heap and heap[0][0] <= t:
            et, kind, w = heappop(heap)
            if kind == _READY:
                booting -= 1
                w_free[w] = k
                w_idle_since[w] = et
                while w_free[w] > 0 and queue:
                    if w_free[w] == k:  # a busy spell begins
                        w_busy_since[w] = et
                    w_free[w] -= 1
                    run_on(w, queue.popleft(), et, True)
                if w_free[w] == k:
                    idled.append((et, w))
            elif queue:  # the freed slot takes the next waiting request: the spell goes on
                run_on(w, queue.popleft(), et, False)
                continue
            else:
                free = w_free[w] = w_free[w] + 1
                w_freed[w] = et
                if w_avail[w]:  # (concurrency > 1) it moves to the most recently freed end
                    avail.remove(w)
                    avail.append(w)
                if free == k:  # the busy spell ends
                    w_busy[w] += et - w_busy_since[w]
                    w_idle_since[w] = et
                    idled.append((et, w))
            if w_free[w] > 0 and not w_avail[w]:
                w_avail[w] = True
                avail.append(w)
        if i == n:
            break
        if idled and t > idled[0][0] + delay:  # (inline test: most arrivals stop nothing)
            stop_expired(t)
        if avail:
            j = pick() if len(avail) > 1 else 0
            w = avail[j]
            if w_free[w] == k:  # a busy spell begins
                w_busy_since[w] = t
            w_free[w] -= 1
            run_on(w, i, t, False)
            if w_free[w] == 0:
                del avail[j]
                w_avail[w] = False
            continue
        queue.append(i)
        if len(queue) > booting * k and alive < max_w:
            boot = boots[boot_i]
            boot_i += 1
            w = new_worker(t, boot)
            alive += 1
            booting += 1
            heappush(heap, (t + boot, _READY, w))
    latency = np.array(lat_list)
    wait = np.array(wait_list)
    cold = np.array(cold_list, dtype=bool)

    end_s = float(arr[-1]) if n else 0.0
    horizon = max(horizon_s if horizon_s is not None else end_s, end_s)
    stop_expired(math.inf)  # every worker is idle now: all but the minimum stop in turn
    for w in range(len(w_start)):
        if w_stop[w] == math.inf:  # one of the last ``min_workers``: up to the horizon
            w_stop[w] = max(horizon, w_idle_since[w])
    start = np.array(w_start)
    ready = np.array(w_ready)
    stop = np.array(w_stop)
    busy = np.array(w_busy)
    boot_arr = ready - start
    idle = np.maximum(stop - ready - busy, 0.0)
    lifetimes = stop - start
    if billing.billed_unit == "request":
        billed_arr = (
            billing.billed_s_array(np.array(ran_s)) if billing.bills("execution") else np.zeros(0)
        )
        billed = float(billed_arr.sum())
        if billing.bills("cold_boot"):
            billed += float(billing.billed_s_array(boot_arr).sum())
    else:
        billed = float(billed_seconds_of_lifetimes(billing, boot_arr, busy, idle).sum())
    intervals = _intervals(w_start, w_ready, w_stop, execs) if record_intervals else None
    p50, p90, p95, p99 = np.percentile(latency, (50, 90, 95, 99)).tolist() if n else [math.nan] * 4
    return SimResult(
        settings=settings,
        requests=n,
        cold_requests=int(cold.sum()),
        latency_p50_s=p50,
        latency_p90_s=p90,
        latency_p95_s=p95,
        latency_p99_s=p99,
        waited_fraction=float((wait > 1e-12).mean()) if n else 0.0,
        mean_wait_s=float(wait.mean()) if n else 0.0,
        workers_started=len(w_start) - settings.min_workers,
        worker_s=float(lifetimes.sum()),
        billed_s=billed,
        cost_usd=billed * rate_usd_per_s,
        horizon_s=horizon,
        latency_s=latency,
        intervals=intervals,
        wait_s=wait,
    )


def _intervals(
    start: list[float],
    ready: list[float],
    stop: list[float],
    execs: list[list[tuple[float, float]]],
) -> list[WorkerInterval]:
    """Boot, execution and idle intervals per worker (busy spells merged for concurrency > 1)."""
    out: list[WorkerInterval] = []
    for w in range(len(start)):
        if ready[w] > start[w]:
            out.append(WorkerInterval(w, "cold_boot", start[w], ready[w]))
        t = ready[w]
        for s, e in sorted(execs[w]):
            if s > t:
                out.append(WorkerInterval(w, "idle", t, s))
            if e > t:
                out.append(WorkerInterval(w, "execution", max(s, t), e))
                t = e
        if stop[w] > t:
            out.append(WorkerInterval(w, "idle", t, stop[w]))
    return out


@dataclass(frozen=True)
class SweepResult:
    """Every setting tried, and the cheapest whose latency percentile meets the SLO."""

    rows: list[SimResult]
    best: SimResult | None
    slo_percentile: float
    slo_latency_s: float


def sweep(
    arrivals_s: Sequence[float] | npt.NDArray[np.float64],
    *,
    execution_s: Samples,
    cold_start_s: Samples,
    billing: BillingModel,
    rate_usd_per_s: float,
    scale_down_s: Sequence[float],
    min_workers: Sequence[int] = (0,),
    max_workers: int = 1,
    concurrency: int = 1,
    slo_latency_s: float,
    slo_percentile: float = 95.0,
    horizon_s: float | None = None,
    seed: int = 0,
    worker_policy: WorkerPolicy = DEFAULT_WORKER_POLICY,
    progress: Callable[[int, int], None] | None = None,
) -> SweepResult:
    """Simulate every (scale-down delay, min workers) pair on the same arrivals and samples.

    Delays below the platform's minimum are raised to it (``billing.min_idle_timeout_s``),
    so a sweep never recommends a setting the platform refuses. ``progress(done, total)`` is
    called after each setting (a long sweep can say how far it is)."""
    if not 0 < slo_percentile <= 100:
        raise ConfigError("slo_percentile", slo_percentile, "a percentile in (0, 100]")
    if not scale_down_s or not min_workers:
        raise ConfigError("scale_down_s", list(scale_down_s), "at least one value each")
    pairs: dict[tuple[float, int], None] = {}  # in order, each applied setting once
    for mw in min_workers:
        for d in scale_down_s:
            pairs[(max(float(d), billing.min_idle_timeout_s), mw)] = None
    rows: list[SimResult] = []
    for applied, mw in pairs:
        base = FleetSettings(mw, max(max_workers, mw), applied, concurrency, worker_policy)
        rows.append(
            simulate(
                arrivals_s,
                execution_s=execution_s,
                cold_start_s=cold_start_s,
                settings=replace(base),
                billing=billing,
                rate_usd_per_s=rate_usd_per_s,
                horizon_s=horizon_s,
                seed=seed,
            )
        )
        if progress is not None:
            progress(len(rows), len(pairs))
    meeting = [r for r in rows if r.latency_percentile_s(slo_percentile) <= slo_latency_s]
    best = min(meeting, key=lambda r: r.cost_usd) if meeting else None
    return SweepResult(rows, best, slo_percentile, slo_latency_s)
