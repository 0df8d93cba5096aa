"""End to end: ``examples/azure_modal_emulated.toml`` (Azure Container Apps, Modal and the
local runtime), run by the real ``gpubench`` CLI against both emulators, each served by its
own ``python -m ...emulator`` process; the summary ends with a cost per target."""

from __future__ import annotations

import re
import ssl
from pathlib import Path
from typing import Any

import httpx
import pytest

from gpubench_sdk import Outcome, Phase
from gpubench_sdk.testing import CliEndToEnd

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "azure_modal_emulated.toml"
SECRETS = {
    "AZURE_ARM_TOKEN": "arm-e2e-3f9a1c7d5b",
    "AZURE_INGRESS_KEY": "aca-e2e-8b2d4f6a1c",
    "MODAL_PROXY_TOKEN": "wk-e2e7c3a9:ws-e2e5d1b8f2",
}
APP = (
    "/subscriptions/00000000-0000-0000-0000-000000000000/resourceGroups/gpubench"
    "/providers/Microsoft.App/containerApps/llama?api-version=2026-07-01"
)


@pytest.mark.slow
def test_the_example_runs_all_three_and_prints_a_cost_per_target(
    gpubench_cli: CliEndToEnd, tmp_path: Path
) -> None:
    gpubench_cli.env.update(SECRETS)
    tls = tmp_path / "tls"
    azure_url = gpubench_cli.emulator(
        "gpubench_azure.emulator",
        *("--tls-dir", str(tls), "--arm-token-env", "AZURE_ARM_TOKEN"),
        *("--api-key-env", "AZURE_INGRESS_KEY"),
        *("--idle-timeout-s", "5"),  # the app's cooldownPeriod: the plan's cold_cooldown_s is 1
    )
    modal_url = gpubench_cli.emulator("gpubench_modal.emulator", "--api-key-env",
                                      "MODAL_PROXY_TOKEN", "--redirect-after-s", "0.3")  # fmt: skip
    assert azure_url.startswith("https://127.0.0.1:"), azure_url
    ca = tls / "ca.pem"
    trust = ssl.create_default_context(cafile=str(ca))
    bearer = {"Authorization": "Bearer arm-e2e-3f9a1c7d5b"}
    before = httpx.get(azure_url + APP, verify=trust, headers=bearer).json()

    done = gpubench_cli.run(EXAMPLE, replace={
        "https://127.0.0.1:8689": azure_url,
        "http://127.0.0.1:8690": modal_url,
        "/tmp/gpubench-aca-tls/ca.pem": str(ca),
    })  # fmt: skip
    assert done.returncode == 0, done.stderr
    printed = done.output
    assert not [name for name, value in SECRETS.items() if value in printed]
    assert "ws-e2e5d1b8f2" not in printed and "wk-e2e7c3a9" not in printed
    bill = printed[printed.index("estimated bill") :]
    for target in ("aca-t4", "modal-l40s", "local"):
        row = next(line for line in bill.splitlines() if f" {target} " in line)
        assert re.search(r"│ +\d+\.\d{6} │", row), row  # total $ of that target
    run, invs = done.run, done.invocations
    assert run.status == "completed"
    for target in ("aca-t4", "modal-l40s", "local"):
        mine = [i for i in invs if i.target == target]
        assert len(mine) == 2 * 3 + 20, target
        assert all(i.outcome is Outcome.OK and i.phase is Phase.MEASURE for i in mine), target
    aca_cold = [i for i in invs if i.target == "aca-t4" and i.scenario == 0 and i.cold]
    assert len(aca_cold) == 2 and all(i.cold_confirmed for i in aca_cold)  # replicas listed 0
    assert all(i.latency_ms >= 450 for i in aca_cold)  # the emulator boots in 0.5 s
    modal_cold = [i for i in invs if i.target == "modal-l40s" and i.scenario == 0 and i.cold]
    assert modal_cold and not any(i.cold_confirmed for i in modal_cold)  # inferred only
    assert all(i.request_id for i in invs if i.target == "modal-l40s")  # the call ids
    after = httpx.get(azure_url + APP, verify=trust, headers=bearer).json()
    scale = "properties", "template", "scale"
    assert _at(before, scale)["cooldownPeriod"] == 5
    assert _at(after, scale) == _at(before, scale)  # cooldownPeriod 1 while cold, then put back
    # each change rolled a revision (the cold starts' minReplicas/cooldown, then the restore)
    revision = "properties", "latestRevisionName"
    assert _at(after, revision) != _at(before, revision)


def _at(document: Any, path: tuple[str, ...]) -> Any:
    for key in path:
        document = document[key]
    return document
