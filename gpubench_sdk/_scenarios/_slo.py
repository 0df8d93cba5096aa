"""The statistics the adaptive shapes decide by: per-step figures of a stepped schedule and the
SLO verdict that ``max_rate`` searches with. Here, with the shapes that run the search; the
metrics package re-exports them (``metrics.step_stats``, ``metrics.slo_verdict``) and re-judges
stored runs by the very same rule."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from .._base._math import normal_ppf, wilson_interval
from .._base._types import Invocation
from ._base import SEQ_BLOCK

NAN = math.nan


@dataclass(frozen=True, slots=True)
class StepStats:
    """One step of a stepped shape (its requests' ``seq // SEQ_BLOCK``)."""

    step: int
    requests: int
    ok: int
    offered_rps: float  # requests sent per second over the step (its schedule's rate)
    throughput_rps: float  # successful requests per second, first send to last answer
    p50_ms: float
    p95_ms: float
    error_rate: float


def step_stats(invs: Sequence[Invocation]) -> list[StepStats]:
    """Per step, in step order; latency is from the scheduled send (no coordinated omission)."""
    steps: dict[int, list[Invocation]] = {}
    for inv in invs:
        steps.setdefault(inv.seq // SEQ_BLOCK, []).append(inv)
    out = []
    for step in sorted(steps):
        group = steps[step]
        sched = np.array([i.scheduled_ns for i in group], dtype=np.int64)
        ends = np.array([i.end_ns for i in group], dtype=np.int64)
        lat = np.array([i.latency_ms for i in group if i.ok], dtype=np.float64)
        sent_span = (int(sched.max()) - int(sched.min())) / 1e9
        span = (int(ends.max()) - int(sched.min())) / 1e9
        offered = (len(group) - 1) / sent_span if sent_span > 0 else NAN
        out.append(
            StepStats(
                step=step,
                requests=len(group),
                ok=int(lat.size),
                offered_rps=offered,
                throughput_rps=lat.size / span if span > 0 else NAN,
                p50_ms=float(np.quantile(lat, 0.5)) if lat.size else NAN,
                p95_ms=float(np.quantile(lat, 0.95)) if lat.size else NAN,
                error_rate=1 - lat.size / len(group),
            )
        )
    return out


@dataclass(frozen=True, slots=True)
class SLOVerdict:
    """Whether a step held ``p95 < p95_ms`` and ``error rate < error_rate``, each with
    ``confidence``: the one-sided Wilson upper bounds of the share of successful requests
    slower than ``p95_ms`` (below 5%) and of the error rate (below ``error_rate``)."""

    passed: bool
    requests: int
    p95_ms: float
    slow_upper: float  # upper bound of the share over the latency target
    error_upper: float  # upper bound of the error rate
    confidence: float


def _upper(k: int, n: int, confidence: float) -> float:
    # a one-sided bound at `confidence` is one end of the two-sided interval at 2c - 1
    return 1.0 if n == 0 else wilson_interval(k, n, 2 * confidence - 1)[1]


def min_samples(error_rate: float, confidence: float) -> int:
    """The fewest requests a step needs for a clean step to pass: the Wilson upper bound of
    0 of n, about z^2 / n, must drop below 5% (and below ``error_rate`` where it is > 0)."""
    z = normal_ppf(confidence)
    need = 0.05 if error_rate <= 0 else min(0.05, error_rate)
    return math.floor(z * z * (1 - need) / need) + 1


def slo_verdict(
    invs: Sequence[Invocation], p95_ms: float, error_rate: float, confidence: float
) -> SLOVerdict:
    n = len(invs)
    ok = [i.latency_ms for i in invs if i.ok]
    slow = sum(1 for v in ok if v >= p95_ms)
    errors = n - len(ok)
    slow_up = _upper(slow, len(ok), confidence)
    err_up = _upper(errors, n, confidence)
    err_ok = errors == 0 if error_rate <= 0 else err_up < error_rate
    p95 = float(np.quantile(ok, 0.95)) if ok else NAN
    return SLOVerdict(n > 0 and slow_up < 0.05 and err_ok, n, p95, slow_up, err_up, confidence)
