"""The simulator against the real local runtime: same arrivals, same scale-down delay."""

from __future__ import annotations

from pathlib import Path

import anyio
import numpy as np
from _plans import local_target

from gpubench_sdk import Store, build_run
from gpubench_sdk._plan._config import parse_config
from gpubench_sdk.cost import (
    BillingModel,
    FleetSettings,
    arrivals_from_run,
    distributions_from_run,
    run_cost,
    simulate,
)

IDLE_TIMEOUT_S = 0.4


def test_simulated_cold_starts_match_the_local_runtimes(tmp_path: Path) -> None:
    plan = parse_config(
        {
            "run": {"name": "sim-check"},
            "workload": {"kind": "probe", "sleep_ms": 5},
            "targets": [local_target(max_workers=1, idle_timeout_s=IDLE_TIMEOUT_S)],
            # Poisson at 2/s: P(gap > 0.4 s) = exp(-0.8) = 0.45, so about half the requests
            # find the worker scaled to zero
            "scenarios": [
                {"kind": "rate", "rps": 2, "duration_s": 12, "arrivals": "poisson", "seed": 3}
            ],
        }
    )
    store_path = tmp_path / "sim.sqlite"
    runner = build_run(plan, store=store_path)
    result = anyio.run(runner.run)
    with Store(store_path, readonly=True) as store:
        cols = store.columns(result.run_id, target="loc")
        real_cold = int((cols["cold"] == 1).sum())
        arrivals = arrivals_from_run(store, result.run_id, "loc")
        measured = distributions_from_run(store, result.run_id, "loc")
        billing = BillingModel(granularity_s=0.001, default_idle_timeout_s=IDLE_TIMEOUT_S)
        replayed = run_cost(store, result.run_id, "loc", billing=billing, rate_usd_per_s=1.0)
    assert measured.cold_start_s.size == real_cold > 3
    sim = simulate(
        arrivals,
        execution_s=measured.execution_s,
        cold_start_s=measured.cold_start_s,
        settings=FleetSettings(0, 1, IDLE_TIMEOUT_S, 1),
        billing=billing,
        rate_usd_per_s=1.0,
    )
    # gaps within a few ms of the delay may go either way; the rest must agree
    near = int((np.abs(np.diff(arrivals) - IDLE_TIMEOUT_S) < 0.05).sum())
    assert abs(sim.cold_requests - real_cold) <= max(2, near)
    # the replay of the stored run follows the runtime's own cold/warm report: a new worker
    # for each cold start
    assert replayed.workers == real_cold
