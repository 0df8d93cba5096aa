"""``gpubench cost whatif --from-run``: measured cold starts and execution, and how sensitive the
answer is to them (an interval from bootstrap resamples)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from _invocations import begin_burst_run, measured
from click.testing import CliRunner

from gpubench_sdk import Store
from gpubench_sdk._cli import main
from gpubench_sdk.cost import BillingModel, poisson_arrivals, sweep
from gpubench_sdk.cost._sensitivity import sweep_sensitivity

BILLING = BillingModel(granularity_s=1.0)


def _spread(exec_s: np.ndarray, cold_s: np.ndarray):  # type: ignore[no-untyped-def]
    arrivals = poisson_arrivals(0.02, 3600, seed=4)
    kw = dict(
        billing=BILLING,
        rate_usd_per_s=0.001,
        scale_down_s=[10, 120],
        min_workers=[0],
        max_workers=4,
    )
    result = sweep(
        arrivals, execution_s=exec_s, cold_start_s=cold_s, slo_latency_s=1e9, seed=1, **kw
    )
    return result, sweep_sensitivity(
        arrivals, result, execution_s=exec_s, cold_start_s=cold_s, resamples=12, seed=1, **kw
    )


def test_the_interval_widens_with_the_spread_of_the_samples() -> None:
    rng = np.random.default_rng(0)
    narrow = rng.normal(2.0, 0.01, 30).clip(0.1)
    wide = rng.lognormal(np.log(2.0), 1.0, 30)
    cold = np.full(10, 20.0)
    result, tight = _spread(narrow, cold)
    _, loose = _spread(wide, cold)
    assert tight is not None and loose is not None and result.best is not None
    assert tight.cost_usd[0] <= result.best.cost_usd * 1.05
    assert tight.cost_usd[1] >= result.best.cost_usd * 0.95
    width = lambda s: s.cost_usd[1] - s.cost_usd[0]  # noqa: E731
    assert width(loose) > 2 * width(tight)
    assert 0 <= loose.same_best <= 1 and loose.latency_s[0] <= loose.latency_s[1]


def _measured_run(path: Path) -> None:
    rng = np.random.default_rng(2)
    with Store(path) as store:
        run = begin_burst_run(store, "measured")
        for seq in range(40):
            cold = seq % 5 == 0
            exec_ms = float(rng.lognormal(np.log(800), 0.5))
            setup_ms = float(rng.normal(15_000, 3_000)) if cold else None
            latency_s = (exec_ms + (setup_ms or 0)) / 1e3
            fields = {"cold": cold, "execution_ms": exec_ms, "setup_ms": setup_ms}
            store.append(run.id, measured(seq, seq * 30, latency_s, **fields))
        store.end_run(run.id, "completed")


def test_cli_whatif_from_run_prints_the_interval(tmp_path: Path) -> None:
    path = tmp_path / "m.sqlite"
    _measured_run(path)
    args = ["cost", "whatif", "-t", "runpod:A100 80GB", "--from-run", "latest"]
    args += ["--run-target", "t", "--store", str(path), "--scale-down", "5,60", "--resamples", "8"]
    done = CliRunner().invoke(main, args)
    assert done.exit_code == 0, done.output
    assert "random first" in done.output  # RunPod's stated worker policy
    assert "8 bootstrap resamples" in done.output and "the same setting chosen in" in done.output
    off = CliRunner().invoke(main, [*args[:-2], "--resamples", "0"])
    assert off.exit_code == 0 and "bootstrap" not in off.output
