"""Concurrency per worker: which platforms let one worker serve several requests at once, and
how much slower each request runs when it does, as measured.

A worker taking ``k`` requests at once needs fewer workers (fewer cold starts, less idle time
billed) but each request may run slower: a GPU shared by ``k`` requests is not ``k`` GPUs. That
slowdown is a property of the model and server, not of the platform, so advise takes it from
the runs: a request's *level* is how many requests its worker (``worker_id``) was running once
it had begun, itself included, and the slowdown at level ``k`` is the median execution time
at ``k`` over the median at 1 (``measured_slowdown``). Only levels measured at least
``MIN_PER_LEVEL`` times count, and only from 1 up without a gap. Where a run never put two
requests on one worker, no slowdown is known: advise then leaves concurrency out unless asked
to assume none (``assume=True``, ``--assume-concurrency``), and says which in its notes
(``slowdown_note``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from .._store._store import Store

MIN_PER_LEVEL = 5  # executions measured at a level before its median counts
SEARCHED_LEVELS = (2, 4, 8)  # the settings tried above 1, capped by the platform and measurements


@dataclass(frozen=True, slots=True)
class ConcurrencySetting:
    """A platform's setting for requests served at once by one worker, and its source."""

    setting: str
    max_per_worker: int
    source: str


# Where the platform documents a per-worker concurrency setting (read 2026-12-01).
PLATFORM_CONCURRENCY: dict[str, ConcurrencySetting] = {
    "cloudrun": ConcurrencySetting(
        "--concurrency (maximum concurrent requests per instance)",
        1000,
        "cloud.google.com/run/docs/about-concurrency: default 80, up to 1,000 per instance",
    ),
    "modal": ConcurrencySetting(
        "@modal.concurrent(max_inputs=N) (formerly allow_concurrent_inputs)",
        1000,
        "modal.com/docs/guide/concurrent-inputs and reference/modal.concurrent",
    ),
    "baseten": ConcurrencySetting(
        "concurrency_target (autoscaling settings)",
        1000,
        "docs.baseten.co autoscaling settings: concurrency_target, default 1 (PROVIDERS.md)",
    ),
    "runpod": ConcurrencySetting(
        "concurrency_modifier in runpod.serverless.start (an async handler)",
        1000,
        "docs.runpod.io/serverless/workers/concurrent-handler",
    ),
}


def platform_concurrency(provider: str) -> ConcurrencySetting | None:
    return PLATFORM_CONCURRENCY.get(provider)


def levels(
    worker: Sequence[str | None],
    begin_ns: np.ndarray,
    execution_ms: np.ndarray,
) -> np.ndarray:
    """Each request's level: how many requests of its worker (itself included) were executing
    when it began (``begin_ns``; each runs to ``begin_ns + execution``); 0 where unknown."""
    n = len(worker)
    out = np.zeros(n, dtype=np.int64)
    exec_ns = execution_ms * 1e6
    start = begin_ns
    end_ns = begin_ns + exec_ns
    by_worker: dict[str, list[int]] = {}
    for i, w in enumerate(worker):
        if w and np.isfinite(exec_ns[i]):
            by_worker.setdefault(w, []).append(i)
    for idx in by_worker.values():
        s, e = start[idx], end_ns[idx]
        out[idx] = ((s[None, :] <= s[:, None]) & (s[:, None] < e[None, :])).sum(axis=1)
    return out


def execution_began_ns(cols: Mapping[str, np.ndarray]) -> np.ndarray:
    """When each request began executing on its worker, on the client's clock: sent plus the
    server's queue time where it reports one (a queue platform's client learns of the end
    only when it next polls), else the response's arrival minus the execution time."""
    sent = cols["start_ns"].astype(np.float64)
    end = cols["end_ns"].astype(np.float64)
    queue = cols["queue_ms"]
    return np.where(np.isfinite(queue), sent + queue * 1e6, end - cols["execution_ms"] * 1e6)


