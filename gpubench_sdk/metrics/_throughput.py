"""Throughput and goodput over the span of a run.

The span is from the first send to the last response (``max(end_ns) - min(start_ns)``), so
idle time before or after the requests does not dilute the rate. Goodput is the rate of
requests that succeeded *and* met every SLO given (vLLM and DistServe use the term this way:
Zhong et al., *DistServe*, OSDI 2024, section 2).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from .._base._errors import ConfigError
from .._base._types import Outcome
from ._stats import FloatArray


@dataclass(frozen=True, slots=True)
class SLO:
    """Per-request targets; ``None`` leaves one out. A NaN figure (not measured) fails it."""

    latency_ms: float | None = None
    ttft_ms: float | None = None
    cold_start_ms: float | None = None

    def __post_init__(self) -> None:
        for name in ("latency_ms", "ttft_ms", "cold_start_ms"):
            value = getattr(self, name)
            if value is not None and not value > 0:
                raise ConfigError(f"SLO.{name}", value, "a positive number of ms, or None")


@dataclass(frozen=True, slots=True)
class Throughput:
    duration_s: float
    requests: int
    ok: int
    requests_per_s: float
    ok_per_s: float
    units_per_s: float
    goodput_per_s: float
    good: int
    good_fraction: float


def _span_s(start_ns: npt.NDArray[np.int64], end_ns: npt.NDArray[np.int64]) -> float:
    return (int(end_ns.max()) - int(start_ns.min())) / 1e9 if start_ns.size else math.nan


def meets_slo(
    slo: SLO,
    *,
    ok: npt.ArrayLike,
    latency_ms: npt.ArrayLike,
    ttft_ms: npt.ArrayLike | None = None,
    cold_start_ms: npt.ArrayLike | None = None,
) -> npt.NDArray[np.bool_]:
    """Per request: succeeded and met every target in ``slo`` (``cold_start_ms`` may be NaN for
    a warm request: it then has no cold start to miss)."""
    good = np.asarray(ok, dtype=bool).copy()
    pairs: list[tuple[float | None, npt.ArrayLike | None, str, bool]] = [
        (slo.latency_ms, latency_ms, "latency_ms", False),
        (slo.ttft_ms, ttft_ms, "ttft_ms", False),
        (slo.cold_start_ms, cold_start_ms, "cold_start_ms", True),
    ]
    for limit, values, name, nan_passes in pairs:
        if limit is None:
            continue
        if values is None:
            raise ValueError(f"the SLO sets {name} but no {name} values were given")
        arr = np.asarray(values, dtype=np.float64)
        passed = arr <= limit
        if nan_passes:
            passed |= np.isnan(arr)
        good &= passed
    return good


def throughput(
    *,
    start_ns: npt.ArrayLike,
    end_ns: npt.ArrayLike,
    outcome: npt.ArrayLike,
    output_units: npt.ArrayLike | None = None,
    good: npt.ArrayLike | None = None,
) -> Throughput:
    """Requests/s, successful requests/s, work units/s (``output_units`` of successful
    requests: tokens, images; -1 = not reported) and goodput/s (``good`` from ``meets_slo``;
    without it every successful request counts)."""
    start = np.asarray(start_ns, dtype=np.int64)
    end = np.asarray(end_ns, dtype=np.int64)
    ok = np.asarray(outcome, dtype=np.int64) == Outcome.OK.code
    span = _span_s(start, end)

    def rate(k: float) -> float:
        return k / span if span > 0 else math.nan

    units_per_s = math.nan
    if output_units is not None:
        units = np.asarray(output_units, dtype=np.float64)
        reported = ok & (units >= 0)
        if reported.any():
            units_per_s = rate(float(units[reported].sum()))
    good_mask = ok if good is None else np.asarray(good, dtype=bool) & ok
    n_good = int(good_mask.sum())
    return Throughput(
        duration_s=span,
        requests=int(start.size),
        ok=int(ok.sum()),
        requests_per_s=rate(start.size),
        ok_per_s=rate(int(ok.sum())),
        units_per_s=units_per_s,
        goodput_per_s=rate(n_good),
        good=n_good,
        good_fraction=n_good / start.size if start.size else math.nan,
    )


def windowed_rate(
    end_ns: npt.ArrayLike, *, window_s: float = 1.0, origin_ns: int | None = None
) -> tuple[FloatArray, FloatArray]:
    """Completions per second in consecutive windows: (window start in s from ``origin_ns``,
    rate). ``origin_ns`` defaults to the first completion."""
    if not window_s > 0:
        raise ValueError(f"window_s must be > 0, got {window_s!r}")
    end = np.asarray(end_ns, dtype=np.int64)
    if not end.size:
        return np.zeros(0), np.zeros(0)
    origin = int(end.min()) if origin_ns is None else origin_ns
    offsets_s = (end - origin) / 1e9
    if (offsets_s < 0).any():
        raise ValueError("origin_ns is after some completions; pass the burst's first send")
    bins = np.floor(offsets_s / window_s).astype(np.int64)
    counts = np.bincount(bins)
    starts: FloatArray = np.arange(counts.size, dtype=np.float64) * window_s
    return starts, counts.astype(np.float64) / window_s
