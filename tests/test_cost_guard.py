"""The budget guard: a live cost meter per target that stops a run before it passes its cap."""

from __future__ import annotations

import subprocess
import sys
import warnings
from pathlib import Path

import pytest
from _plans import local_plan
from test_cli import gpubench

from gpubench_sdk import ConfigError, Invocation, Outcome, Phase, Store
from gpubench_sdk._plan._config import parse_config
from gpubench_sdk.cost import BillingModel, BudgetGuard, CostMeter, StalePriceWarning
from gpubench_sdk.cost._meter import budget_guard

PLAN = local_plan(
    """
[run]
name = "guarded"

[workload]
kind = "probe"
sleep_ms = 50
""",
    """max_workers = 2
idle_timeout_s = 2.0
timeout_s = 2.0
price_per_s_usd = 0.05   # notional: the local runtime is free
max_cost_usd = 0.8
""",
    """[[scenarios]]
kind = "burst"
total = 400
concurrency = 2

[[scenarios]]
kind = "rate"
rps = 20
duration_s = 1
""",
)


def test_run_against_the_local_runtime_stops_before_its_cap(tmp_path: Path) -> None:
    """Over real HTTP (the local runtime's gateway and workers): once the guard refuses, not
    one more request goes out, from any slot; and the bill estimated from the stored run,
    idle gaps and tails included, stays within the cap."""
    import tomllib

    from gpubench_sdk._plan._build import build_run
    from gpubench_sdk._runner._multiproc import run_blocking
    from gpubench_sdk.cost import load_catalog
    from gpubench_sdk.cost._priced import priced_targets

    config = parse_config(tomllib.loads(PLAN))
    store_path = tmp_path / "g.sqlite"
    runner = build_run(config, store=store_path)
    guard = runner._guard
    assert guard is not None
    allow = guard.allow
    log: list[bool] = []

    def watched(target: str, deadline_s: float) -> str | None:
        reason = allow(target, deadline_s)
        log.append(reason is None)
        return reason

    guard.allow = watched  # type: ignore[method-assign]
    result = run_blocking(runner)
    assert "max_cost_usd reached for target loc" in (result.run.error or "")  # stored
    first_refusal = log.index(False)
    assert not any(log[first_refusal:])  # 0 requests allowed after the first refusal
    with Store(store_path, readonly=True) as store:
        info = store.run("latest")
        invs = store.invocations(info.id)
        assert len(invs) == first_refusal  # every allowed request was sent and stored
        assert 10 < len(invs) < 400
        assert {inv.scenario for inv in invs} == {0}  # the next scenario sent nothing to it
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", StalePriceWarning)
            (cost,) = priced_targets(store, info, load_catalog(), {}, require_price=True)
    assert 0.2 < cost.total_usd <= 0.8  # the estimated bill, not only the metered part
    # and the bill of the stored run prints per target from the CLI
    priced = gpubench("cost", "run", "latest", "--store", str(store_path), timeout=180)
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
    refused = guard.allow("a", 10.0)  # an 11th could make $1.10 > $1.00
    assert refused is not None and "max_cost_usd reached for target a" in refused
    for _ in range(10):
        guard.record(_inv("a", 2.0))  # each $0.02 (2 s at $0.01/s)
    assert guard.spent_usd()["a"] == pytest.approx(0.20)
    # the refusal is final: the target stays stopped though its requests came in cheaper
    assert guard.allow("a", 10.0) == refused
    # b has no cap of its own, but the run's $1.50 covers a and b together
    meter_b = guard.meters["b"]
    meter_b.raw_billed_s = 120.0  # $1.20 already spent by b
    reason = guard.allow("b", 10.0)
    assert reason is not None and "run max_cost_usd" in reason
    assert guard.allow("a", 0.0) == reason  # the run's cap stops every target


def test_guard_reserves_idle_tails_and_gaps_of_a_worker_billed_provider() -> None:
    # 60 s scale-down: each request may start a worker that idles 60 s billed after it
    idle = BillingModel(granularity_s=1.0, default_idle_timeout_s=60.0)
    meter = CostMeter(idle, 0.01, max_cost_usd=2.0)
    guard = BudgetGuard({"a": meter})
    assert guard.request_bound_usd(meter, 10.0) == pytest.approx(0.70)
    assert guard.allow("a", 10.0) is None
    inv = _inv("a", 2.0)
    guard.record(inv)
    # metered: 2 s; estimated: 2 s busy + 60 s tail of the live worker + 1 s rounding
    assert meter.spent_usd == pytest.approx(0.02)
    assert meter.estimated_usd == pytest.approx(0.63)
    # a warm request 30 s later reuses the worker: the 28 s gap is billed idle time
    later = _inv("a", 2.0)
    later.start_ns, later.end_ns = 30 * 10**9, 32 * 10**9
    meter.record(later)
    assert meter.estimated_usd == pytest.approx((2 + 28 + 2 + 60 + 1) * 0.01)
    assert guard.allow("a", 10.0) is None  # 0.93 + 0.70 <= 2.00
    assert guard.allow("a", 10.0) is not None  # 0.93 + 1.40 > 2.00


def test_a_stop_in_one_process_stops_the_target_in_all() -> None:
    import multiprocessing

    per_s = BillingModel(granularity_s=1.0)
    guards = [
        BudgetGuard({"a": CostMeter(per_s, 0.1, max_cost_usd=1.0), "b": CostMeter(per_s, 0.1)})
        for _ in range(2)
    ]
    flags = multiprocessing.get_context("spawn").Array("b", guards[0].flag_count)
    for g in guards:
        g.share_stops(flags)
    assert guards[1].allow("a", 1.0) is None
    assert sum(guards[0].allow("a", 5.0) is None for _ in range(5)) == 2  # then refused
    refused = guards[1].allow("a", 1.0)  # the other process had room left, yet it stops
    assert refused is not None and "another process" in refused
    assert guards[1].allow("b", 1.0) is None  # b has no cap of its own


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
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", StalePriceWarning)
        assert budget_guard(parse_config(no_cap)) is None  # priced, checked, but no meter


