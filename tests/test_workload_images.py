"""Image generation's parameters as the bill and the report group them: sizes and steps drawn
per request (seeded) and stored with it, refused by name when malformed; a target's bill
shared among groups by the worker time each took; and a priced run on the local runtime
printing latency and cost by image size, again in ``results show``, with the same table in
the report."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from gpubench_sdk import ConfigError, ImageGeneration, Invocation, Outcome, Phase, metrics
from gpubench_sdk.cost import RunCost, WorkerBill, split_bill, unit_costs


def test_sizes_and_steps_are_drawn_per_request_and_stored() -> None:
    image = ImageGeneration(sizes=["512x512", "1024x768"], steps=[10, 30], seed=4)
    requests = [image.request(seq) for seq in range(40)]
    sizes = {(r.payload["width"], r.payload["height"]) for r in requests}
    assert sizes == {(512, 512), (1024, 768)}
    assert {r.payload["num_inference_steps"] for r in requests} == {10, 30}
    first = requests[0]
    assert first.detail == {
        "requested": {
            "image_size": f"{first.payload['width']}x{first.payload['height']}",
            "steps": first.payload["num_inference_steps"],
            "images": 1,
        }
    }
    assert (
        ImageGeneration(sizes=["512x512", "1024x768"], steps=[10, 30], seed=4).request(7).payload
        == requests[7].payload
    )  # the same request in any process
    assert ImageGeneration().request(0).payload["width"] == 512  # width x height otherwise


@pytest.mark.parametrize(
    ("fields", "says"),
    [
        ({"sizes": ["512 by 512"]}, "WIDTHxHEIGHT"),
        ({"sizes": ["4x4"]}, "sides of 8 to 8192"),
        ({"steps": []}, "non-empty list"),
        ({"steps": 0}, "from 1 to 1000"),
    ],
)
def test_malformed_parameters_are_refused_by_name(fields: dict[str, object], says: str) -> None:
    with pytest.raises((ConfigError, ValueError), match=says):
        ImageGeneration(**fields)


def inv(seq: int, size: str, execution_ms: float) -> Invocation:
    return Invocation(
        target="t", scenario=0, seq=seq, phase=Phase.MEASURE, scheduled_ns=0, start_ns=0,
        end_ns=int((execution_ms + 5) * 1e6), wall_start_ns=0, outcome=Outcome.OK,
        execution_ms=execution_ms, input_units=1, output_units=1,
        detail={"requested": {"image_size": size, "steps": 20, "images": 1}},
    )  # fmt: skip


def test_a_bill_is_shared_by_the_worker_time_each_group_took() -> None:
    invocations = [inv(i, "512x512", 100.0) for i in range(3)]
    invocations += [inv(3 + i, "1024x1024", 400.0) for i in range(2)]
    bill = WorkerBill(cost_usd=1.1, raw_s=2.0, billed_s=2.0, seconds_by_phase={}, intervals=[])
    cost = RunCost("t", 5, 1, bill, 0.0, unit_costs(1.1, 5))
    groups = metrics.members(invocations, "image size")
    assert list(groups) == ["512x512", "1024x1024"]  # by pixels
    small, large = split_bill(cost, invocations, groups, units=("requests", "images"))
    assert small.cost_usd + large.cost_usd == pytest.approx(1.1)
    assert small.cost_usd == pytest.approx(1.1 * 300 / 1100)
    assert small.units.per_image_usd == pytest.approx(0.1)
    assert large.units.per_image_usd == pytest.approx(0.4)


PLAN = """
[workload]
kind = "image"
sizes = ["256x256", "1024x1024"]
steps = [4, 8]
seed = 2

[[targets]]
name = "local"
provider = "local"
max_workers = 1
idle_timeout_s = 30
price_per_s_usd = 0.0004

[[scenarios]]
kind = "burst"
total = 16
concurrency = 2
"""


@pytest.mark.slow
def test_a_priced_run_prints_latency_and_cost_by_image_size(tmp_path: Path) -> None:
    plan = tmp_path / "plan.toml"
    plan.write_text(PLAN)
    store = tmp_path / "i.sqlite"
    run = [sys.executable, "-m", "gpubench_sdk", "run", str(plan), "--store", str(store)]
    done = subprocess.run(run, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "local: bill by image size: 256x256 $" in done.stdout
    assert "per image" in done.stdout and "1024x1024 $" in done.stdout
    assert "p50 latency by image size: 256x256" in done.stdout
    assert "p50 latency by steps: 4 steps" in done.stdout
    show = [sys.executable, "-m", "gpubench_sdk", "results", "show", "latest", "--store"]
    shown = subprocess.run([*show, str(store)], capture_output=True, text=True, timeout=120)
    assert "p50 latency by image size: 256x256" in shown.stdout  # as the run printed it
    assert "local: bill by image size: 256x256 $" in shown.stdout
    report = tmp_path / "r.json"
    subprocess.run(
        [sys.executable, "-m", "gpubench_sdk", "report", "latest", "--store", str(store),
         "--format", "json", "-o", str(report)],
        check=True, capture_output=True, timeout=120,
    )  # fmt: skip
    tables = json.loads(report.read_text())["tables"]
    rows = [r for r in tables["cost_groups"] if r["grouping"] == "image size"]
    assert [r["group"] for r in rows] == ["256x256", "1024x1024"]
    assert sum(r["requests"] for r in rows) == 16
    total = sum(r["total_usd"] for r in tables["cost"])
    assert sum(r["total_usd"] for r in rows) == pytest.approx(total)
