"""End to end: the example plan, run by the real ``gpubench`` CLI against the RunPod emulator
served by ``python -m gpubench_runpod.emulator`` in its own process."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from gpubench_sdk import Outcome, Phase, Store

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "runpod_emulated.toml"
KEY = "rpa_e2e_5d1f0c9b7a3e"


@pytest.fixture
def emulator() -> Iterator[str]:
    env = {**os.environ, "RUNPOD_API_KEY": KEY}
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "gpubench_runpod.emulator",
            "--port",
            "0",
            "--api-key-env",
            "RUNPOD_API_KEY",
        ],
        stdout=subprocess.PIPE,
        text=True,
        env=env,
    )
    assert proc.stdout is not None
    url = proc.stdout.readline().strip()
    try:
        assert url.startswith("http://127.0.0.1:"), url
        yield url
    finally:
        proc.terminate()
        proc.wait(10)


@pytest.mark.slow
def test_gpubench_run_of_the_example_against_the_emulator(emulator: str, tmp_path: Path) -> None:
    plan = EXAMPLE.read_text().replace("http://127.0.0.1:8686", emulator)
    plan = plan.replace('output = "gpubench-runpod-emulated.sqlite"', 'output = "out.sqlite"')
    config = tmp_path / "runpod.toml"
    config.write_text(plan)
    done = subprocess.run(
        [sys.executable, "-m", "gpubench_sdk", "run", str(config), "--quiet"],
        cwd=tmp_path,
        env={**os.environ, "RUNPOD_API_KEY": KEY},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    assert KEY not in done.stdout + done.stderr
    with Store(tmp_path / "out.sqlite") as store:
        (run,) = store.runs()
        invs = store.invocations(run.id)
    assert run.status == "completed"
    assert len(invs) == 2 * 3 + 30
    assert all(i.outcome is Outcome.OK and i.phase is Phase.MEASURE for i in invs)
    cold = [i for i in invs if i.scenario == 0 and i.cold]
    assert len(cold) == 2 and all(i.cold_confirmed for i in cold)  # via the control plane
    for inv in cold:  # RunPod's delayTime includes the emulator's 0.5 s boot
        assert inv.queue_ms is not None and inv.queue_ms >= 450
    warm = [i for i in invs if i.scenario == 0 and not i.cold]
    assert len(warm) == 4 and all(i.queue_ms is not None and i.queue_ms < 300 for i in warm)
    burst_workers = {i.worker_id for i in invs if i.scenario == 1}
    assert len(burst_workers) >= 2  # the burst scaled out
    assert all(i.execution_ms is not None and i.execution_ms >= 49 for i in invs)
