"""The shapes' report section: stages (latency and workers over time, scaling response per
change), sweep (throughput-latency curve, knee) and max_rate (trials), in every format."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from _scenario_fleet import FleetProvider, fleet_server, require_fair_measurement

from gpubench_sdk import EchoProbe, MaxRate, Runner, Stage, Stages, Store, Sweep
from gpubench_sdk._report import build_report, render
from gpubench_sdk.testing import Duration, FleetConfig

pytestmark = pytest.mark.anyio


async def test_report_draws_each_shape(tmp_path: Path) -> None:
    config = FleetConfig(cold_start=Duration.fixed(0.3), max_workers=2, idle_timeout_s=30)
    with fleet_server(config) as server:
        result = await Runner(
            {"fleet": FleetProvider(url=server.url)},
            EchoProbe(sleep_ms=40),
            [
                Stages(stages=(Stage(20, 0), Stage(20, 1.5)), window_s=0.3, name="step"),
                Sweep(duration_s=0.5, rates=2, max_concurrency=4),
                MaxRate(p95_ms=200, error_rate=0.05, start_rps=20, max_rps=40, trial_s=0.5),
            ],
            store=tmp_path / "r.sqlite",
            fleet_interval_s=0.05,
        ).run()
    with Store(tmp_path / "r.sqlite") as store:
        report = build_report(store, [result.run_id])
    html = render(report, "html")
    charts = re.findall(r'data-chart="([a-z-]+)"', html)
    assert {"stages-latency", "stages-workers", "sweep"} <= set(charts)
    assert html.count('data-kind="knee"') == 1
    require_fair_measurement(result)  # the figures below hold only on a machine not starved
    (change,) = report.tables["scaling_response"]
    assert change["scenario"] == "step" and change["to_rps"] == 20
    assert change["workers_steady"] == 2 and 0.25 <= change["workers_ready_s"] <= 1.0
    sweep = report.tables["sweep"]
    assert [r["step"] for r in sorted(sweep, key=lambda r: r["step"])] == [0, 1, 2, 3]
    assert sum(r["knee"] for r in sweep) == 1
    trials = report.tables["max_rate"]
    assert [round(r["rate_rps"]) for r in trials] == [20, 40]
    assert trials[-1]["max_rate_rps"] == pytest.approx(40, rel=0.01)

    assert "Stages: scaling response time" in html and "Highest rate within the SLO" in html
    data = json.loads(render(report, "json"))
    assert data["tables"]["scaling_response"][0]["baseline"] in ("before", "settled")
    timeline = data["series"]["stages_timeline"][0]
    assert len(timeline["t_s"]) == len(timeline["latency_ms"]) == 30
    assert max(timeline["workers"]) == 2
    assert "## scaling response" in render(report, "markdown")
