"""False "ready": a fleet whose workers say ready before their model has loaded, measured
through a real run over loopback. The first request each such worker serves is warm by every
flag the platform gives, yet waits for the load: gpubench flags the target, counts those
requests, and stores them as cold (the cold-tail), keeping the provider's own answer. An
honest fleet of the same shape is not flagged."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from _scenario_fleet import FleetProvider, fleet_server

from gpubench_sdk import EchoProbe, Rate, Store, metrics, run
from gpubench_sdk._cli._run import print_run
from gpubench_sdk.testing import Duration, FleetConfig

LOAD_S = 1.0  # what the health check does not wait for


async def _measure(tmp_path: Path, false_ready_s: float) -> tuple[Path, int, int]:
    """Two workers kept up (min 2), a request every 0.25 s for 4 s; returns the store, the run,
    and how many requests the fleet says a false "ready" slowed (its ground truth)."""
    config = FleetConfig(
        cold_start=Duration.fixed(0.2),
        min_workers=2,
        max_workers=2,
        false_ready_s=false_ready_s,
        seed=1,
    )
    path = tmp_path / "ready.sqlite"
    with fleet_server(config) as server:
        # both workers booted and said ready before the run begins, as a deployed endpoint's
        server.fleet.wait_for(lambda c: c.idle == 2, timeout_s=10)
        result = await run(
            {"fleet": FleetProvider(url=server.url)},
            EchoProbe(sleep_ms=50),
            [Rate(rps=4, duration_s=4)],
            store=path,
            fleet_interval_s=0.1,
        )
        truth = sum(t.false_ready for t in server.fleet.truths())
    return path, result.run_id, truth


@pytest.mark.anyio
async def test_a_fleet_that_says_ready_too_early_is_flagged(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path, run_id, truth = await _measure(tmp_path, LOAD_S)
    assert truth == 2  # each worker's first request waited for the load
    with Store(path, readonly=True) as store:
        found = metrics.run_false_ready(store, run_id, target="fleet")
        cols = store.columns(run_id, target="fleet")
        marked = store.false_ready_marks(run_id, target="fleet")["marked"]
        info = store.run(run_id)
        capsys.readouterr()
        print_run(store, info, "completed")
        printed = capsys.readouterr().out
    assert found is not None and found.count == truth, found
    assert found.basis == "execution_ms"  # the server's service time: no queueing in it
    assert all(s >= LOAD_S * 1e3 for s in found.service_ms)
    assert found.warm_p95_ms < 200
    # stored as cold, the provider's own answer kept: the cold-start statistics include them
    assert int(marked.sum()) == truth
    assert (cols["cold"][marked] == 1).all()
    with Store(path, readonly=True) as store:
        colds = metrics.run_cold_starts(store, run_id, target="fleet")
        details = [
            row[0]
            for row in store._query(
                "SELECT json_extract(detail, '$.false_ready.provider_cold') FROM invocations"
                " WHERE json_extract(detail, '$.false_ready') IS NOT NULL"
            )
        ]
    assert colds.index.size == truth and colds.rate.cold == truth
    assert (colds.cold_start_ms >= 0.8 * LOAD_S * 1e3).all()  # the load, as a cold start
    assert details == [0] * truth
    # the warm requests no longer carry the load; the marked ones' server figure is kept aside
    warm = (cols["cold"] != 1) & (cols["outcome"] == 0)
    assert float(np.max(cols["execution_ms"][warm])) < LOAD_S * 1e3
    assert np.isnan(cols["execution_ms"][marked]).all()
    # judging the stored run again gives the same answer (it reads the provider's own flags)
    with Store(path, readonly=True) as store:
        again = metrics.run_false_ready(store, run_id, target="fleet")
    assert again == found
    assert 'fleet: said "ready" before it could serve: 2 of 2 first requests' in printed
    assert "counted as cold" in printed


@pytest.mark.anyio
async def test_an_honest_fleet_is_not_flagged(tmp_path: Path) -> None:
    path, run_id, truth = await _measure(tmp_path, 0.0)
    assert truth == 0
    with Store(path, readonly=True) as store:
        found = metrics.run_false_ready(store, run_id, target="fleet")
        marked = store.false_ready_marks(run_id, target="fleet")["marked"]
    assert found is not None and found.count == 0 and found.checked == 2
    assert not marked.any()


def test_the_method_on_known_arrays() -> None:
    # workers up: 1 before the run, 2 from t=10 s; requests every second, 50 ms each, except
    # the first and the first after t=10 s, which took 2 s
    t = np.array([0, 5, 10, 15]) * 10**9
    up = np.array([1, 1, 2, 2])
    starts = np.arange(20) * 10**9 + 1
    service = np.full(20, 50.0)
    service[[0, 10]] = 2000.0
    found = metrics.false_ready(t, up, starts, service, np.ones(20, bool))
    assert found is not None and found.flagged == (0, 10) and found.signals == 2
    # a cold request is never a suspect: the check moves to the next warm one
    warm = np.ones(20, bool)
    warm[0] = False
    found = metrics.false_ready(t, up, starts, service, warm)
    assert found is not None and found.flagged == (10,) and found.checked == 2
    # a slow request no signal preceded is not a false ready (queueing, a slow input)
    service2 = np.full(20, 50.0)
    service2[5] = 2000.0
    found = metrics.false_ready(t, up, starts, service2, np.ones(20, bool))
    assert found is not None and found.count == 0
    # too few warm requests, or no readings: nothing to judge by
    assert metrics.false_ready(t, up, starts[:3], service[:3], np.ones(3, bool)) is None
    assert metrics.false_ready([], [], starts, service, np.ones(20, bool)) is None


def test_the_example_flags_the_emulated_runpod_endpoint() -> None:
    import subprocess
    import sys

    pytest.importorskip("gpubench_runpod")
    root = Path(__file__).resolve().parents[1]
    proc = subprocess.run(
        [sys.executable, str(root / "examples" / "false_ready.py")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert "the fleet slowed 2 requests" in proc.stdout
    assert 'gpubench: said "ready" before it could serve: 2 of 2' in proc.stdout
    assert "counted as cold: 2 of 16" in proc.stdout
