"""Cold start: the reference report's ``cold start = latency - inference time``, decomposed.

Latency here is the *service* time, from the actual send to the last byte (a client's own send
lag is not the provider's cold start). Inference time is the server-reported ``execution_ms``
where the provider reports it (``inference_measured``); otherwise the median service time of
the warm requests of the same target and workload stands in (inferred). Each value also
carries whether its cold state was *confirmed* (verified through the provider before the
request, or reported by the server) or only assumed.

Where the provider reports phases, a cold request's service time splits into
``scheduling_ms`` (waiting for a worker, the queue time less the boot when the provider's
queue time includes the boot, as RunPod's ``delayTime`` and the local runtime's ``queue_ms``
do), ``boot_ms`` (``setup_ms``: container start and model load), ``execution_ms``, and
``transfer_ms`` (the rest: network, gateway, serialisation).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from .._base._math import wilson_interval
from .._base._types import Outcome
from ._stats import FloatArray, Summary, summarize_samples

BoolArray = npt.NDArray[np.bool_]


@dataclass(frozen=True, slots=True)
class ColdStartRate:
    """Requests that hit a cold worker, among those whose state is known (``cold`` != -1)."""

    cold: int
    known: int
    rate: float
    rate_ci: tuple[float, float]


def cold_start_rate(cold: npt.ArrayLike, confidence: float = 0.95) -> ColdStartRate:
    """The fraction of requests with ``cold == 1`` among ``cold`` in {0, 1}, Wilson CI."""
    flags = np.asarray(cold, dtype=np.int64)
    known = int(np.count_nonzero(flags >= 0))
    hits = int(np.count_nonzero(flags == 1))
    rate = hits / known if known else float("nan")
    return ColdStartRate(hits, known, rate, wilson_interval(hits, known, confidence))


@dataclass(frozen=True, slots=True)
class ColdStarts:
    """Per cold (and successful) request, aligned arrays; ``index`` points into the input.

    ``cold_start_ms`` is clipped at 0 (an inferred value can dip below it by noise).
    ``summary`` summarises ``cold_start_ms``. Phase arrays are NaN where not reported.
    """

    index: npt.NDArray[np.int64]
    cold_start_ms: FloatArray
    service_ms: FloatArray
    inference_ms: FloatArray
    inference_measured: BoolArray
    confirmed: BoolArray
    scheduling_ms: FloatArray
    boot_ms: FloatArray
    execution_ms: FloatArray
    transfer_ms: FloatArray
    warm_median_ms: float
    rate: ColdStartRate
    summary: Summary

    @property
    def inferred(self) -> bool:
        """True when any value used the warm median instead of a server-reported time."""
        return bool((~self.inference_measured).any())


def _floats(values: npt.ArrayLike | None, n: int) -> FloatArray:
    if values is None:
        return np.full(n, np.nan)
    arr = np.asarray(values, dtype=np.float64)
    if arr.shape != (n,):
        raise ValueError(f"every column must have {n} values, got shape {arr.shape}")
    return arr


def cold_starts(
    *,
    start_ns: npt.ArrayLike,
    end_ns: npt.ArrayLike,
    outcome: npt.ArrayLike,
    cold: npt.ArrayLike,
    cold_confirmed: npt.ArrayLike | None = None,
    execution_ms: npt.ArrayLike | None = None,
    queue_ms: npt.ArrayLike | None = None,
    setup_ms: npt.ArrayLike | None = None,
    queue_includes_setup: bool = True,
    confidence: float = 0.95,
    seed: int = 0,
) -> ColdStarts:
    """Cold-start values and their decomposition for one target and workload.

    Arrays are per request, as ``Store.columns`` returns them (``cold`` is 1/0/-1, ``outcome``
    holds ``Outcome.code``). Only successful requests get a value; all count towards the rate.
    """
    start = np.asarray(start_ns, dtype=np.int64)
    n = start.size
    end = np.asarray(end_ns, dtype=np.int64)
    if end.shape != (n,):
        raise ValueError(f"end_ns must have {n} values like start_ns, got shape {end.shape}")
    ok = _floats(outcome, n) == Outcome.OK.code
    flags = _floats(cold, n)
    confirmed_all = np.zeros(n, bool) if cold_confirmed is None else _floats(cold_confirmed, n) == 1
    execution, queue, setup = (_floats(a, n) for a in (execution_ms, queue_ms, setup_ms))
    service = (end - start) / 1e6
    is_cold = (flags == 1) & ok
    warm = (flags == 0) & ok
    warm_median = float(np.median(service[warm])) if warm.any() else float("nan")
    idx = np.flatnonzero(is_cold)
    measured = ~np.isnan(execution[idx])
    inference = np.where(measured, execution[idx], warm_median)
    value = np.maximum(service[idx] - inference, 0.0)
    boot = setup[idx]
    sched = queue[idx] - (np.nan_to_num(boot) if queue_includes_setup else 0.0)
    waited = queue[idx] if queue_includes_setup else queue[idx] + np.nan_to_num(boot)
    transfer = service[idx] - np.nan_to_num(waited) - execution[idx]
    return ColdStarts(
        index=idx.astype(np.int64),
        cold_start_ms=value,
        service_ms=service[idx],
        inference_ms=inference,
        inference_measured=measured,
        confirmed=confirmed_all[idx],
        scheduling_ms=np.maximum(sched, 0.0),
        boot_ms=boot,
        execution_ms=execution[idx],
        transfer_ms=np.maximum(transfer, 0.0),
        warm_median_ms=warm_median,
        rate=cold_start_rate(flags.astype(np.int64), confidence),
        summary=summarize_samples(value[~np.isnan(value)], confidence=confidence, seed=seed),
    )
