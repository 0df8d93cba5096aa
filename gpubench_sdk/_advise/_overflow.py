"""A primary provider with overflow: always-warm workers take what they can, the rest goes on
down a chain, to a last provider scaled to zero.

The primary keeps ``k`` workers on (``min = max = k``, no burst of its own); a request that
finds all ``k`` busy is not queued there but sent on: to the next warm target of the chain
(its own pinned workers, no queue either), and so on, and what finds every warm worker of the
chain busy goes to the last target, which starts workers as its own options do
(``cost.simulate`` with its billing, delay and worker policy). Who moves on is decided request
by request from each stage's workers' free times, so the split follows the arrivals and the
measured execution times of the draw. Two providers are the chain with no middle.

Why the middle stages are warm, not scaled to zero: "all busy" is only well defined for a
fixed pool. A scaled-to-zero middle stage would start a worker rather than pass a request on,
and so never overflow until its max workers were all up: the same as a warm pool that size,
with cold starts added.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Sequence

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


def simulate_chain(
    warm: Sequence[tuple[MeasuredTarget, int]],
    last: MeasuredTarget,
    last_settings: FleetSettings,
    arrivals_s: npt.NDArray[np.float64],
    execution_s: dict[str, npt.NDArray[np.float64]],
    cold_start_s: dict[str, npt.NDArray[np.float64]],
    traffic: Traffic,
    objectives: Objectives,
    seed: int,
) -> tuple[float, float, float, float]:
    """(daily cost, latency percentile, cold-start rate, TTFT percentile or NaN) of the chain
    on one draw: the ``warm`` stages in order (each a target and its pinned workers), then
    ``last``."""
    rng = np.random.default_rng(seed)
    left = np.sort(arrivals_s)
    total = left.size
    window = traffic.window_s
    kept: list[npt.NDArray[np.float64]] = []
    usd = 0.0
    for stage, workers in warm:
        own_exec = rng.choice(execution_s[stage.name], size=left.size)
        latency, overflow = split_overflow(left, own_exec, workers)
        kept.append(latency)
        usd += workers * stage.billing.billed_s(window) * stage.rate_usd_per_s
        usd += stage.billing.fees_usd(latency.size)
        left = left[overflow]
    sim = simulate(
        left,
        execution_s=execution_s[last.name],
        cold_start_s=cold_start_s[last.name],
        settings=last_settings,
        billing=last.billing,
        rate_usd_per_s=last.rate_usd_per_s,
        horizon_s=window,
        seed=seed,
    )
    usd += sim.cost_usd + last.billing.fees_usd(sim.requests)
    cost = usd * SECONDS_PER_DAY / window
    latency = np.concatenate([*kept, sim.latency_s])
    q = float(np.percentile(latency, objectives.latency_percentile)) if latency.size else 0.0
    cold = sim.cold_requests / total if total else 0.0
    ttft = math.nan
    if objectives.ttft_s is not None and sim.wait_s is not None:
        # a warm stage's requests never wait (it takes only what a free worker can)
        served = [(stage, np.zeros(k.size)) for (stage, _), k in zip(warm, kept, strict=True)]
        ttft = ttft_percentile([*served, (last, sim.wait_s)], seed, objectives.ttft_percentile)
    return cost, q, cold, ttft
