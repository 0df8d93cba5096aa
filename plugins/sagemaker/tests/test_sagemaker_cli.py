"""End to end: the example plan, run by the real ``gpubench`` CLI against the SageMaker
emulator served by ``python -m gpubench_sagemaker.emulator`` in its own process, with the
credentials in the environment as boto3's chain reads them."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import boto3
import pytest

from gpubench_sdk import Outcome, Phase, Store

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "sagemaker_emulated.toml"
ENV = {
    "AWS_ACCESS_KEY_ID": "AKIAEMULATEDE2E00001",
    "AWS_SECRET_ACCESS_KEY": "e2e-secret-5c0d8e2f9a1b",
}


@pytest.fixture
def emulator() -> Iterator[str]:
    proc = subprocess.Popen(
        [
            *(sys.executable, "-m", "gpubench_sagemaker.emulator", "--port", "0"),
            *("--inference-component", "gpubench-emulated-ic", "--min-workers", "1"),
        ],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, **ENV},
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
    plan = plan.replace('output = "gpubench-sagemaker-emulated.sqlite"', 'output = "out.sqlite"')
    config = tmp_path / "sagemaker.toml"
    config.write_text(plan)
    done = subprocess.run(
        [sys.executable, "-m", "gpubench_sdk", "run", str(config), "--quiet"],
        cwd=tmp_path,
        env={**os.environ, **ENV},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    secret = ENV["AWS_SECRET_ACCESS_KEY"]
    assert secret not in done.stdout + done.stderr
    assert secret not in (tmp_path / "out.sqlite").read_bytes().decode("latin-1")
    with Store(tmp_path / "out.sqlite") as store:
        (run,) = store.runs()
        invs = store.invocations(run.id)
    assert run.status == "completed"
    assert len(invs) == 2 * 3 + 30
    assert all(i.outcome is Outcome.OK and i.phase is Phase.MEASURE for i in invs)
    cold = [i for i in invs if i.scenario == 0 and i.cold]
    assert len(cold) == 2 and all(i.cold_confirmed for i in cold)
    for inv in cold:  # refused while the emulator booted a copy (0.5 s)
        assert inv.setup_ms is not None and inv.setup_ms >= 450
        assert inv.latency_ms >= inv.setup_ms
    warm = [i for i in invs if i.scenario == 0 and not i.cold]
    assert len(warm) == 4 and all(i.setup_ms is None for i in warm)
    control = boto3.client(
        "sagemaker",
        region_name="us-east-1",
        endpoint_url=emulator,
        aws_access_key_id=ENV["AWS_ACCESS_KEY_ID"],
        aws_secret_access_key=secret,
    )
    component = control.describe_inference_component(InferenceComponentName="gpubench-emulated-ic")
    assert component["RuntimeConfig"]["DesiredCopyCount"] == 1  # the user's copy count is back