def measured_slowdown(store: Store, runs: Sequence[int], target: str) -> tuple[float, ...]:
    """The measured slowdown per level ``(1.0, s2, s3, ...)`` of ``target`` over ``runs``
    (successful warm requests with a worker id and an execution time); ``()`` when no run
    put two of its requests on one worker often enough to say."""
    lv, ex = [], []
    for run in runs:
        cols = store.columns(run, target=target, text=True)
        ok = (cols["outcome"] == 0) & (cols["cold"] != 1) & np.isfinite(cols["execution_ms"])
        workers = [w if keep else None for w, keep in zip(cols["worker_id"], ok, strict=True)]
        lv.append(levels(workers, execution_began_ns(cols), cols["execution_ms"]))
        ex.append(cols["execution_ms"])
    if not lv:
        return ()
    level, execution = np.concatenate(lv), np.concatenate(ex)
    base = execution[level == 1]
    if base.size < MIN_PER_LEVEL:
        return ()
    factors = [1.0]
    k = 2
    while (at := execution[level == k]).size >= MIN_PER_LEVEL:
        factors.append(max(float(np.median(at) / np.median(base)), 1.0))
        k += 1
    return tuple(factors) if len(factors) > 1 else ()


def execution_at_level_one(
    store: Store, run: int, target: str, slowdown: Sequence[float]
) -> np.ndarray | None:
    """``run``'s execution seconds of ``target`` as the simulator samples them (every
    successful request with a server-reported execution time, ``distributions_from_run``),
    each divided by the measured slowdown at its level: what it would have taken alone. The
    simulator then slows each by its own level (``simulate(slowdown=...)``), so a request
    measured two at a time is not slowed twice. None where the run reports no execution."""
    cols = store.columns(run, target=target, text=True)
    execution = cols["execution_ms"]
    has = (cols["outcome"] == 0) & np.isfinite(execution)
    if not has.any():
        return None
    warm = has & (cols["cold"] != 1)  # the requests the slowdown was measured on
    workers = [w if keep else None for w, keep in zip(cols["worker_id"], warm, strict=True)]
    level = levels(workers, execution_began_ns(cols), execution)[has]
    top = len(slowdown)
    factor = np.array([1.0, *slowdown])[np.minimum(level, top)] if top else np.ones(level.size)
    out: np.ndarray = execution[has] / 1e3 / factor
    return out


def concurrency_levels(provider: str, slowdown: Sequence[float], assume: bool) -> list[int]:
    """The concurrency settings worth searching for a target: none where its platform has no
    such setting, or where no slowdown was measured and ``assume`` is not set; else
    ``SEARCHED_LEVELS`` within the platform's maximum and, where a slowdown was measured,
    within the levels measured (no extrapolation)."""
    fact = platform_concurrency(provider)
    if fact is None or not (slowdown or assume):
        return []
    top = len(slowdown) if slowdown else fact.max_per_worker
    return [k for k in SEARCHED_LEVELS if k <= min(top, fact.max_per_worker)]


def slowdown_at(slowdown: Sequence[float], k: int) -> float:
    """The execution-time factor at ``k`` requests per worker (1.0: none measured, assumed):
    the most a request of a setting ``k`` is slowed (``_options`` sizes fleets with it)."""
    return float(slowdown[k - 1]) if 0 < k <= len(slowdown) else 1.0


def slowdown_note(name: str, provider: str, slowdown: Sequence[float], assume: bool) -> str | None:
    fact = platform_concurrency(provider)
    if fact is None:
        return None
    if not slowdown and not assume:
        return (
            f"{name}: concurrency per worker ({fact.setting}) not searched: no run measured two "
            "requests on one worker, so how much slower each would run is unknown (measure it "
            "with a concurrency scenario, or --assume-concurrency to assume no slowdown)"
        )
    if not slowdown:
        return (
            f"{name}: concurrency per worker ({fact.setting}; {fact.source}) searched ASSUMING "
            "requests run no slower when a worker serves several at once: no run measured two "
            "requests on one worker (run a concurrency scenario with worker ids to measure it)"
        )
    shown = ", ".join(f"x{s:.2f} at {k}" for k, s in enumerate(slowdown, 1) if k > 1)
    return (
        f"{name}: concurrency per worker ({fact.setting}) searched up to the {len(slowdown)} "
        f"requests at once measured; execution measured slower by {shown}, and each simulated "
        "request is slowed by how many its worker runs once it has begun, as measured"
    )
