"""Repeated timing and its summary: warm-up, calibrated batches, median and spread.

Standard library only: the probe runs inside a provider's container, where every import is
part of the cold start it reports.
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

# A timer runs the measured operation ``k`` times, waits for the device to finish, and returns
# the elapsed seconds (device events where the backend has them, else perf_counter).
Timer = Callable[[int], float]


@dataclass(frozen=True, slots=True)
class Plan:
    """How long and how often to sample one operation."""

    warmup: int = 2  # untimed calls: lazy init, autotuning, clocks ramping up
    repeats: int = 10  # timed samples
    sample_s: float = 0.05  # each sample batches calls until it lasts about this long
    budget_s: float = 2.0  # stop sampling once this much time went by (at least 3 samples)


def sample(timer: Timer, plan: Plan) -> tuple[list[float], int]:
    """Per-call seconds of ``plan.repeats`` samples, and the calls per sample.

    One call is timed first to size the batches, so a sample of a microsecond kernel is not
    all timer overhead and a sample of a slow matmul is not several seconds.
    """
    if plan.warmup > 0:
        timer(plan.warmup)
    first = max(timer(1), 1e-9)
    calls = max(1, min(1_000_000, math.ceil(plan.sample_s / first)))
    deadline = time.perf_counter() + plan.budget_s
    per_call: list[float] = []
    while len(per_call) < plan.repeats:
        per_call.append(timer(calls) / calls)
        if len(per_call) >= 3 and time.perf_counter() > deadline:
            break
    return per_call, calls


def summary(values: Sequence[float]) -> dict[str, Any]:
    """Median, extremes, 10th/90th percentiles and coefficient of variation of ``values``.

    Percentiles interpolate linearly between order statistics (numpy's default, Hyndman-Fan
    type 7), the same definition as ``gpubench_sdk.metrics``.
    """
    if not values:
        raise ValueError("no samples to summarise")
    ordered = sorted(values)
    mean = statistics.fmean(ordered)
    std = statistics.pstdev(ordered) if len(ordered) > 1 else 0.0
    return {
        "median": statistics.median(ordered),
        "min": ordered[0],
        "max": ordered[-1],
        "p10": _quantile(ordered, 0.10),
        "p90": _quantile(ordered, 0.90),
        "cv": std / mean if mean else math.nan,
        "samples": len(ordered),
    }


def _quantile(ordered: Sequence[float], q: float) -> float:
    position = (len(ordered) - 1) * q
    low = math.floor(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def rate_summary(per_call_s: Sequence[float], work_per_call: float, scale: float) -> dict[str, Any]:
    """The summary of ``work_per_call / seconds / scale`` over the samples (e.g. TFLOP/s)."""
    return summary([work_per_call / s / scale for s in per_call_s if s > 0])
