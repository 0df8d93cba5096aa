"""End to end: the example plan, run by the real ``gpubench`` CLI against the generic emulator
served by ``python -m gpubench_http.emulator`` in its own process, Modal-style."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from gpubench_sdk import Outcome, Store

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "http_emulated.toml"
KEY = "wk-e2e-7a1c:ws-e2e-9b3d"


@pytest.fixture
def emulator() -> Iterator[str]:
    command = [
        sys.executable,
        "-m",
        "gpubench_http.emulator",
        "--port",
        "0",
        "--auth",
        "modal",
        "--api-key-env",
        "MODAL_PROXY_AUTH",
        "--redirect-after-s",
        "0.2",
    ]
    env = {**os.environ, "MODAL_PROXY_AUTH": KEY}
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, text=True, env=env)
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
    plan = EXAMPLE.read_text().replace("http://127.0.0.1:8787", emulator)
    plan = plan.replace('output = "gpubench-http-emulated.sqlite"', 'output = "out.sqlite"')
    config = tmp_path / "http.toml"
    config.write_text(plan)
    done = subprocess.run(
        [sys.executable, "-m", "gpubench_sdk", "run", str(config), "--quiet"],
        cwd=tmp_path,
        env={**os.environ, "MODAL_PROXY_AUTH": KEY},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    assert "wk-e2e" not in done.stdout + done.stderr and "ws-e2e" not in done.stdout + done.stderr
    with Store(tmp_path / "out.sqlite") as store:
        (run,) = store.runs()
        invs = store.invocations(run.id)
        fleet = store.fleet(run.id, target="modal-emu")
    assert run.status == "completed" and len(invs) == 8
    assert all(i.outcome is Outcome.OK for i in invs)
    # every request ran 300 ms, past the 0.2 s redirect: each was answered through a 303
    assert all(i.latency_ms >= 300 and i.execution_ms is not None for i in invs)
    assert all(abs(i.execution_ms - 300) < 50 for i in invs if i.execution_ms is not None)
    assert all(i.request_id for i in invs)
    assert max(q for i in invs if (q := i.queue_ms) is not None) >= 450  # waited for a boot
    assert fleet["ready"].size and fleet["ready"].max() == 1  # readiness from health_url
