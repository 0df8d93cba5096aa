"""End to end: examples/fal_baseten_emulated.toml (fal, Baseten and the local runtime), run by
the real ``gpubench`` CLI against the fal and Baseten emulators, each served by its own
``python -m ... emulator`` process. The run prints each target's estimated bill."""

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

pytest.importorskip("gpubench_fal")
pytest.importorskip("gpubench_baseten")

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "fal_baseten_emulated.toml"
KEYS = {"FAL_KEY": "fal_e2e_key_3b9d1c77", "BASETEN_API_KEY": "bt_e2e_key_8c2a5e19"}


def _emulator(stack: ExitStack, module: str, key_env: str) -> str:
    return stack.enter_context(
        emulator(module, "--api-key-env", key_env, env=KEYS, expect="http://127.0.0.1:")
    )


@pytest.fixture
def emulators() -> Iterator[tuple[str, str]]:
    with ExitStack() as stack:
        fal = _emulator(stack, "gpubench_fal.emulator", "FAL_KEY")
        baseten = _emulator(stack, "gpubench_baseten.emulator", "BASETEN_API_KEY")
        yield fal, baseten


@pytest.mark.slow
def test_the_example_runs_and_prints_a_cost_per_target(
    emulators: tuple[str, str], tmp_path: Path
) -> None:
    fal, baseten = emulators
    plan = EXAMPLE.read_text()
    plan = plan.replace("http://127.0.0.1:8787", fal).replace("http://127.0.0.1:8788", baseten)
    plan = plan.replace('output = "gpubench-fal-baseten.sqlite"', 'output = "out.sqlite"')
    config = tmp_path / "plan.toml"
    config.write_text(plan)
    env = {**os.environ, **KEYS, "COLUMNS": "200"}
    done = gpubench("run", str(config), "--quiet", timeout=300, cwd=tmp_path, env=env)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    printed = done.stdout + done.stderr
    assert not any(key in printed for key in KEYS.values())
    # the estimated bill: one row per target with a positive total
    bill = printed[printed.index("estimated bill") :]
    for target in ("fal-emu", "baseten-emu", "local"):
        row = next(line for line in bill.splitlines() if f" {target} " in line)
        totals = [float(x) for x in re.findall(r"\d+\.\d{6}", row)]
        assert totals and totals[0] > 0, row
    with Store(tmp_path / "out.sqlite") as store:
        (run,) = store.runs()
        invs = store.invocations(run.id)
        raw = (tmp_path / "out.sqlite").read_bytes().decode("latin-1")
    assert run.status == "completed"
    assert not any(key in raw for key in KEYS.values())
    assert len(invs) == 3 * (2 * 3 + 24)
    assert all(i.outcome is Outcome.OK for i in invs)
    by_target = {
        t: [i for i in invs if i.target == t and i.scenario == 0]
        for t in ("fal-emu", "baseten-emu", "local")
    }
    # fal: no control plane, the queue wait marks the cold request (inferred, not confirmed)
    fal_cold = [i for i in by_target["fal-emu"] if i.cold]
    assert len(fal_cold) == 2 and not any(i.cold_confirmed for i in fal_cold)
    assert all(i.queue_ms is not None and i.queue_ms >= 300 for i in fal_cold)
    # Baseten: min_replica 0, then active_replica_count 0 seen through the management API
    bt_cold = [i for i in by_target["baseten-emu"] if i.cold]
    assert len(bt_cold) == 2 and all(i.cold_confirmed for i in bt_cold)
    assert all(i.execution_ms is not None for i in invs if i.target == "fal-emu")
