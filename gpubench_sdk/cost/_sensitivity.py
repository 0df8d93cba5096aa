"""How much a what-if answer depends on the measured samples it was simulated from.

``gpubench cost whatif --from-run`` simulates with a run's measured cold starts and execution
times. Those are a sample, not the truth: a bootstrap (resample each array with replacement,
simulate again, ``resamples`` times) shows how far the bill and the latency of the chosen
setting could move, and how often the same setting would have been chosen.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from .._base._errors import ConfigError
from ._sim import FleetSettings, SweepResult, sweep


@dataclass(frozen=True, slots=True)
class Sensitivity:
    """The spread (``low``-``high`` percentiles) of the chosen setting's bill and latency
    percentile over bootstrap resamples, and the share of resamples that chose it again."""

    resamples: int
    low_pct: float
    high_pct: float
    cost_usd: tuple[float, float]
    latency_s: tuple[float, float]
    same_best: float


def _resample(
    value: float | npt.NDArray[np.float64], rng: np.random.Generator
) -> float | npt.NDArray[np.float64]:
    if isinstance(value, int | float):
        return float(value)
    arr = np.asarray(value, dtype=np.float64)
    return rng.choice(arr, size=arr.size, replace=True)


def sweep_sensitivity(
    arrivals_s: Sequence[float] | npt.NDArray[np.float64],
    result: SweepResult,
    *,
    execution_s: float | npt.NDArray[np.float64],
    cold_start_s: float | npt.NDArray[np.float64],
    resamples: int = 20,
    seed: int = 0,
    interval: tuple[float, float] = (5.0, 95.0),
    **sweep_kwargs: Any,
) -> Sensitivity | None:
    """Redo the sweep that gave ``result`` on ``resamples`` bootstrap resamples of the measured
    ``execution_s``/``cold_start_s`` arrays (a fixed number is kept as is). ``None`` when the
    sweep chose nothing. ``sweep_kwargs``: the rest of the original ``sweep`` arguments."""
    if resamples < 2:
        raise ConfigError("--resamples", resamples, "an integer >= 2 (or 0 to skip)")
    if result.best is None:
        return None
    chosen: FleetSettings = result.best.settings
    rng = np.random.default_rng(seed)
    costs, latencies, same = [], [], 0
    q = result.slo_percentile
    for k in range(resamples):
        again = sweep(
            arrivals_s,
            execution_s=_resample(execution_s, rng),
            cold_start_s=_resample(cold_start_s, rng),
            slo_latency_s=result.slo_latency_s,
            slo_percentile=q,
            seed=seed + 1 + k,
            **sweep_kwargs,
        )
        row = next(r for r in again.rows if r.settings == chosen)
        costs.append(row.cost_usd)
        latencies.append(row.latency_percentile_s(q))
        same += again.best is not None and again.best.settings == chosen
    lo, hi = interval
    return Sensitivity(
        resamples=resamples,
        low_pct=lo,
        high_pct=hi,
        cost_usd=(float(np.percentile(costs, lo)), float(np.percentile(costs, hi))),
        latency_s=(float(np.percentile(latencies, lo)), float(np.percentile(latencies, hi))),
        same_best=same / resamples,
    )
