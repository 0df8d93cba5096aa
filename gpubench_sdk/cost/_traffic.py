"""Inputs of the simulator: arrival traces and measured cold-start/execution distributions."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

from .._base._errors import ConfigError, StoreError

if TYPE_CHECKING:
    from .._store._store import Store

SECONDS_PER_DAY = 86_400.0


MAX_ARRIVALS = 20_000_000  # 160 MB of float64 times: beyond that, almost surely a typo


def poisson_arrivals(
    rate_per_s: float,
    duration_s: float,
    *,
    daily_profile: Sequence[float] | None = None,
    seed: int = 0,
    limit: int = MAX_ARRIVALS,
) -> npt.NDArray[np.float64]:
    """Sorted Poisson arrival times (seconds) over ``duration_s`` at a mean ``rate_per_s``,
    refused up front when more than ``limit`` are expected (memory: 8 bytes each, and every
    simulation over them takes time in proportion).

    ``daily_profile``: relative rates over the day in equal slots (24 for hours); scaled to a
    mean of 1, so ``rate_per_s`` stays the day's mean. A non-homogeneous Poisson process with
    a piecewise-constant rate: per slot, a Poisson count of uniform times."""
    if not rate_per_s >= 0:
        raise ConfigError("rate_per_s", rate_per_s, "requests per second >= 0")
    if not duration_s > 0:
        raise ConfigError("duration_s", duration_s, "seconds > 0")
    expected = rate_per_s * duration_s
    if expected > limit:
        raise ConfigError(
            "rate_per_s",
            rate_per_s,
            f"at most {limit:,} arrivals: {rate_per_s:g}/s over {duration_s:g} s is about "
            f"{expected:,.0f}; lower the rate or the duration, or raise limit",
        )
    rng = np.random.default_rng(seed)
    if daily_profile is None:
        count = rng.poisson(rate_per_s * duration_s)
        return np.sort(rng.uniform(0.0, duration_s, count))
    profile = np.asarray(daily_profile, dtype=np.float64)
    if profile.size == 0 or (profile < 0).any() or profile.sum() == 0:
        raise ConfigError("daily_profile", list(profile), "relative rates >= 0, not all zero")
    profile = profile / profile.mean()
    slot_s = SECONDS_PER_DAY / profile.size
    starts = np.arange(0.0, duration_s, slot_s)
    parts = []
    for s in starts:
        width = min(slot_s, duration_s - s)
        slot_rate = rate_per_s * profile[int(s // slot_s) % profile.size]
        parts.append(rng.uniform(s, s + width, rng.poisson(slot_rate * width)))
    return np.sort(np.concatenate(parts)) if parts else np.zeros(0)


def arrivals_from_run(store: Store, run: int | str, target: str) -> npt.NDArray[np.float64]:
    """The scheduled send times (seconds from the first) of ``target``'s measured requests."""
    info = store.run(run)
    cols = store.columns(info.id, target=target)
    t: npt.NDArray[np.float64] = np.sort(cols["scheduled_ns"].astype(np.float64) / 1e9)
    if t.size == 0:
        raise StoreError(f"run {info.id} has no measured requests for target {target!r}")
    return t - float(t[0])


@dataclass(frozen=True)
class MeasuredDistributions:
    """Seconds measured in a run: ``cold_start_s`` of its cold requests (latency minus
    execution, or the server's ``setup_ms``), ``execution_s`` of all its successful ones."""

    cold_start_s: npt.NDArray[np.float64]
    execution_s: npt.NDArray[np.float64]


def distributions_from_run(store: Store, run: int | str, target: str) -> MeasuredDistributions:
    """Cold-start and execution samples of ``target`` in a stored run, for ``simulate``.

    Execution is the server-reported ``execution_ms`` where given, else the latency of the
    warm requests; cold start is ``setup_ms`` where given, else the reference report's
    ``latency - inference time`` of the cold requests."""
    info = store.run(run)
    cols = store.columns(info.id, target=target)
    ok = cols["outcome"] == 0
    latency_s = cols["latency_ms"] / 1e3
    exec_s = cols["execution_ms"] / 1e3
    execution = np.where(np.isnan(exec_s), latency_s, exec_s)
    warm = ok & (cols["cold"] != 1)
    exec_samples = (
        execution[ok & ~np.isnan(exec_s)] if (~np.isnan(exec_s[ok])).any() else execution[warm]
    )
    is_cold = ok & (cols["cold"] == 1)
    setup_s = cols["setup_ms"] / 1e3
    fallback = latency_s - np.where(
        np.isnan(exec_s), np.nanmedian(exec_samples) if exec_samples.size else 0.0, exec_s
    )
    cold = np.where(np.isnan(setup_s), fallback, setup_s)[is_cold]
    cold = np.maximum(cold, 0.0)
    if exec_samples.size == 0:
        raise StoreError(f"run {info.id} has no successful requests for target {target!r}")
    return MeasuredDistributions(cold_start_s=cold, execution_s=exec_samples)
