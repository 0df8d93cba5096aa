"""``advise`` on stored runs written directly (fast): the search, the frontier, the stability
verdict, bad input and the CLI (table and JSON). The end-to-end proof on emulated providers is
``tests/test_advise_proof.py``."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from gpubench_sdk import Invocation, Objectives, Outcome, Phase, Store, Traffic, advise
from gpubench_sdk._advise import Advice, MeasuredTarget, advise_targets, measured_targets
from gpubench_sdk._advise._search import wilson
from gpubench_sdk._base._errors import ConfigError
from gpubench_sdk._cli import main
from gpubench_sdk._store._store import ScenarioRecord, TargetRecord
from gpubench_sdk.cost import BillingModel, load_catalog

SECOND = BillingModel(granularity_s=1.0)


def _store(
    path: Path, *, priced: bool = True, colds: int = 12, quick_cold_s: float = 8.0, seed: int = 3
) -> None:
    """One run, two targets: "slowboot" (cold 40 s, cheap) and "quick" (cold 8 s, dearer);
    both execute in about 12 s (the reference report's inference time)."""
    rng = np.random.default_rng(seed)
    targets = [TargetRecord("slowboot", "runpod"), TargetRecord("quick", "runpod")]
    plan = {
        "targets": [
            {"name": "slowboot", "provider": "runpod", "price_per_s_usd": 0.0004},
            {"name": "quick", "provider": "runpod", "price_per_s_usd": 0.0006},
        ]
        if priced
        else [{"name": "slowboot", "provider": "runpod"}, {"name": "quick", "provider": "runpod"}]
    }
    with Store(path) as store:
        run = store.begin_run(
            name="measured",
            config=plan,
            targets=targets,
            scenarios=[ScenarioRecord("cold_starts", {})],
            origin_ns=0,
            started_wall_ns=0,
        )
        for ti, (name, cold_s) in enumerate((("slowboot", 40.0), ("quick", quick_cold_s))):
            for seq in range(colds * 3):
                cold = seq % 3 == 0
                exec_ms = float(rng.uniform(11_000, 13_000))
                setup_ms = float(rng.uniform(0.8, 1.2) * cold_s * 1e3) if cold else None
                start = int(seq * 300e9)
                store.append(
                    run.id,
                    Invocation(
                        target=name, scenario=0, seq=seq, phase=Phase.MEASURE,
                        scheduled_ns=start, start_ns=start,
                        end_ns=start + int((exec_ms + (setup_ms or 0)) * 1e6), wall_start_ns=0,
                        outcome=Outcome.OK, cold=cold, execution_ms=exec_ms, setup_ms=setup_ms,
                    ),
                )  # fmt: skip
            del ti
        store.end_run(run.id, "completed")


def _advise_per_day(
    tmp_path: Path,
    objectives: Objectives,
    *,
    resamples: int,
    committed: dict[str, float] | None = None,
) -> tuple[Advice, Path]:
    """``advise`` for 1,000 requests a day on the run ``_store`` writes, and that store's path."""
    path = tmp_path / "m.sqlite"
    _store(path)
    with Store(path, readonly=True) as store:
        traffic = Traffic.per_day(1000)
        advice = advise(
            store, ["latest"], traffic, objectives, committed=committed, resamples=resamples
        )
    return advice, path


def test_advise_recommends_a_frontier_option_meeting_the_objectives(tmp_path: Path) -> None:
    advice, _ = _advise_per_day(tmp_path, Objectives(latency_s=30.0), resamples=20)
    best = advice.recommended
    assert best is not None and advice.meets_objectives
    # cold 40 s + 12 s cannot meet 30 s, so slowboot must stay warm or keep its workers long;
    # the cheapest way to meet p95 <= 30 s comes out on the frontier, meeting it in >= 90%
    assert best.meets_all[0] >= 0.9 and best.frontier
    assert best.latency_s[0] <= 30.0
    cheaper = [e for e in advice.options if e.cost_usd_per_day[0] < best.cost_usd_per_day[0]]
    assert all(e.meets_all[0] < 0.9 for e in cheaper)
    assert "cheapest option that met every objective" in advice.reason
    # nothing on the frontier is beaten on both cost and latency by another option
    for f in advice.frontier:
        for o in advice.options:
            assert not (
                o.cost_usd_per_day[0] < f.cost_usd_per_day[0] and o.latency_s[0] < f.latency_s[0]
            )
    # always warm: the one pinned worker bills every second of the day ($34.56 at $0.0004/s),
    # plus the burst workers started when a request finds it busy (12 s of 86 s per request)
    warm = [e for e in advice.options if e.option.target == "slowboot" and e.option.min_workers]
    assert warm and warm[0].cost_usd_per_day[1] >= 0.0004 * 86_400
    assert warm[0].cost_usd_per_day[2] <= 0.0004 * 86_400 * 1.3


def test_no_option_meets_an_impossible_objective(tmp_path: Path) -> None:
    advice, _ = _advise_per_day(tmp_path, Objectives(latency_s=1.0), resamples=5)
    assert not advice.meets_objectives
    assert advice.reason.startswith("No option met every objective")


def test_a_budget_and_a_cold_rate_are_objectives_too(tmp_path: Path) -> None:
    objectives = Objectives(latency_s=120.0, max_cold_rate=0.05, budget_usd_per_day=60.0)
    advice, _ = _advise_per_day(tmp_path, objectives, resamples=10)
    best = advice.recommended
    assert best is not None and set(best.meets) == {"p95", "cold_rate", "budget"}
    assert best.cold_rate[0] <= 0.05 and best.cost_usd_per_day[0] <= 60.0


def _target(name: str, cold_s: np.ndarray, rate: float) -> MeasuredTarget:
    return MeasuredTarget(name, "x", np.full(30, 12.0), cold_s, SECOND, rate, "longest_idle")


def test_few_cold_starts_near_the_objective_are_called_unstable() -> None:
    # 5 cold starts, one of them 30 s: scaled to zero, p95 (12 s + a cold start) misses 35 s
    # whenever a resample holds the 30 s one (2 in 3), so the cheap scale-to-zero options meet
    # the objective in about a third of the resamples: neither ruled in nor out. 200 cold
    # starts of 10-20 s rule them in.
    rng = np.random.default_rng(0)
    few = _target("a", np.array([10.0, 12.0, 14.0, 16.0, 30.0]), 0.0004)
    many = _target("a", rng.uniform(10.0, 20.0, 200), 0.0004)
    objectives = Objectives(latency_s=35.0)
    traffic = Traffic.per_day(1000)
    shaky = advise_targets([few], traffic, objectives, resamples=30)
    firm = advise_targets([many], traffic, objectives, resamples=30)
    assert firm.stable and firm.more_cold_starts is None
    assert not any("would resolve it" in note for note in firm.notes)  # 200 are enough
    assert firm.recommended is not None and firm.recommended.option.min_workers == 0
    assert not shaky.stable and shaky.unsettled_by is not None
    assert shaky.recommended is not None
    assert shaky.unsettled_by.cost_usd_per_day[0] < shaky.recommended.cost_usd_per_day[0]
    assert 0.1 < shaky.unsettled_by.meets_all[0] < 0.9
    assert shaky.more_cold_starts is not None and shaky.more_cold_starts > 5
    assert shaky.to_json()["more_cold_starts"] == shaky.more_cold_starts


def test_wilson_interval_stays_in_range() -> None:
    assert wilson(20, 20)[1] > 0.85 and wilson(20, 20)[2] == pytest.approx(1.0)
    p, lo, hi = wilson(10, 20)
    assert lo < p == 0.5 < hi


def test_bad_input_names_the_field(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="rate_per_s"):
        Traffic(0.0)
    with pytest.raises(ConfigError, match="max-cold-rate"):
        Objectives(latency_s=1.0, max_cold_rate=2.0)
    with pytest.raises(ConfigError, match="cold_start_s"):
        _target("a", np.zeros(0), 0.001)
    path = tmp_path / "m.sqlite"
    _store(path, priced=False)
    with Store(path, readonly=True) as store, pytest.raises(ConfigError, match="--price"):
        advise(store, ["latest"], Traffic(0.01), Objectives(latency_s=30.0), resamples=2)


def test_cli_table_and_json(tmp_path: Path) -> None:
    path = tmp_path / "m.sqlite"
    _store(path)
    base = ["advise", "latest", "--store", str(path), "--per-day", "1000", "--p95-ms", "30000"]
    base += ["--resamples", "8"]
    done = CliRunner().invoke(main, base)
    assert done.exit_code == 0, done.output
    assert "Recommendation:" in done.output and "P(meets all)" in done.output
    assert "Stable" in done.output or "Unstable" in done.output
    as_json = CliRunner().invoke(main, [*base, "--json"])
    assert as_json.exit_code == 0, as_json.output
    data = json.loads(as_json.output)
    assert data["recommended"]["p_meets_all"]["share"] >= 0.9
    assert data["traffic"]["requests_per_day"] == pytest.approx(1000)
    assert any(o["frontier"] for o in data["options"])


def test_cli_bad_input_is_a_clear_error(tmp_path: Path) -> None:
    path = tmp_path / "m.sqlite"
    _store(path, priced=False)
    args = ["advise", "latest", "--store", str(path), "--p95-ms", "30000"]
    neither = CliRunner().invoke(main, args)
    assert neither.exit_code != 0 and "--rate/--per-day" in neither.output
    unpriced = CliRunner().invoke(main, [*args, "--rate", "0.01"])
    assert unpriced.exit_code != 0 and "--price" in unpriced.output
    assert "Traceback" not in unpriced.output
    prices = ["--price", "slowboot=runpod:0.0004", "--price", "quick=runpod:0.0006"]
    priced = CliRunner().invoke(main, [*args, "--rate", "0.01", "--resamples", "3", *prices])
    assert priced.exit_code == 0, priced.output


def test_the_reference_example_runs() -> None:
    example = Path(__file__).resolve().parents[1] / "examples" / "advise_reference.py"
    done = subprocess.run(
        [sys.executable, str(example)], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert "1,000 requests/day" in done.stdout and "frontier:" in done.stdout
    assert "recommendation:" in done.stdout and "cheapest option that met" in done.stdout


def test_a_committed_worker_prices_the_always_warm_option(tmp_path: Path) -> None:
    advice, path = _advise_per_day(
        tmp_path,
        Objectives(latency_s=30.0),
        committed={"slowboot": 0.5},  # $12/day, against $34.56 a day on demand
        resamples=10,
    )
    (reserved_option,) = [
        e for e in advice.options if e.option.target == "slowboot" and e.option.committed
    ]
    twin = dataclasses.replace(reserved_option.option, committed=False)  # the same on demand
    warm = {
        e.option.committed: e for e in advice.options if e.option in (twin, reserved_option.option)
    }
    assert set(warm) == {False, True}
    on_demand, reserved = warm[False].cost_usd_per_day[0], warm[True].cost_usd_per_day[0]
    # the same simulated day: only the pinned worker's price changes (burst workers stay
    # on demand)
    assert reserved == pytest.approx(on_demand - 0.0004 * 86_400 + 0.5 * 24, rel=1e-6)
    assert "always-warm committed" in warm[True].option.label
    assert any(o["committed"] for o in advice.to_json()["options"])
    with Store(path, readonly=True) as store, pytest.raises(ConfigError, match="nosuch"):
        advise(
            store, ["latest"], Traffic(0.01), Objectives(latency_s=30.0), committed={"nosuch": 1}
        )
    args = ["advise", "latest", "--store", str(path), "--per-day", "1000", "--p95-ms", "30000"]
    done = CliRunner().invoke(main, [*args, "--resamples", "3", "--committed", "quick=0.4"])
    assert done.exit_code == 0 and "quick always-warm committed" in done.output, done.output
    bad = CliRunner().invoke(main, [*args, "--committed", "quick"])
    assert bad.exit_code != 0 and "TARGET=USD_PER_HOUR" in bad.output


def test_overflow_goes_where_every_primary_worker_is_busy() -> None:
    from gpubench_sdk._advise._overflow import split_overflow

    arrivals = np.array([0.0, 1.0, 2.0, 20.0])
    kept, over = split_overflow(arrivals, np.full(4, 5.0), 1)
    assert over.tolist() == [False, True, True, False] and kept.tolist() == [5.0, 5.0]
    kept, over = split_overflow(arrivals, np.full(4, 5.0), 2)
    assert over.tolist() == [False, False, True, False]


def test_a_warm_primary_with_overflow_is_priced_as_its_pinned_day_plus_the_overflow() -> None:
    # a free secondary: the pair's bill is the primary's pinned day alone; at 2 requests a
    # minute of 12 s each, one worker is busy 40% of the time, so some requests overflow
    # and meet the secondary's cold start
    primary = _target("p", np.full(20, 30.0), 0.0004)
    free = _target("s", np.full(20, 50.0), 0.0)
    advice = advise_targets(
        [primary, free], Traffic(2 / 60), Objectives(latency_s=120.0), resamples=5
    )
    pairs = [e for e in advice.options if e.option.overflow_to == "s" and e.option.target == "p"]
    assert pairs and {e.option.min_workers for e in pairs} == {1}
    for e in pairs:
        assert e.cost_usd_per_day[0] == pytest.approx(0.0004 * 86_400)
        assert 0.1 < e.cold_rate[0] < 0.5  # overflowed requests, cold at the secondary
    assert all(o["overflow_to"] in (None, "p", "s") for o in advice.to_json()["options"])
    alone = advise_targets(
        [primary, free], Traffic(2 / 60), Objectives(latency_s=120.0), resamples=5,
        overflow=False,
    )  # fmt: skip
    assert not any(e.option.overflow_to for e in alone.options)


def test_constant_traffic_and_a_quiet_day() -> None:
    assert Traffic(0.5, "constant").sample(0).size == pytest.approx(0.5 * Traffic(0.5).window_s)
    assert Traffic(1.0).window_s == 6_000.0  # a busy day is simulated over a shorter window
    # one request a day: some draws hold none, and a draw with no request meets the latency
    quiet = advise_targets(
        [_target("a", np.full(10, 5.0), 0.001)],
        Traffic.per_day(1),
        Objectives(latency_s=60.0),
        resamples=10,
    )
    assert quiet.recommended is not None and quiet.meets_objectives
    json.dumps(quiet.to_json(), allow_nan=False)  # no NaN in the JSON


def test_a_daily_shape_sizes_the_fleet_for_its_peak() -> None:
    # 3,600 requests of 12 s a day: half a worker busy on average, but all in one busy hour
    # of 24 (24x the mean rate there): 12 workers busy at the peak
    peak = (0.0,) * 23 + (1.0,)
    shaped = Traffic.per_day(3_600, daily_profile=peak)
    assert shaped.peak_rate_per_s == pytest.approx(24 * shaped.rate_per_s)
    times = shaped.sample(1)
    assert times.size > 3_000 and times.min() >= 23 * 3_600  # only in the last hour
    target = _target("a", np.full(10, 5.0), 0.001)
    flat = advise_targets([target], Traffic.per_day(3_600), Objectives(latency_s=60.0), resamples=3)
    busy = advise_targets([target], shaped, Objectives(latency_s=60.0), resamples=3)
    assert max(e.option.max_workers for e in flat.options) == 3  # 0.5 busy -> 1 + 2
    assert max(e.option.max_workers for e in busy.options) == 14  # 12 busy -> 12 + 2
    assert "24-slot daily shape" in busy.traffic.describe()
    with pytest.raises(ConfigError, match="--profile"):
        Traffic(0.01, "constant", peak)
    with pytest.raises(ConfigError, match="--profile"):
        Traffic(1.0, daily_profile=peak)  # 86,400 a day: too many to simulate whole days


def test_cli_profile(tmp_path: Path) -> None:
    path = tmp_path / "m.sqlite"
    _store(path)
    args = ["advise", "latest", "--store", str(path), "--per-day", "1000", "--p95-ms", "30000"]
    done = CliRunner().invoke(main, [*args, "--resamples", "3", "--profile", "1,1,2,4", "--json"])
    assert done.exit_code == 0, done.output
    assert json.loads(done.output)["traffic"]["daily_profile"] == [1, 1, 2, 4]
    bad = CliRunner().invoke(main, [*args, "--profile", "1,x"])
    assert bad.exit_code != 0 and "--profile" in bad.output and "Traceback" not in bad.output


def test_runs_of_one_target_are_pooled_and_resampled_day_by_day(tmp_path: Path) -> None:
    # three "days": quick boots in 8 s on two, 30 s on the third. One candidate per target;
    # resampling days, not just requests, widens the interval (a draw may hold the slow day
    # twice or not at all)
    path = tmp_path / "m.sqlite"
    for day, cold in enumerate((8.0, 8.0, 30.0)):
        _store(path, quick_cold_s=cold, seed=day)
    objectives = Objectives(latency_s=30.0)
    with Store(path, readonly=True) as store:
        advice = advise(store, [1, 2, 3], Traffic.per_day(1000), objectives, resamples=30)
        targets = {t.name: t for t in measured_targets(store, [1, 2, 3], load_catalog())}
    assert {e.option.target for e in advice.options} == {"slowboot", "quick"}
    quick = targets["quick"]
    assert quick.runs == (1, 2, 3) and quick.cold_start_s.size == 36
    assert any("pooled from runs 1, 2, 3" in note for note in advice.notes)
    flat = replace(quick, runs=(), run_sizes=())  # the same samples, resampled as one day
    by_day = advise_targets([quick], Traffic.per_day(1000), objectives, resamples=30)
    as_one = advise_targets([flat], Traffic.per_day(1000), objectives, resamples=30)

    def width(a: Advice) -> float:
        e = next(o for o in a.options if o.option.min_workers == 0)  # the shortest delay
        return e.latency_s[2] - e.latency_s[1]

    assert width(by_day) > 1.5 * width(as_one), (width(by_day), width(as_one))


def test_a_recorded_trace_is_played_as_it_is(tmp_path: Path) -> None:
    # a burst of 30 requests within a minute, then quiet for an hour: the fleet is sized for
    # the burst (30 x 12 s in 60 s = 6 busy) and every draw plays the same arrivals
    times = [float(i) * 2 for i in range(30)] + [3_600.0]
    traffic = Traffic.from_trace([t + 1e9 for t in times])  # any origin
    assert traffic.window_s == 3_600.0 and traffic.sample(0)[0] == 0.0
    assert traffic.sample(1).tolist() == traffic.sample(2).tolist()
    target = _target("a", np.full(10, 5.0), 0.001)
    advice = advise_targets([target], traffic, Objectives(latency_s=60.0), resamples=3)
    assert max(e.option.max_workers for e in advice.options) == 8
    assert advice.to_json()["traffic"]["trace_arrivals"] == 31
    with pytest.raises(ConfigError, match="--trace"):
        Traffic.from_trace([5.0])
    path = tmp_path / "m.sqlite"
    _store(path)
    trace = Path(__file__).resolve().parents[1] / "examples" / "replay_trace.csv"
    args = ["advise", "latest", "--store", str(path), "--p95-ms", "30000", "--resamples", "3"]
    args += ["--trace", str(trace), "--trace-time-column", "Timestamp"]
    done = CliRunner().invoke(main, args)
    assert done.exit_code == 0, done.output
    assert "a trace of" in done.output and "Recommendation:" in done.output
    both = CliRunner().invoke(main, [*args, "--rate", "1"])
    assert both.exit_code != 0 and "--trace" in both.output
