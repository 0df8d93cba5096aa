"""End to end: ``examples/serverless_field_emulated.toml`` (Azure Container Apps, Modal, fal,
Baseten and the local runtime in one plan), run by the real ``gpubench`` CLI against the four
emulators, each in its own ``python -m ...emulator`` process. Every target completes, the run
ends with a bill per target, and no secret is printed or stored."""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path

import pytest
from _emulator import emulator
from test_cli import gpubench

from gpubench_sdk import Outcome, Store

for _plugin in ("gpubench_azure", "gpubench_modal", "gpubench_fal", "gpubench_baseten"):
    pytest.importorskip(_plugin)

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "serverless_field_emulated.toml"
SECRETS = {
    "AZURE_ARM_TOKEN": "arm-field-4c8e2a9f1d",
    "AZURE_INGRESS_KEY": "aca-field-7b1d3e5f9a",
    "MODAL_PROXY_TOKEN": "wk-field3a7c:ws-field9e2b6d",
    "FAL_KEY": "fal_field_key_5d2e8a41",
    "BASETEN_API_KEY": "bt_field_key_1f6c9b37",
}
TARGETS = ("aca-t4", "modal-l40s", "fal-emu", "baseten-emu", "local")


def _start(stack: ExitStack, module: str, *args: str) -> str:
    return stack.enter_context(emulator(module, *args, env=SECRETS, expect=None))


@pytest.fixture
def plan(tmp_path: Path) -> Iterator[Path]:
    tls = tmp_path / "tls"
    with ExitStack() as stack:
        azure = _start(
            stack, "gpubench_azure.emulator", "--tls-dir", str(tls),
            "--arm-token-env", "AZURE_ARM_TOKEN", "--api-key-env", "AZURE_INGRESS_KEY",
            "--idle-timeout-s", "5",
        )  # fmt: skip
        modal = _start(
            stack, "gpubench_modal.emulator", "--api-key-env", "MODAL_PROXY_TOKEN",
            "--redirect-after-s", "0.3",
        )  # fmt: skip
        fal = _start(stack, "gpubench_fal.emulator", "--api-key-env", "FAL_KEY")
        baseten = _start(stack, "gpubench_baseten.emulator", "--api-key-env", "BASETEN_API_KEY")
        assert azure.startswith("https://127.0.0.1:"), azure
        for url in (modal, fal, baseten):
            assert url.startswith("http://127.0.0.1:"), url
        text = (
            EXAMPLE.read_text()
            .replace("https://127.0.0.1:8689", azure)
            .replace("/tmp/gpubench-aca-tls/ca.pem", str(tls / "ca.pem"))
            .replace("http://127.0.0.1:8690", modal)
            .replace("http://127.0.0.1:8787", fal)
            .replace("http://127.0.0.1:8788", baseten)
            .replace('output = "gpubench-serverless-field.sqlite"', 'output = "out.sqlite"')
        )
        path = tmp_path / "plan.toml"
        path.write_text(text)
        yield path


@pytest.mark.slow
def test_one_plan_runs_the_four_providers_and_the_local_runtime(plan: Path, tmp_path: Path) -> None:
    env = {**os.environ, **SECRETS, "COLUMNS": "220"}
    done = gpubench("run", str(plan), "--quiet", timeout=300, cwd=tmp_path, env=env)
    printed = done.stdout + done.stderr
    assert done.returncode == 0, printed[-3000:]
    leaked = [name for name, value in SECRETS.items() if value in printed]
    assert not leaked and "ws-field9e2b6d" not in printed
    bill = printed[printed.index("estimated bill") :]
    for target in TARGETS:
        row = next(line for line in bill.splitlines() if f" {target} " in line)
        totals = [float(x) for x in re.findall(r"\d+\.\d{6}", row)]
        assert totals and totals[0] > 0, row  # a positive bill for every target
    stored = (tmp_path / "out.sqlite").read_bytes().decode("latin-1")
    assert not [name for name, value in SECRETS.items() if value in stored]
    with Store(tmp_path / "out.sqlite") as store:
        (run,) = store.runs()
        invs = store.invocations(run.id)
    assert run.status == "completed"
    for target in TARGETS:
        mine = [i for i in invs if i.target == target]
        assert len(mine) == 2 * 3 + 20, target  # 2 cold + 2 warm-after each, then the burst
        assert all(i.outcome is Outcome.OK for i in mine), target
        assert any(i.cold for i in mine if i.scenario == 0), target  # each saw a cold start
