"""The budget guard: a live cost meter per target that stops a run before it passes its cap."""

from __future__ import annotations

import subprocess
import sys
import warnings
from pathlib import Path

import pytest

from gpubench_sdk import ConfigError, Invocation, Outcome, Phase, Store
from gpubench_sdk._config import parse_config
from gpubench_sdk.cost import BillingModel, BudgetGuard, CostMeter, StalePriceWarning
from gpubench_sdk.cost._meter import budget_guard

PLAN = """
[run]
name = "guarded"

[workload]
kind = "probe"
sleep_ms = 50

[[targets]]
name = "loc"
provider = "local"
handler = "gpubench_sdk._local.demo:echo"
load = ""
max_workers = 2
idle_timeout_s = 2.0
timeout_s = 2.0
price_per_s_usd = 1.0   # notional: the local runtime is free
max_cost_usd = 4.0

[[scenarios]]
kind = "burst"
total = 400
concurrency = 2
"""


def gpubench(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "gpubench_sdk", *args], capture_output=True, text=True, timeout=180
    )


def test_run_against_the_local_runtime_stops_before_its_cap(tmp_path: Path) -> None:
    plan = tmp_path / "plan.toml"
    plan.write_text(PLAN)
    store_path = tmp_path / "g.sqlite"
    done = gpubench("run", str(plan), "--store", str(store_path), "--quiet")
    assert done.returncode == 0, done.stderr
    assert "max_cost_usd reached for target loc" in done.stdout
    assert "estimated bill" in done.stdout  # the run's own report prices each priced target
    with Store(store_path, readonly=True) as store:
        invs = store.invocations(store.run("latest").id)
        assert "max_cost_usd reached" in (store.run("latest").error or "")  # stored, not lost
    # re-meter what was stored: the spend stays within the cap, and the run did real work
    meter = CostMeter(BillingModel(granularity_s=0.001), 1.0)
    for inv in invs:
        meter.record(inv)
    assert 10 < len(invs) < 400
    assert 1.0 < meter.spent_usd <= 4.0
    # and the bill of the stored run prints per target
    priced = gpubench("cost", "run", "latest", "--store", str(store_path))
    assert priced.returncode == 0, priced.stderr
    assert "loc" in priced.stdout and "estimated bill" in priced.stdout


def _inv(target: str, seconds: float, cold: bool = False) -> Invocation:
    return Invocation(
        target=target,
        scenario=0,
        seq=0,
        phase=Phase.MEASURE,
        scheduled_ns=0,
        start_ns=0,
        end_ns=int(seconds * 1e9),
        wall_start_ns=0,
        outcome=Outcome.OK,
        cold=cold,
    )


def test_guard_projects_in_flight_requests_and_the_run_cap() -> None:
    per_s = BillingModel(granularity_s=1.0)
    guard = BudgetGuard(
        {"a": CostMeter(per_s, 0.01, max_cost_usd=1.0), "b": CostMeter(per_s, 0.01)},
        max_cost_usd=1.5,
    )
    # nothing measured yet: each request counts at its deadline (10 s -> $0.10)
    assert [guard.allow("a", 10.0) for _ in range(10)] == [None] * 10
    assert guard.allow("a", 10.0) is not None  # an 11th could make $1.10 > $1.00
    for _ in range(10):
        guard.record(_inv("a", 2.0))  # each $0.02 (2 s at $0.01/s)
    assert guard.spent_usd()["a"] == pytest.approx(0.20)
    # each further request still counts at the most it can cost ($0.10), not at $0.02
    assert guard.allow("a", 10.0) is None
    guard.record(_inv("a", 2.0))
    # b has no cap of its own, but the run's $1.50 covers a and b together
    meter_b = guard.meters["b"]
    meter_b.raw_billed_s = 120.0  # $1.20 already spent by b
    reason = guard.allow("b", 10.0)
    assert reason is not None and "run max_cost_usd" in reason


def test_meter_bills_only_the_providers_phases() -> None:
    public = BillingModel(
        granularity_s=1.0, billed_phases=frozenset({"execution"}), billed_unit="request"
    )
    meter = CostMeter(public, 0.5)
    inv = _inv("x", 10.0, cold=True)
    inv.execution_ms = 1500.0  # 8.5 s of the 10 s was boot: not billed on a public model
    meter.record(inv)
    assert meter.spent_usd == pytest.approx(2 * 0.5)  # 1.5 s -> 2 s


def test_plan_without_a_price_for_a_capped_target_is_refused() -> None:
    data = {
        "run": {"max_cost_usd": 5},
        "targets": [{"name": "a", "provider": "runpod"}],
        "scenarios": [{"kind": "burst", "total": 1, "concurrency": 1}],
    }
    with pytest.raises(ConfigError, match=r"targets\[0\]\.price_sku"):
        budget_guard(parse_config(data))
    data["targets"] = [{"name": "a", "provider": "runpod", "price_sku": "A100 80GB"}]
    with warnings.catch_warnings():  # whether the catalog's prices are stale depends on today
        warnings.simplefilter("ignore", StalePriceWarning)
        guard = budget_guard(parse_config(data))
    assert guard is not None and guard.meters["a"].rate_usd_per_s == 0.00076
    with pytest.raises(ConfigError, match="max_cost_usd"):
        parse_config({**data, "run": {"max_cost_usd": 0}})
    no_cap = {**data, "run": {}}
    assert budget_guard(parse_config(no_cap)) is None


def test_each_of_n_processes_gets_a_share_of_the_caps() -> None:
    # N load-generating processes each meter their own requests: with 1/N of every cap each,
    # together they cannot pass it.
    data = {
        "run": {"max_cost_usd": 6},
        "targets": [{"name": "a", "provider": "local", "price_per_s_usd": 1.0, "max_cost_usd": 3}],
        "scenarios": [{"kind": "burst", "total": 1, "concurrency": 1}],
    }
    guard = budget_guard(parse_config(data), share=1 / 3)
    assert guard is not None and guard.max_cost_usd == pytest.approx(2.0)
    assert guard.meters["a"].max_cost_usd == pytest.approx(1.0)
    with pytest.raises(ValueError, match="share"):
        budget_guard(parse_config(data), share=0)


def test_guard_counts_every_request_at_the_most_it_can_cost() -> None:
    per_s = BillingModel(granularity_s=1.0)
    # The run's cap covers the other targets' requests in flight before any completes.
    guard = BudgetGuard({"a": CostMeter(per_s, 0.1), "b": CostMeter(per_s, 0.1)}, max_cost_usd=1.0)
    assert guard.allow("a", 10.0) is None  # $1.00 at most
    assert guard.allow("b", 10.0) is not None  # with a's in flight, $2.00 could be spent
    # A cheap first request (a fast failure) does not make the next ones look free.
    guard = BudgetGuard({"a": CostMeter(per_s, 0.1, max_cost_usd=1.0)})
    assert guard.allow("a", 5.0) is None
    guard.record(_inv("a", 0.0))
    allowed = sum(guard.allow("a", 5.0) is None for _ in range(100))
    assert allowed == 2  # $0.50 each: two in flight reach the $1.00 cap
    # Per-request fees count before any request completes.
    fee = BillingModel(granularity_s=1.0, per_request_usd=0.5)
    guard = BudgetGuard({"a": CostMeter(fee, 0.0, max_cost_usd=1.0)})
    assert sum(guard.allow("a", 5.0) is None for _ in range(100)) == 2
