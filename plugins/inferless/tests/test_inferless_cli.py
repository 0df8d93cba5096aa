"""End to end: the example plan, run by the real ``gpubench`` CLI against the Inferless
emulator served by ``python -m gpubench_inferless.emulator`` in its own process."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from gpubench_sdk import Outcome, Phase, Store

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "inferless_emulated.toml"
KEY = "inf_e2e_8a4c2e6f0b"


@pytest.fixture
def emulator() -> Iterator[str]:
    command = [sys.executable, "-m", "gpubench_inferless.emulator", "--port", "0"]
    env = {**os.environ, "INFERLESS_API_KEY": KEY}
    proc = subprocess.Popen(
        [*command, "--api-key-env", "INFERLESS_API_KEY"],
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
    plan = EXAMPLE.read_text().replace("http://127.0.0.1:8688", emulator)
    plan = plan.replace('output = "gpubench-inferless-emulated.sqlite"', 'output = "o.sqlite"')
    config = tmp_path / "inferless.toml"
    config.write_text(plan)
    done = subprocess.run(
        [sys.executable, "-m", "gpubench_sdk", "run", str(config), "--quiet"],
        cwd=tmp_path,
        env={**os.environ, "INFERLESS_API_KEY": KEY},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    assert KEY not in done.stdout + done.stderr
    with Store(tmp_path / "o.sqlite") as store:
        (run,) = store.runs()
        invs = store.invocations(run.id)
    assert run.status == "completed"
    assert len(invs) == 2 * 3 + 30
    assert all(i.outcome is Outcome.OK and i.phase is Phase.MEASURE for i in invs)
    cold = [i for i in invs if i.scenario == 0 and i.cold]
    # the idle gap outlasts the 1 s scale-down delay: each first request boots a replica,
    # and the plugin infers it (0.5 s boot against ~50 ms warm), never confirms it
    assert len(cold) == 2 and not any(i.cold_confirmed for i in invs)
    for inv in cold:
        assert inv.latency_ms >= 500
    assert len({i.request_id for i in invs}) == len(invs)
