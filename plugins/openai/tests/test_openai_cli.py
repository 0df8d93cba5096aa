"""End to end: the example plan, run by the real ``gpubench`` CLI against the OpenAI emulator
served by ``python -m gpubench_openai.emulator`` in its own process."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from gpubench_sdk import Outcome, Store
from gpubench_sdk.metrics import run_stream_metrics

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "openai_emulated.toml"
KEY = "sk-e2e-4c9a1b7d3f5e"


@pytest.fixture
def emulator() -> Iterator[str]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "gpubench_openai.emulator", "--port", "0",
         "--api-key-env", "OPENAI_API_KEY", "--tokens-per-s", "100"],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "OPENAI_API_KEY": KEY},
    )  # fmt: skip
    assert proc.stdout is not None
    url = proc.stdout.readline().strip()
    try:
        assert url.startswith("http://127.0.0.1:") and url.endswith("/v1"), url
        yield url
    finally:
        proc.terminate()
        proc.wait(10)


@pytest.mark.slow
def test_gpubench_run_of_the_example_against_the_emulator(emulator: str, tmp_path: Path) -> None:
    plan = EXAMPLE.read_text().replace("http://127.0.0.1:8000/v1", emulator)
    plan = plan.replace('output = "gpubench-openai-emulated.sqlite"', 'output = "out.sqlite"')
    config = tmp_path / "openai.toml"
    config.write_text(plan)
    env = {**os.environ, "OPENAI_API_KEY": KEY, "COLUMNS": "250"}
    done = subprocess.run(
        [sys.executable, "-m", "gpubench_sdk", "run", str(config)],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert KEY not in done.stdout + done.stderr
    assert "TTFT p50 ms" in done.stdout and "ITL p50 ms" in done.stdout
    with Store(tmp_path / "out.sqlite") as store:
        (run,) = store.runs()
        invs = store.invocations(run.id)
        stream = run_stream_metrics(store, run, target="vllm-emu")
    assert run.status == "completed" and len(invs) == 12
    assert all(i.outcome is Outcome.OK for i in invs)
    assert all(i.output_units == 32 and i.input_units == 257 for i in invs)  # from usage
    assert all(len(i.token_times_ns or ()) == 32 for i in invs)
    # 100 tokens/s: the gaps between tokens are ~10 ms; cold starts (0.5 s) are in TTFT only
    assert 7 <= float(np.median(stream.itl_ms)) <= 20
    assert float(stream.ttft_ms.max()) >= 500 > float(np.median(stream.itl_ms))
