"""A synthetic results store that exercises every section of a report.

Three runs on three consecutive UTC days, two targets ("fast" priced per second, "slow"), each
run with a cold-start scenario (provider-reported phases) and a burst whose latency grows with
the request index for "slow". Built through the public Store API, so it is a real file.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from gpubench_sdk import Invocation, Outcome, Phase, Store

DAY0_WALL_NS = 1_767_225_600 * 10**9  # 2026-01-01T00:00Z
DAY_NS = 86_400 * 10**9
MS = 1_000_000
BURST = 40
TOKENS = 10
STREAMING = True  # store schema v2 keeps streamed token times: "fast" streams its bursts
CONFIG = {
    "run": {"name": "report-fixture"},
    "workload": {"kind": "probe"},
    "targets": [
        {"name": "fast", "provider": "local", "price_per_s_usd": 0.0004, "api_key_env": "KEY_X"},
        {"name": "slow", "provider": "local"},
    ],
    "scenarios": [{"kind": "cold_starts", "n": 3}, {"kind": "burst", "total": BURST}],
}


def _config(names: tuple[str, str]) -> dict[str, object]:
    plans: list[dict[str, object]] = CONFIG["targets"]  # type: ignore[assignment]
    return CONFIG | {"targets": [plan | {"name": n} for plan, n in zip(plans, names, strict=True)]}


def _inv(target: str, scenario: int, seq: int, t_ms: float, service_ms: float, wall0: int,
         **kw: object) -> Invocation:  # fmt: skip
    start = int(t_ms * MS)
    fields: dict[str, object] = {
        "target": target, "scenario": scenario, "seq": seq, "phase": Phase.MEASURE,
        "scheduled_ns": start, "start_ns": start, "end_ns": start + int(service_ms * MS),
        "wall_start_ns": wall0 + start, "outcome": Outcome.OK, "cold": False,
    }  # fmt: skip
    fields.update(kw)
    return Invocation(**fields)  # type: ignore[arg-type]


def build_store(
    path: Path, *, days: int = 3, seed: int = 1, names: tuple[str, str] = ("fast", "slow")
) -> list[int]:
    """Write the runs; returns their ids. ``names`` renames the two targets (the first is the
    priced, streaming one; the second's burst latency grows)."""
    from gpubench_sdk._store._store import ScenarioRecord, TargetRecord

    rng = np.random.default_rng(seed)
    ids = []
    with Store(path) as store:
        for day in range(days):
            wall0 = DAY0_WALL_NS + day * DAY_NS + 3_600 * 10**9
            run = store.begin_run(
                name=f"day {day}",
                config=_config(names),
                targets=(TargetRecord(names[0], "local"), TargetRecord(names[1], "local")),
                scenarios=(ScenarioRecord("cold_starts", {}), ScenarioRecord("burst", {})),
                origin_ns=0,
                started_wall_ns=wall0,
            )
            for k, target in enumerate(names):
                boot = 2_000.0 + 1_500 * k + 300 * day
                seq = 0
                for i in range(3):  # a confirmed cold start, then two warm requests
                    t = i * 60_000.0
                    cold_ms = boot + 150 + float(rng.normal(0, 40))
                    store.append(run.id, _inv(
                        target, 0, seq, t, cold_ms, wall0, cold=True, cold_confirmed=True,
                        execution_ms=100.0, queue_ms=boot + 20, setup_ms=boot,
                    ))  # fmt: skip
                    for j in (1, 2):
                        warm = 130 + float(rng.normal(0, 5))
                        store.append(run.id, _inv(
                            target, 0, seq + j, t + 5_000 * j, warm, wall0, execution_ms=100.0
                        ))  # fmt: skip
                    seq += 3
                for i in range(BURST):
                    growth = 2.0 * i if k == 1 else 0.0
                    latency = 100 + growth + float(rng.exponential(10))
                    outcome = Outcome.HTTP_5XX if i == 7 and k == 1 else Outcome.OK
                    t = 200_000 + 20.0 * i
                    extra = {}
                    if k == 0 and STREAMING:  # 10 tokens: TTFT ~50 ms, then ~5 ms apart
                        first = 50 + float(rng.exponential(5))
                        times = first + np.cumsum([0, *rng.uniform(4, 6, TOKENS - 1)])
                        extra["token_times_ns"] = [int((t + v) * MS) for v in times]
                        latency = max(latency, float(times[-1]) + 1)
                    store.append(run.id, _inv(
                        target, 1, seq + i, t, latency, wall0, outcome=outcome, **extra
                    ))  # fmt: skip
            store.end_run(run.id, "completed")
            ids.append(run.id)
    return ids
