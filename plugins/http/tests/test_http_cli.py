"""End to end: the example plan, run by the real ``gpubench`` CLI against the generic emulator
served by ``python -m gpubench_http.emulator`` in its own process, Modal-style."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpubench_sdk import Outcome
from gpubench_sdk.testing import CliEndToEnd

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "http_emulated.toml"
KEY = "wk-e2e-7a1c:ws-e2e-9b3d"


@pytest.mark.slow
def test_gpubench_run_of_the_example_against_the_emulator(gpubench_cli: CliEndToEnd) -> None:
    gpubench_cli.env["MODAL_PROXY_AUTH"] = KEY
    emulator = gpubench_cli.emulator("gpubench_http.emulator", "--auth", "modal",
                                     "--api-key-env", "MODAL_PROXY_AUTH",
                                     "--redirect-after-s", "0.2")  # fmt: skip
    done = gpubench_cli.run(EXAMPLE, replace={"http://127.0.0.1:8787": emulator})
    assert done.returncode == 0, done.stderr
    assert "wk-e2e" not in done.output and "ws-e2e" not in done.output
    run, invs = done.run, done.invocations
    with done.store() as store:
        fleet = store.fleet(run.id, target="modal-emu")
    assert run.status == "completed" and len(invs) == 8
    assert all(i.outcome is Outcome.OK for i in invs)
    # every request ran 300 ms, past the 0.2 s redirect: each was answered through a 303
    assert all(i.latency_ms >= 300 and i.execution_ms is not None for i in invs)
    assert all(abs(i.execution_ms - 300) < 50 for i in invs if i.execution_ms is not None)
    assert all(i.request_id for i in invs)
    assert max(q for i in invs if (q := i.queue_ms) is not None) >= 450  # waited for a boot
    assert fleet["ready"].size and fleet["ready"].max() == 1  # readiness from health_url
