"""End to end: the example plan, run by the real ``gpubench`` CLI against the Hugging Face
emulator served by ``python -m gpubench_huggingface.emulator`` in its own process."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpubench_sdk.testing import CliEndToEnd

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "huggingface_emulated.toml"
KEY = "hf_e2e_3c9a7b5d1e"


@pytest.mark.slow
def test_gpubench_run_of_the_example_against_the_emulator(gpubench_cli: CliEndToEnd) -> None:
    gpubench_cli.env["HF_TOKEN"] = KEY
    url = gpubench_cli.emulator("gpubench_huggingface.emulator", "--api-key-env", "HF_TOKEN")
    done = gpubench_cli.run(EXAMPLE, replace={"http://127.0.0.1:8687": url})
    invs = done.measured(secret=KEY)
    with done.store() as store:
        tokens = store.token_times(done.run.id)
    assert len(invs) == 2 * 3 + 24
    cold = [i for i in invs if i.scenario == 0 and i.cold]
    assert len(cold) == 2 and all(i.cold_confirmed for i in cold)  # scaledToZero, then 503s
    for inv in cold:  # the time to ready covers the emulator's 0.5 s boot
        assert inv.setup_ms is not None and 450 <= inv.setup_ms <= 900
    warm = [i for i in invs if i.scenario == 0 and not i.cold]
    assert len(warm) == 4 and all(i.cold is False for i in warm)
    assert all(i.output_units == 16 for i in invs)  # TGI's details.generated_tokens
    assert len(tokens) == len(invs) and all(len(t) == 16 for t in tokens)
    assert len({i.request_id for i in invs}) == len(invs)
