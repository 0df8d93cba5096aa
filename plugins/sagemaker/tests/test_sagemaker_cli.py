"""End to end: the example plan, run by the real ``gpubench`` CLI against the SageMaker
emulator served by ``python -m gpubench_sagemaker.emulator`` in its own process, with the
credentials in the environment as boto3's chain reads them."""

from __future__ import annotations

from pathlib import Path

import boto3
import pytest

from gpubench_sdk.testing import CliEndToEnd

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "sagemaker_emulated.toml"
ENV = {
    "AWS_ACCESS_KEY_ID": "AKIAEMULATEDE2E00001",
    "AWS_SECRET_ACCESS_KEY": "e2e-secret-5c0d8e2f9a1b",
}


@pytest.mark.slow
def test_gpubench_run_of_the_example_against_the_emulator(gpubench_cli: CliEndToEnd) -> None:
    gpubench_cli.env.update(ENV)
    emulator = gpubench_cli.emulator("gpubench_sagemaker.emulator", "--inference-component",
                                     "gpubench-emulated-ic", "--min-workers", "1")  # fmt: skip
    done = gpubench_cli.run(EXAMPLE, replace={"http://127.0.0.1:8688": emulator})
    secret = ENV["AWS_SECRET_ACCESS_KEY"]
    invs = done.measured(secret=secret)
    assert secret not in done.store_path.read_bytes().decode("latin-1")
    assert len(invs) == 2 * 3 + 30
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
