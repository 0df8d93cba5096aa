"""``gpubench run --dry-run``: counts, durations and costs before anything is sent; the counts
are what a real run sends."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import warnings
from collections import Counter
from pathlib import Path

import pytest
from _emulator import emulator
from _plans import local_plan

from gpubench_sdk import Store
from gpubench_sdk._plan._config import load_config
from gpubench_sdk.cost import StalePriceWarning
from gpubench_sdk.cost._dryrun import dry_run

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
# plans whose real run is cheap here (the embedded local runtime, a few seconds each; the
# RunPod example against its emulator)
RUN_FOR_REAL = ("thresholds.toml", "reference_report.toml", "runpod_emulated.toml")
RUNPOD_KEY = "rpa_dryrun_0c9b7a3e5d1f"

POISSON_PLAN = local_plan(
    """
[run]
name = "dry"

[workload]
kind = "probe"
sleep_ms = 5
""",
    """max_workers = 2
idle_timeout_s = 1.0
timeout_s = 5
price_per_s_usd = 0.001
""",
    """[[scenarios]]
kind = "rate"
rps = 40
duration_s = 1.5
arrivals = "poisson"
seed = 3
warmup = 2

[[scenarios]]
kind = "burst"
total = 15
concurrency = 3
warmup = 1
""",
)


def _plan_dry(path: Path):  # type: ignore[no-untyped-def]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", StalePriceWarning)
        return dry_run(load_config(path))


@pytest.mark.parametrize("plan", sorted(p.name for p in EXAMPLES.glob("*.toml")))
def test_every_example_plan_has_a_dry_run(plan: str) -> None:
    config = load_config(EXAMPLES / plan)
    if not config.targets:  # a campaign file, not a run plan
        pytest.skip("not a run plan")
    result = _plan_dry(EXAMPLES / plan)
    scenarios = config.build_scenarios()
    assert len(result.rows) == len(config.targets) * len(scenarios)
    for row in result.rows:
        assert row.requests > 0 and row.worst_s is not None
        if row.expected_usd is not None:
            assert row.worst_usd is not None and 0 <= row.expected_usd <= row.worst_usd
        name = getattr(scenarios[row.scenario], "name", None)  # labelled as the summary is
        assert row.label == f"{row.scenario}:{name or scenarios[row.scenario].kind}"


def _sent(store_path: Path) -> Counter[tuple[str, int]]:
    with Store(store_path, readonly=True) as store:
        invs = store.invocations(store.run("latest").id)
    return Counter((inv.target, inv.scenario) for inv in invs)


@pytest.mark.parametrize("plan", [*RUN_FOR_REAL, "poisson"])
def test_dry_run_counts_match_a_real_run(plan: str, tmp_path: Path) -> None:
    env = dict(os.environ)
    with contextlib.ExitStack() as stack:
        if plan == "poisson":
            path = tmp_path / "poisson.toml"
            path.write_text(POISSON_PLAN)
        elif plan == "runpod_emulated.toml":
            env["RUNPOD_API_KEY"] = RUNPOD_KEY
            args = ("--api-key-env", "RUNPOD_API_KEY")
            url = stack.enter_context(emulator("gpubench_runpod.emulator", *args, env=env))
            path = tmp_path / plan
            path.write_text((EXAMPLES / plan).read_text().replace("http://127.0.0.1:8686", url))
        else:
            path = EXAMPLES / plan
        expected = Counter({(r.target, r.scenario): r.requests for r in _plan_dry(path).rows})
        store = tmp_path / "real.sqlite"
        run = ["run", str(path), "--store", str(store), "--quiet"]
        done = subprocess.run(
            [sys.executable, "-m", "gpubench_sdk", *run],
            capture_output=True,
            text=True,
            timeout=240,
            env=env,
        )
    assert done.returncode in (0, 1), done.stderr  # 1: a threshold failed, still a full run
    assert _sent(store) == expected


def test_dry_run_cli_sends_nothing_and_prints_cost(tmp_path: Path) -> None:
    path = tmp_path / "p.toml"
    path.write_text(POISSON_PLAN.replace("max_workers = 2", "max_workers = 2\nmax_cost_usd = 1"))
    store = tmp_path / "none.sqlite"
    gpubench = [sys.executable, "-m", "gpubench_sdk"]
    done = subprocess.run(
        [*gpubench, "run", str(path), "--dry-run", "--store", str(store)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert "nothing sent" in done.stdout and "worst case $" in done.stdout
    assert "cap $1" in done.stdout and "duration: about" in done.stdout
    assert not store.exists()