def test_each_of_n_processes_gets_a_share_of_the_caps() -> None:
    # N load-generating processes each meter their own requests: with 1/N of every cap each,
    # together they cannot pass it.
    data = {
        "run": {"max_cost_usd": 6},
        "targets": [
            {
                "name": "a",
                "provider": "local",
                "price_per_s_usd": 0.1,
                "max_cost_usd": 3,
                "timeout_s": 0.5,
            }
        ],
        "scenarios": [{"kind": "burst", "total": 1, "concurrency": 1}],
    }
    guard = budget_guard(parse_config(data), share=1 / 3)
    assert guard is not None and guard.max_cost_usd == pytest.approx(2.0)
    assert guard.meters["a"].max_cost_usd == pytest.approx(1.0)
    with pytest.raises(ValueError, match="share"):
        budget_guard(parse_config(data), share=0)


def test_a_cap_that_cannot_admit_one_request_is_refused_with_the_numbers() -> None:
    data = {
        "targets": [{"name": "a", "provider": "local", "price_per_s_usd": 0.01, "max_cost_usd": 2}],
        "scenarios": [{"kind": "burst", "total": 1, "concurrency": 1}],
    }
    # the default timeout_s (300 s) plus the local runtime's idle tail at $0.01/s > $2
    with pytest.raises(ConfigError, match=r"targets\[0\]\.max_cost_usd.*at least \$3\.0") as err:
        budget_guard(parse_config(data))
    assert "timeout_s=300" in str(err.value) and "lower timeout_s" in str(err.value)
    data["targets"][0]["timeout_s"] = 60  # type: ignore[index]
    assert budget_guard(parse_config(data)) is not None


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
    # $0.50 each at most; the estimate holds $0.10 for the first worker's rounding step
    assert allowed == 1
    # Per-request fees count before any request completes.
    fee = BillingModel(granularity_s=1.0, per_request_usd=0.5)
    guard = BudgetGuard({"a": CostMeter(fee, 0.0, max_cost_usd=1.0)})
    assert sum(guard.allow("a", 5.0) is None for _ in range(100)) == 2


def test_two_processes_stop_a_target_together_within_its_cap(tmp_path: Path) -> None:
    """``gpubench run -p 2`` against one served local runtime: both processes stop the capped
    target (shared stop flags), and the bill estimated from the stored run is within the cap."""
    import json

    serve = subprocess.Popen(
        [sys.executable, "-m", "gpubench_sdk", "local", "serve", "--port", "0",
         "--handler", "gpubench_sdk.demo:echo", "--max-workers", "4",
         "--idle-timeout", "2"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    try:
        assert serve.stdout is not None
        line = serve.stdout.readline()
        assert "listening on http://127.0.0.1:" in line, line
        url = line.rsplit(" ", 1)[1].strip()
        plan = tmp_path / "plan.toml"
        text = PLAN.replace('handler = "gpubench_sdk.demo:echo"\nload = ""\n', "")
        text = text.replace("max_workers = 2\n", f'url = "{url}"\n')
        text = text.replace("max_cost_usd = 0.8", "max_cost_usd = 2.0")
        plan.write_text(text.replace("concurrency = 2", "concurrency = 4"))
        store_path = tmp_path / "g.sqlite"
        done = gpubench(
            "run", str(plan), "--store", str(store_path), "--quiet", "-p", "2", timeout=180
        )
        assert done.returncode == 0, done.stdout + done.stderr
        assert "max_cost_usd reached for target loc" in done.stdout
        priced = gpubench(
            "cost", "run", "latest", "--store", str(store_path), "--json", timeout=180
        )
        assert priced.returncode == 0, priced.stderr
        (row,) = json.loads(priced.stdout)
        assert 4 < row["requests"] < 400
        assert row["total_usd"] <= 2.0
    finally:
        serve.terminate()
        serve.wait(20)


def test_live_replay_matches_run_cost_replay() -> None:
    """The guard's online replay of workers bills what ``run_cost``'s replay bills (exact
    seconds), request by request in start order, plus at most one rounding step a worker."""
    import numpy as np

    from gpubench_sdk.cost import price_worker_intervals, replay_worker_intervals

    rng = np.random.default_rng(5)
    starts = np.cumsum(rng.exponential(4.0, 300))
    busy = rng.uniform(0.5, 3.0, 300)
    cold = (rng.random(300) < 0.1).astype(int)
    boot = np.where(cold == 1, rng.uniform(2, 6, 300), 0.0)
    exact = BillingModel(granularity_s=1e-6, default_idle_timeout_s=10.0)
    meter = CostMeter(exact, 1.0)
    for i in range(300):
        inv = _inv("a", float(busy[i] + boot[i]), cold=bool(cold[i]))
        inv.start_ns = int(starts[i] * 1e9)
        inv.end_ns = inv.start_ns + int((busy[i] + boot[i]) * 1e9)
        inv.execution_ms = float(busy[i] * 1e3)
        meter.record(inv)
    intervals = replay_worker_intervals(starts, busy, boot, 10.0, cold)
    truth = price_worker_intervals(intervals, exact, 1.0)
    assert meter.workers is not None
    assert meter.workers.started == len({iv.worker for iv in intervals})
    estimate = meter.estimated_usd
    assert truth.cost_usd <= estimate <= truth.cost_usd + meter.workers.started * 1e-6 + 1e-6
