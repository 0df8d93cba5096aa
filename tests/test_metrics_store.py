"""The metrics adapters over a stored run, the run summary, the CLI, and the example script."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
from test_cli import gpubench, run_example

from gpubench_sdk import FleetState, Invocation, Outcome, Phase, Store, metrics, summarize
from gpubench_sdk._store._store import RunInfo, ScenarioRecord, TargetRecord

WALL0 = 1_767_225_600 * 10**9  # 2026-01-01T00:00Z
MS = 1_000_000


def inv(
    target: str, scenario: int, seq: int, t_ms: float, service_ms: float, **kw: object
) -> Invocation:
    start = int(t_ms * MS)
    fields: dict[str, object] = {
        "target": target,
        "scenario": scenario,
        "seq": seq,
        "phase": Phase.MEASURE,
        "scheduled_ns": start,
        "start_ns": start,
        "end_ns": start + int(service_ms * MS),
        "wall_start_ns": WALL0 + start,
        "outcome": Outcome.OK,
        "cold": False,
    }
    fields.update(kw)
    return Invocation(**fields)  # type: ignore[arg-type]


def build(path: Path) -> tuple[Store, RunInfo]:
    store = Store(path)
    run = store.begin_run(
        name="metrics",
        config={},
        targets=(TargetRecord("a", "local", {}, ()), TargetRecord("b", "local", {}, ())),
        scenarios=(ScenarioRecord("cold_starts", {}), ScenarioRecord("burst", {})),
        origin_ns=0,
        started_wall_ns=WALL0,
    )
    for k, target in enumerate("ab"):
        boot = 2_000 + 1_000 * k
        for i in range(3):  # one confirmed cold start, then two warm requests
            t = i * 60_000.0
            phases = {"execution_ms": 100.0, "queue_ms": boot + 20.0, "setup_ms": float(boot)}
            cold = inv(target, 0, 3 * i, t, boot + 150, cold=True, cold_confirmed=True, **phases)
            store.append(run.id, cold)
            store.append(run.id, inv(target, 0, 3 * i + 1, t + 5_000, 130, execution_ms=100.0))
            store.append(run.id, inv(target, 0, 3 * i + 2, t + 6_000, 135, execution_ms=100.0))
        for i in range(100):  # b is 50 ms slower and grows 1 ms per request
            latency = 100 + (50 + i if target == "b" else (i % 7))
            outcome = Outcome.THROTTLED if target == "b" and i % 25 == 0 else Outcome.OK
            t = 200_000 + i * 20.0
            store.append(
                run.id, inv(target, 1, 100 + i, t, latency, outcome=outcome, output_units=10)
            )
        for j, ready in enumerate([0, 1, 2, 4, 4]):
            store.append_fleet(run.id, target, 200_000 * MS + j * 500 * MS, FleetState(ready=ready))
    store.flush()
    return store, run


def test_adapters_read_a_stored_run(tmp_path: Path) -> None:
    store, run = build(tmp_path / "m.sqlite")
    with store:
        cs = metrics.run_cold_starts(store, run.id, target="a", scenario=0)
        assert cs.cold_start_ms.tolist() == [2_050.0] * 3  # 2150 service - 100 execution
        assert cs.boot_ms.tolist() == [2_000.0] * 3 and cs.scheduling_ms.tolist() == [20.0] * 3
        assert cs.transfer_ms.tolist() == [30.0] * 3 and cs.confirmed.all() and not cs.inferred
        assert cs.rate.rate == pytest.approx(1 / 3)

        s = metrics.latency_summary(store, "latest", target="b", scenario=1)
        b_lat = np.array([150 + i for i in range(100) if i % 25])
        assert s.count == 96 and s.p95_ms == pytest.approx(np.quantile(b_lat, 0.95))

        burst = metrics.run_burst(store, run, target="b", scenario=1)
        assert burst.by_index.slope == pytest.approx(1.0, rel=0.05)  # over index among all sent
        assert burst.by_index.pearson_r > 0.99

        tp = metrics.run_throughput(
            store, run, target="b", scenario=1, slo=metrics.SLO(latency_ms=200)
        )
        assert tp.ok == 96 and tp.good == sum(1 for x in b_lat if x <= 200)
        assert tp.units_per_s == pytest.approx(960 / tp.duration_s)

        up = metrics.run_scale_up(store, run, target="a")
        assert up.peak_ready == 4 and up.time_to_target_s == pytest.approx(1.5)

        c = metrics.compare_targets(store, run, "a", "b", scenario=1)
        assert c.verdict.startswith("a is faster at p95 by") and c.rank_test.p_value < 1e-6

        curve = metrics.run_keep_warm(store, run, target="a", scenario=0)
        assert curve.count.sum() == 8  # every request but the first has an idle gap
        assert curve.p_cold[-1] == 1.0 and curve.p_cold[0] == 0.0  # cold after the 54 s gaps

        v = metrics.daily_cold_starts(store, [run.id], target="b")
        assert [d.day for d in v.days] == ["2026-01-01"] and v.range_ms == 0


def test_run_summary_carries_the_new_figures(tmp_path: Path) -> None:
    store, run = build(tmp_path / "m.sqlite")
    with store:
        rows = {(r.target, r.scenario): r for r in summarize(store, run)}
    cold = rows[("a", "0:cold_starts")]
    assert cold.cold_samples == cold.cold_confirmed == 3 and cold.cold_rate == pytest.approx(1 / 3)
    assert cold.cold_start_p50_ms == 2_050 and not cold.cold_start_inferred
    burst = rows[("b", "1:burst")]
    assert burst.errors == {"throttled": 4} and burst.ok == 96
    assert burst.p90_ms == pytest.approx(np.quantile([150 + i for i in range(100) if i % 25], 0.9))
    assert burst.p50_ci_ms[0] <= burst.p50_ms <= burst.p50_ci_ms[1]
    assert burst.cv > 0 and math.isnan(burst.cold_start_p50_ms) and burst.cold_rate == 0


def test_cli_results_show_and_compare(tmp_path: Path) -> None:
    store, _ = build(tmp_path / "m.sqlite")
    store.close()
    at = ("--store", str(tmp_path / "m.sqlite"))
    shown = gpubench("results", "show", *at)
    assert shown.returncode == 0, shown.stderr
    for part in ("p50 ms (95% CI)", "p90 ms", "CV", "cold rate", "33%", "2050.0"):
        assert part in shown.stdout
    data = json.loads(
        gpubench("results", "show", "--json", *at).stdout,
        parse_constant=lambda c: pytest.fail(f"{c} is not JSON"),
    )
    assert data["summary"][0]["cold_rate"] == pytest.approx(1 / 3)
    compared = gpubench("results", "compare", "a", "b", *at)
    assert compared.returncode == 0, compared.stderr
    assert "1:burst: a (run 1) is faster at p95 by" in compared.stdout  # which run, too
    as_json = gpubench("results", "compare", "a", "b", "--scenario", "1", "--json", *at)
    (entry,) = json.loads(as_json.stdout)
    assert entry["scenario"] == "1:burst" and entry["p95"]["diff_ms"] > 0
    bad = gpubench("results", "compare", "a", "zz", *at)
    assert (
        bad.returncode == 2
        and "TARGET_B: got 'zz'; expected a target of run 1 (a, b)" in bad.stderr
    )
    bad_scenario = gpubench("results", "compare", "a", "b", "--scenario", "7", *at)
    assert bad_scenario.returncode == 2 and "--scenario" in bad_scenario.stderr


def test_examples_metrics_notebook_runs_and_reads_back(tmp_path: Path) -> None:
    store = str(tmp_path / "nb.sqlite")
    proc = run_example("metrics_notebook.py", store)
    assert proc.returncode == 0, proc.stderr
    tags = (
        "[summary] wide",
        "[cold start] narrow",
        "[burst]",
        "[compare]",
        "[histogram]",
        "[score]",
    )
    for tag in tags:
        assert tag in proc.stdout
    again = run_example("metrics_notebook.py", store, "--run", "latest")
    assert again.returncode == 0, again.stderr
    summary = [line for line in proc.stdout.splitlines() if line.startswith("[summary]")]
    assert summary == [line for line in again.stdout.splitlines() if line.startswith("[summary]")]
