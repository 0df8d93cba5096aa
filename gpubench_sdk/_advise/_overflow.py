"""A primary provider with overflow to a second: always-warm workers take what they can, the
rest goes to another provider scaled to zero.

The primary keeps ``k`` workers on (``min = max = k``, no burst of its own); a request that
finds all ``k`` busy is not queued there but sent to the secondary, which starts workers as its
own options do (``cost.simulate`` with its billing, delay and worker policy). Who overflows is
decided request by request from the primary's workers' free times, so the split follows the
arrivals and the measured execution times of the draw.
"""

from __future__ import annotations

import heapq
import math

import numpy as np
import numpy.typing as npt

from ..cost._sim import FleetSettings, simulate
from ..cost._traffic import SECONDS_PER_DAY
from ._inputs import MeasuredTarget, Objectives, Traffic
from ._ttft import ttft_percentile


def split_overflow(
    arrivals_s: npt.NDArray[np.float64], execution_s: npt.NDArray[np.float64], workers: int
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.bool_]]:
    """Serve sorted ``arrivals_s`` (request ``i`` runs ``execution_s[i]``) on ``workers``
    always-on workers without a queue: the primary's latencies of the requests it kept, and
    which requests found every worker busy (``True``: overflowed)."""
    free_at = [0.0] * workers  # a heap of when each worker is next free
    overflow = np.zeros(arrivals_s.size, dtype=bool)
    kept: list[float] = []
    for i, t in enumerate(arrivals_s.tolist()):
        if free_at[0] <= t:
            heapq.heapreplace(free_at, t + float(execution_s[i]))
            kept.append(float(execution_s[i]))
        else:
            overflow[i] = True
    return np.asarray(kept, dtype=np.float64), overflow


def simulate_overflow(
    primary: MeasuredTarget,
    workers: int,
    secondary: MeasuredTarget,
    secondary_settings: FleetSettings,
    arrivals_s: npt.NDArray[np.float64],
    execution_s: dict[str, npt.NDArray[np.float64]],
    cold_start_s: dict[str, npt.NDArray[np.float64]],
    traffic: Traffic,
    objectives: Objectives,
    seed: int,
) -> tuple[float, float, float, float]:
    """(daily cost, latency percentile, cold-start rate, TTFT percentile or NaN) of the pair
    on one draw."""
    rng = np.random.default_rng(seed)
    arr = np.sort(arrivals_s)
    own_exec = rng.choice(execution_s[primary.name], size=arr.size)
    kept_latency, overflow = split_overflow(arr, own_exec, workers)
    sim = simulate(
        arr[overflow],
        execution_s=execution_s[secondary.name],
        cold_start_s=cold_start_s[secondary.name],
        settings=secondary_settings,
        billing=secondary.billing,
        rate_usd_per_s=secondary.rate_usd_per_s,
        horizon_s=traffic.window_s,
        seed=seed,
    )
    window = traffic.window_s
    pinned_usd = workers * primary.billing.billed_s(window) * primary.rate_usd_per_s
    fees = primary.billing.fees_usd(kept_latency.size) + secondary.billing.fees_usd(sim.requests)
    cost = (pinned_usd + sim.cost_usd + fees) * SECONDS_PER_DAY / window
    latency = np.concatenate([kept_latency, sim.latency_s])
    q = float(np.percentile(latency, objectives.latency_percentile)) if latency.size else 0.0
    cold = sim.cold_requests / arr.size if arr.size else 0.0
    ttft = math.nan
    if objectives.ttft_s is not None and sim.wait_s is not None:
        # the primary's requests never wait (it takes only what a free worker can)
        served = [(primary, np.zeros(kept_latency.size)), (secondary, sim.wait_s)]
        ttft = ttft_percentile(served, seed, objectives.ttft_percentile)
    return cost, q, cold, ttft
