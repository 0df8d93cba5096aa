"""End to end: the example plan, run by the real ``gpubench`` CLI against the RunPod emulator
served by ``python -m gpubench_runpod.emulator`` in its own process."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpubench_sdk.testing import CliEndToEnd

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "runpod_emulated.toml"
KEY = "rpa_e2e_5d1f0c9b7a3e"


@pytest.mark.slow
def test_gpubench_run_of_the_example_against_the_emulator(gpubench_cli: CliEndToEnd) -> None:
    gpubench_cli.env["RUNPOD_API_KEY"] = KEY
    url = gpubench_cli.emulator("gpubench_runpod.emulator", "--api-key-env", "RUNPOD_API_KEY")
    done = gpubench_cli.run(EXAMPLE, replace={"http://127.0.0.1:8686": url})
    invs = done.measured(secret=KEY)
    assert len(invs) == 2 * 3 + 30
    cold = [i for i in invs if i.scenario == 0 and i.cold]
    assert len(cold) == 2 and all(i.cold_confirmed for i in cold)  # via the control plane
    for inv in cold:  # RunPod's delayTime includes the emulator's 0.5 s boot
        assert inv.queue_ms is not None and inv.queue_ms >= 450
    warm = [i for i in invs if i.scenario == 0 and not i.cold]
    assert len(warm) == 4 and all(i.queue_ms is not None and i.queue_ms < 300 for i in warm)
    burst_workers = {i.worker_id for i in invs if i.scenario == 1}
    assert len(burst_workers) >= 2  # the burst scaled out
    assert all(i.execution_ms is not None and i.execution_ms >= 49 for i in invs)
