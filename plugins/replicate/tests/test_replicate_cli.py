"""End to end: the example plan, run by the real ``gpubench`` CLI against the Replicate and
Cog emulators, each served by its ``python -m`` entry point in its own process."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpubench_sdk import Outcome, Phase
from gpubench_sdk.testing import CliEndToEnd

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "replicate_emulated.toml"
KEY = "r8_e2e_3c9a51f07b2d"


@pytest.mark.slow
def test_gpubench_run_of_the_example_against_the_emulators(gpubench_cli: CliEndToEnd) -> None:
    gpubench_cli.env["REPLICATE_API_TOKEN"] = KEY
    replicate_url = gpubench_cli.emulator(
        "gpubench_replicate.emulator", "--api-key-env", "REPLICATE_API_TOKEN"
    )
    cog_url = gpubench_cli.emulator(
        "gpubench_replicate.cog_emulator", "--containers", "3", "--proxy"
    )
    done = gpubench_cli.run(
        EXAMPLE, replace={"http://127.0.0.1:8787": replicate_url, "http://127.0.0.1:5055": cog_url}
    )
    assert done.returncode == 0, done.stderr
    assert KEY not in done.output
    run, invs = done.run, done.invocations
    assert run.status == "completed"
    assert KEY.encode() not in done.store_path.read_bytes()
    for target in ("replicate-deployment", "cog-container"):
        mine = [i for i in invs if i.target == target]
        assert len(mine) == 2 * 3 + 30, target
        assert all(i.outcome is Outcome.OK and i.phase is Phase.MEASURE for i in mine)
        # metrics.predict_time is seconds on the wire: 50 ms of work must read as ~50 ms
        assert all(i.execution_ms is not None and 49 <= i.execution_ms < 500 for i in mine)
        cold = [i for i in mine if i.scenario == 0 and i.cold]
        warm = [i for i in mine if i.scenario == 0 and not i.cold]
        assert len(cold) == 2 and len(warm) == 4, (
            target,
            [(i.seq, i.cold, i.queue_ms, i.setup_ms) for i in mine if i.scenario == 0],
        )
        if target == "cog-container":  # Cog 0.23 sends no created_at/started_at: no queue
            assert all(i.queue_ms is None for i in mine)
            continue
        for inv in cold:  # the starting phase includes the emulators' 0.5 s boot
            assert inv.queue_ms is not None and inv.queue_ms >= 450
        assert all(i.queue_ms is not None and i.queue_ms < 300 for i in warm)
    cog_cold = [i for i in invs if i.target == "cog-container" and i.scenario == 0 and i.cold]
    assert all(i.setup_ms is not None and 450 <= i.setup_ms < 1000 for i in cog_cold)
