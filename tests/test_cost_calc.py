"""Calculators: the reference report's daily bill, unit costs, break-even, measured runs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from _invocations import begin_burst_run
from _invocations import measured as _inv

from gpubench_sdk import ConfigError, Store
from gpubench_sdk.cost import (
    BillingModel,
    break_even,
    load_catalog,
    price_worker_intervals,
    replay_worker_intervals,
    run_cost,
    scenario_bill,
    unit_costs,
)
from gpubench_sdk.cost._reference import REFERENCE_LINES

# The reference report, "Scenario 1 - Llama 2-7Bn": rate, then the total it printed.
REPORT = {
    "Hugging Face": (0.108333333 / 60, 39.957),
    "Replicate": (0.0014, 41.44),
    "Runpod": (0.000552777, 11.4),
    "Inferless V1": (0.000745, 13.964),
    "Inferless V2": (0.000745, 13.919),
}


def _reference(line_label: str, *, rules: bool, cold_start_s: float) -> float:
    rate, _ = REPORT[line_label]
    provider = next(r.billing for r in REFERENCE_LINES if r.label == line_label)
    return scenario_bill(
        label=line_label,
        billing=load_catalog().billing_model(provider),
        rate_usd_per_s=rate,
        requests_per_day=1000,
        inference_s=12,
        scale_down_s=60,
        scale_down_events=100,
        cold_start_s=cold_start_s,
        round_per_interval=rules,
        enforce_min_scale_down=rules,
    ).total_usd


@pytest.mark.parametrize("label", list(REPORT))
def test_reference_report_totals_reproduced_with_its_method(label: str) -> None:
    rate, total = REPORT[label]
    # the cold start the report's total implies: total = rate x (12,000 + 4,800 + 100 x cold)
    implied = round((total / rate - 12_000 - 4_800) / 100, 2)
    assert implied == next(r.cold_start_s for r in REFERENCE_LINES if r.label == label)
    got = _reference(label, rules=False, cold_start_s=implied)
    decimals = len(str(total).split(".")[1])  # the report's own rounding
    assert round(got, decimals) == total


def test_billing_rules_change_the_reference_figures_as_computed_by_hand() -> None:
    # RunPod: per worker life (12,000 + 4,800 + 3,823) / 100 = 206.23 s -> 207 s x 100
    assert _reference("Runpod", rules=True, cold_start_s=38.23) == pytest.approx(
        20_700 * 0.000552777
    )
    # Hugging Face: 15 min is its default delay, not a minimum, so the scenario's 60 s holds;
    # per life 120 + 48 + 53.3 = 221.3 s -> 4 minutes = 240 s, x 100 lives
    hf = _reference("Hugging Face", rules=True, cold_start_s=53.30)
    assert hf == pytest.approx(24_000 * 0.108333333 / 60)


def test_request_billing_rounds_each_request() -> None:
    public = load_catalog().billing_model("replicate/public")
    bill = scenario_bill(
        label="r",
        billing=public,
        rate_usd_per_s=0.0014,
        requests_per_day=1000,
        inference_s=12.3,
        scale_down_s=60,
        scale_down_events=100,
        cold_start_s=128,
    )
    assert bill.billed_s == 13_000  # 12.3 s -> 13 s each, no idle, no cold boot
    assert bill.total_usd == pytest.approx(13_000 * 0.0014)
    assert bill.per_1k_requests_usd == pytest.approx(bill.total_usd)


@pytest.mark.parametrize(("field", "bad"), [("scale_down_events", 0), ("inference_s", -1)])
def test_scenario_rejects_bad_input_naming_the_field(field: str, bad: float) -> None:
    good: dict[str, Any] = {
        "rate_usd_per_s": 1,
        "requests_per_day": 1,
        "inference_s": 1,
        "scale_down_s": 1,
        "scale_down_events": 1,
        "cold_start_s": 0,
    }
    with pytest.raises(ConfigError, match=field):
        scenario_bill(label="x", billing=BillingModel(), **{**good, field: bad})


def test_unit_costs() -> None:
    u = unit_costs(12.0, 4000, output_tokens=3_000_000, images=600)
    assert (u.per_request_usd, u.per_1k_requests_usd) == (0.003, 3.0)
    assert u.per_million_output_tokens_usd == 4.0
    assert u.per_image_usd == 0.02
    assert unit_costs(1.0, 0).per_request_usd is None


def test_break_even_of_an_always_on_worker() -> None:
    # active worker at 0.00057/s vs on demand 0.00076/s: break-even at 75% of the day
    b = break_even(on_demand_usd_per_s=0.00076, reserved_usd_per_s=0.00057, billed_s_per_request=12)
    assert not b.never
    assert b.reserved_usd_per_day == pytest.approx(0.00057 * 86_400)
    assert b.utilization == pytest.approx(0.75)
    assert b.billed_s_per_day == pytest.approx(64_800)
    assert b.requests_per_day == pytest.approx(5_400)
    with pytest.raises(ConfigError, match="on_demand_usd_per_s"):
        break_even(on_demand_usd_per_s=0, reserved_usd_per_s=1)


def test_replay_reuses_warm_workers_and_boots_new_ones() -> None:
    # t=0 cold (boot 2 s, run 1 s, ends 3); t=4 warm on worker 0 (gap 1 s < 5 s delay);
    # t=4.5 overlaps -> a second worker boots; t=20: both idled out -> a third worker
    ivs = replay_worker_intervals([0, 4, 4.5, 20], [1, 1, 1, 1], [2, 2, 2, 2], scale_down_s=5)
    workers = {iv.worker for iv in ivs}
    assert workers == {0, 1, 2}
    boots = sorted(iv.start_s for iv in ivs if iv.phase == "cold_boot")
    assert boots == [0, 4.5, 20]
    # worker 0: boot 0-2, run 2-3, idle 3-4, run 4-5, idle 5-10 -> 10 s in one interval
    bill = price_worker_intervals([iv for iv in ivs if iv.worker == 0], BillingModel(), 1.0)
    assert (bill.billed_s, bill.intervals) == (10.0, 1)


def test_run_cost_from_stored_invocations(tmp_path: Path) -> None:
    with Store(tmp_path / "r.sqlite") as store:
        run = begin_burst_run(store, "priced")
        # cold: 3.5 s seen by the client, 0.5 s of it execution -> 3 s boot (setup not given)
        store.append(run.id, _inv(0, 0.0, 3.5, execution_ms=500.0, cold=True, output_units=100))
        store.append(run.id, _inv(1, 10.0, 0.6, execution_ms=400.0, cold=False, output_units=100))
        store.flush()
        cost = run_cost(
            store,
            run.id,
            "t",
            billing=BillingModel(default_idle_timeout_s=20),
            rate_usd_per_s=0.001,
        )
    # one worker: boot 0-3, run 3-3.5, idle 3.5-10, run 10-10.4, idle 10.4-30.4 -> 30.4 -> 31 s
    assert cost.workers == 1
    assert cost.bill.billed_s == 31.0
    assert cost.total_usd == pytest.approx(0.031)
    assert cost.units.per_million_output_tokens_usd == pytest.approx(0.031 / 200 * 1e6)


def test_replay_follows_what_the_run_observed() -> None:
    # t=0 cold (boot 2, run 1: ends 3); t=1 seen warm while worker 0 boots: it queued, 3-4;
    # t=30 seen warm after a 26 s gap (> 5 s delay): the platform kept worker 0 up
    ivs = replay_worker_intervals([0, 1, 30], [1, 1, 1], [2, 0, 0], 5, cold=[1, 0, 0])
    assert {iv.worker for iv in ivs} == {0}
    runs = sorted((iv.start_s, iv.end_s) for iv in ivs if iv.phase == "execution")
    assert runs == [(2, 3), (3, 4), (30, 31)]
    # seen cold although a warm worker was idle: a new worker booted
    ivs = replay_worker_intervals([0, 2], [1, 1], [0.5, 0.5], 60, cold=[1, 1])
    assert {iv.worker for iv in ivs} == {0, 1}
