"""End to end: the example plan, run by the real ``gpubench`` CLI against the Inferless
emulator served by ``python -m gpubench_inferless.emulator`` in its own process."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpubench_sdk.testing import CliEndToEnd

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "inferless_emulated.toml"
KEY = "inf_e2e_8a4c2e6f0b"


@pytest.mark.slow
def test_gpubench_run_of_the_example_against_the_emulator(gpubench_cli: CliEndToEnd) -> None:
    gpubench_cli.env["INFERLESS_API_KEY"] = KEY
    url = gpubench_cli.emulator("gpubench_inferless.emulator", "--api-key-env", "INFERLESS_API_KEY")
    done = gpubench_cli.run(EXAMPLE, replace={"http://127.0.0.1:8688": url})
    invs = done.measured(secret=KEY)
    assert len(invs) == 2 * 3 + 30
    cold = [i for i in invs if i.scenario == 0 and i.cold]
    # the idle gap outlasts the 1 s scale-down delay: each first request boots a replica,
    # and the plugin infers it (0.5 s boot against ~50 ms warm), never confirms it
    assert len(cold) == 2 and not any(i.cold_confirmed for i in invs)
    for inv in cold:
        assert inv.latency_ms >= 500
    assert len({i.request_id for i in invs}) == len(invs)
