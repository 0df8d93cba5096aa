"""End to end: the example plan, run by the real ``gpubench`` CLI against the Hugging Face
emulator served by ``python -m gpubench_huggingface.emulator`` in its own process."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from gpubench_sdk import Outcome, Phase, Store

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "huggingface_emulated.toml"
KEY = "hf_e2e_3c9a7b5d1e"


@pytest.fixture
def emulator() -> Iterator[str]:
    command = [sys.executable, "-m", "gpubench_huggingface.emulator", "--port", "0"]
    env = {**os.environ, "HF_TOKEN": KEY}
    proc = subprocess.Popen(
        [*command, "--api-key-env", "HF_TOKEN"], stdout=subprocess.PIPE, text=True, env=env
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
    plan = EXAMPLE.read_text().replace("http://127.0.0.1:8687", emulator)
    plan = plan.replace('output = "gpubench-huggingface-emulated.sqlite"', 'output = "o.sqlite"')
    config = tmp_path / "huggingface.toml"
    config.write_text(plan)
    done = subprocess.run(
        [sys.executable, "-m", "gpubench_sdk", "run", str(config), "--quiet"],
        cwd=tmp_path,
        env={**os.environ, "HF_TOKEN": KEY},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    assert KEY not in done.stdout + done.stderr
    with Store(tmp_path / "o.sqlite") as store:
        (run,) = store.runs()
        invs = store.invocations(run.id)
        tokens = store.token_times(run.id)
    assert run.status == "completed"
    assert len(invs) == 2 * 3 + 24
    assert all(i.outcome is Outcome.OK and i.phase is Phase.MEASURE for i in invs)
    cold = [i for i in invs if i.scenario == 0 and i.cold]
    assert len(cold) == 2 and all(i.cold_confirmed for i in cold)  # scaledToZero, then 503s
    for inv in cold:  # the time to ready covers the emulator's 0.5 s boot
        assert inv.setup_ms is not None and 450 <= inv.setup_ms <= 900
    warm = [i for i in invs if i.scenario == 0 and not i.cold]
    assert len(warm) == 4 and all(i.cold is False for i in warm)
    assert all(i.output_units == 16 for i in invs)  # TGI's details.generated_tokens
    assert len(tokens) == len(invs) and all(len(t) == 16 for t in tokens)
    assert len({i.request_id for i in invs}) == len(invs)
