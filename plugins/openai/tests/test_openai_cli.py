"""End to end: the example plan, run by the real ``gpubench`` CLI against the OpenAI emulator
served by ``python -m gpubench_openai.emulator`` in its own process."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from gpubench_sdk import Outcome
from gpubench_sdk.metrics import run_stream_metrics
from gpubench_sdk.testing import CliEndToEnd

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "openai_emulated.toml"
KEY = "sk-e2e-4c9a1b7d3f5e"


@pytest.mark.slow
def test_gpubench_run_of_the_example_against_the_emulator(gpubench_cli: CliEndToEnd) -> None:
    gpubench_cli.env.update(OPENAI_API_KEY=KEY, COLUMNS="250")
    url = gpubench_cli.emulator("gpubench_openai.emulator", "--api-key-env", "OPENAI_API_KEY",
                                "--tokens-per-s", "100")  # fmt: skip
    assert url.endswith("/v1"), url
    done = gpubench_cli.run(EXAMPLE, replace={"http://127.0.0.1:8000/v1": url}, args=())
    assert done.returncode == 0, done.stderr
    assert KEY not in done.output
    assert "TTFT p50 ms" in done.stdout and "ITL p50 ms" in done.stdout
    run, invs = done.run, done.invocations
    with done.store() as store:
        stream = run_stream_metrics(store, run, target="vllm-emu")
    assert run.status == "completed" and len(invs) == 12
    assert all(i.outcome is Outcome.OK for i in invs)
    assert all(i.output_units == 32 and i.input_units == 257 for i in invs)  # from usage
    assert all(len(i.token_times_ns or ()) == 32 for i in invs)
    # 100 tokens/s: the gaps between tokens are ~10 ms; cold starts (0.5 s) are in TTFT only
    assert 7 <= float(np.median(stream.itl_ms)) <= 20
    assert float(stream.ttft_ms.max()) >= 500 > float(np.median(stream.itl_ms))
