"""The shape examples, run by the real ``gpubench`` CLI against the local runtime, as printed;
then analysed from Python the way docs/scenarios.md shows."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from _scenario_fleet import require_fair_measurement

from gpubench_sdk import Store, metrics

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def gpubench_run(example: str, cwd: Path, expect: str = "") -> Store:
    done = subprocess.run(
        [sys.executable, "-m", "gpubench_sdk", "run", str(EXAMPLES / example), "--quiet"],
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=180,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert expect in done.stdout  # the shape's one-line answer under the summary
    (store,) = cwd.glob("*.sqlite")
    return Store(store)


@pytest.mark.slow
def test_stages_example(tmp_path: Path) -> None:
    with gpubench_run("stages_local.toml", tmp_path, "step-and-spike on local: to 20") as store:
        (run,) = store.runs()
        assert run.status == "completed" and run.scenarios[0].params["name"] == "step-and-spike"
        changes = metrics.run_scaling_response(store, run.id, 0, "local")
        health = store.health_windows(run.id)
    assert [c.to_rps for c in changes] == [4, 20, 0]
    require_fair_measurement(health)
    step, spike, _ = changes
    assert step.workers_before == 0 and step.workers_steady is not None
    assert step.workers_steady >= 1 and 0 < step.workers_s < 3  # a worker process booted
    assert spike.workers_steady is not None and spike.workers_steady >= step.workers_steady
    # the latency level before the step was measured (whether p95 settled within the stage is
    # a matter of the machine's load here; tests/test_scenario_stages.py checks it on a fleet)
    assert step.baseline_p95_ms is not None and step.baseline_p95_ms > 0


@pytest.mark.slow
def test_sweep_and_concurrency_examples(tmp_path: Path) -> None:
    _mk(tmp_path / "sweep")
    with gpubench_run("sweep_local.toml", tmp_path / "sweep", "sweep-1 on local: knee") as store:
        curve = metrics.run_sweep(store, "latest", 1, "local")
        sweep_health = store.health_windows(store.run("latest").id)
    assert len(curve.steps) == 5 and curve.knee is not None
    assert curve.max_throughput_rps <= 45  # two workers x 50 ms: 40 req/s at most
    _mk(tmp_path / "conc")
    with gpubench_run("concurrency_local.toml", tmp_path / "conc") as store:
        (run,) = store.runs()
        assert run.status == "completed" and run.samples >= 4
    require_fair_measurement(sweep_health)
    assert curve.max_throughput_rps >= 20


@pytest.mark.slow
def test_max_rate_and_replay_examples(tmp_path: Path) -> None:
    _mk(tmp_path / "max")
    answer = "max_rate-1 on local: "
    with gpubench_run("max_rate_local.toml", tmp_path / "max", answer) as store:
        found = metrics.run_max_rate(store, "latest", 1, "local")
        max_health = store.health_windows(store.run("latest").id)
    assert found.max_rate_rps <= 45  # at most the two workers' 40 req/s, within precision
    _mk(tmp_path / "replay")
    with gpubench_run("replay_local.toml", tmp_path / "replay") as store:
        (run,) = store.runs()
        invs = [i for i in store.invocations(run.id) if i.scenario == 1]
        trace = Path(run.scenarios[1].params["path"])
    assert trace == EXAMPLES / "replay_trace.csv"  # read beside the plan, stored absolute
    assert len(invs) == 2 * 12 and all(i.ok for i in invs)  # twelve rows, looped twice
    require_fair_measurement(max_health)
    assert found.max_rate_rps > 0


def _mk(path: Path) -> None:
    path.mkdir(exist_ok=True)
