"""End to end: the example plan, run by the real ``gpubench`` CLI against the Cloud Run
emulator served by ``python -m gpubench_cloudrun.emulator`` in its own process."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from gpubench_sdk.testing import CliEndToEnd

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "cloudrun_emulated.toml"
TOKEN = "idtok_e2e_8c2d4f6a1b3e"
SERVICE = "/v2/projects/p/locations/us-central1/services/gpubench-emulated"


@pytest.mark.slow
def test_gpubench_run_of_the_example_against_the_emulator(gpubench_cli: CliEndToEnd) -> None:
    gpubench_cli.env["CLOUDRUN_ID_TOKEN"] = TOKEN
    emulator = gpubench_cli.emulator(
        "gpubench_cloudrun.emulator", "--api-key-env", "CLOUDRUN_ID_TOKEN"
    )
    before = httpx.get(emulator + SERVICE).json()
    done = gpubench_cli.run(EXAMPLE, replace={"http://127.0.0.1:8687": emulator})
    invs = done.measured(secret=TOKEN)
    assert len(invs) == 2 * 3 + 30
    cold = [i for i in invs if i.scenario == 0 and i.cold]
    assert len(cold) == 2 and all(i.cold_confirmed for i in cold)  # min 0 + new revision
    assert all(i.latency_ms >= 450 for i in cold)  # the emulator boots instances in 0.5 s
    warm = [i for i in invs if i.scenario == 0 and not i.cold]
    assert len(warm) == 4 and all(i.cold is False for i in warm)  # inferred from the threshold
    after = httpx.get(emulator + SERVICE).json()
    # the user's scaling and labels are back (each change rolled a revision)
    assert after["template"].get("scaling") == before["template"].get("scaling")
    assert after["template"].get("labels") == before["template"].get("labels")
    assert after["latestReadyRevision"] != before["latestReadyRevision"]
