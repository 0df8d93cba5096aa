"""Hand-written stored runs: one measured invocation at a time, in a run on one target."""

from __future__ import annotations

import os
from typing import Any

from gpubench_sdk import Invocation, Outcome, Phase, Store
from gpubench_sdk._store._store import RunInfo, ScenarioRecord, TargetRecord


def measured(seq: int, start_s: float, service_s: float, **fields: Any) -> Invocation:
    """A measured, successful call of target "t" in scenario 0: it starts ``start_s`` into the
    run and its client sees it for ``service_s``; ``fields`` sets the rest (cold, units...)."""
    start = int(start_s * 1e9)
    return Invocation(
        target="t",
        scenario=0,
        seq=seq,
        phase=Phase.MEASURE,
        scheduled_ns=start,
        start_ns=start,
        end_ns=start + int(service_s * 1e9),
        wall_start_ns=0,
        outcome=Outcome.OK,
        **fields,
    )


def begin_burst_run(store: Store, name: str, config: dict[str, Any] | None = None) -> RunInfo:
    """A run of target "t" (on RunPod) with one burst scenario, at time and wall clock zero."""
    return store.begin_run(
        name=name,
        config=config or {},
        targets=[TargetRecord("t", "runpod")],
        scenarios=[ScenarioRecord("burst", {})],
        origin_ns=0,
        started_wall_ns=0,
    )


def big_run(path: str | os.PathLike[str], rows: int) -> None:
    """A store holding one completed run of ``rows`` 1 ms calls: an export far larger than a
    pipe's 64 KiB buffer, and long enough to interrupt mid-write."""
    with Store(path) as store:
        run = begin_burst_run(store, "big")
        for seq in range(rows):
            store.append(run.id, measured(seq, seq / 1e9, 1e-3))
        store.end_run(run.id, "completed")
