"""The proof of advise's batch windows: a campaign measures an emulated platform at 03:00 and
15:00 on two days; the platform boots fast at night and slowly by day. advise must send a daily
batch to the night window, price it there and spread over the day, and the night window's
setting, served on the fleet, must cost what it said and meet the objective.

The campaign's slots run for real against the RunPod plugin over loopback HTTP, with the wall
clock moved to each slot's time (``time.time_ns``, the clock the runner stamps requests with),
as tests/test_report_campaign.py does. Between slots the emulated fleet's cold start is set
for the hour: the platform's behaviour by time of day is the thing measured.
"""

from __future__ import annotations

import dataclasses
import json
import time
from pathlib import Path

import pytest
from _plans import emulated_runpod
from _virtual_serve import serve_trace
from click.testing import CliRunner

from gpubench_sdk import BatchAdvice, Objectives, Store, advise_batch
from gpubench_sdk._advise import campaign_runs
from gpubench_sdk._cli import main
from gpubench_sdk._plan._config import parse_config
from gpubench_sdk.campaign import Schedule, create_campaign, run_campaign
from gpubench_sdk.cost import poisson_arrivals
from gpubench_sdk.cost._policy import provider_policy
from gpubench_sdk.testing import Duration, FleetConfig, SimulatedFleet, serve

pytest.importorskip("gpubench_runpod")
from gpubench_runpod.emulator import make_app

KEY = "rpa_batch_7d3e9f1a2c4b"
HOUR_NS = 3_600 * 10**9
DAY0_NS = 1_767_225_600 * 10**9 + 3 * HOUR_NS  # 2026-01-01T03:00Z
BOOT = {3: Duration.uniform(0.15, 0.25), 15: Duration.uniform(0.9, 1.3)}  # night, day
RATE_USD_PER_S = 0.001
JOBS, HOURS = 1000, 4  # the reference report's "1,000 documents a day", within 4 hours
SLO_S = 0.6


def _fleet(boot: Duration, *, min_workers: int = 0, max_workers: int = 2, idle_s: float = 0.25,
           clock: object = None) -> SimulatedFleet:  # fmt: skip
    config = FleetConfig(
        cold_start=boot, min_workers=min_workers, max_workers=max_workers, idle_timeout_s=idle_s,
        worker_policy=provider_policy("runpod").policy, seed=3,
    )  # fmt: skip
    return SimulatedFleet(config) if clock is None else SimulatedFleet(config, clock=clock)  # type: ignore[arg-type]


@pytest.fixture(scope="module")
def campaign_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    store = tmp_path_factory.mktemp("batch") / "campaign.sqlite"
    fleet = _fleet(BOOT[3])
    plan = {
        "run": {"name": "night-and-day"},
        "workload": {"kind": "probe", "sleep_ms": 50},
        "targets": [],
        "scenarios": [{"kind": "cold_starts", "n": 3, "warm_after": 2, "cold_timeout_s": 10}],
    }
    with pytest.MonkeyPatch.context() as mp, serve(make_app(fleet, api_key=KEY)) as served:
        mp.setenv("BATCH_RUNPOD_KEY", KEY)
        key = "BATCH_RUNPOD_KEY"
        target = emulated_runpod("gpu", served.url, key, RATE_USD_PER_S, cold_threshold_ms=100)
        plan["targets"] = [target]
        schedule = Schedule(DAY0_NS, 2 * 86_400, every_s=12 * 3_600, grace_s=3_600)
        create_campaign(parse_config(plan), schedule, store=store, name="night-and-day")
        real = time.time_ns
        for slot in range(4):
            at = DAY0_NS + slot * 12 * HOUR_NS
            fleet.config = dataclasses.replace(
                fleet.config, cold_start=BOOT[3 if slot % 2 == 0 else 15]
            )
            offset = at + 10**9 - real()  # a second after the slot's time
            mp.setattr(time, "time_ns", lambda offset=offset: real() + offset)
            (done,) = run_campaign(store, "night-and-day", once=True)
            assert (done.slot, done.status) == (slot, "completed"), done
    return store


@pytest.fixture(scope="module")
def batch(campaign_store: Path) -> BatchAdvice:
    with Store(campaign_store, readonly=True) as store:
        runs, offset = campaign_runs(store, "night-and-day")
        return advise_batch(
            store, runs, JOBS, HOURS, Objectives(latency_s=SLO_S), tz_offset_s=offset,
            resamples=20, scale_down_s=(1.0, 10.0, 60.0),
        )  # fmt: skip


def _serve_batch(
    boot: Duration, min_workers: int, max_workers: int, idle_s: float
) -> dict[str, float]:
    """1,000 jobs in 4 hours on the fleet with ``boot``, in virtual time: its bill (the day's,
    as the batch is the day's only work), p95 and cold share."""
    served = serve_trace(
        lambda clock: _fleet(
            boot, min_workers=min_workers, max_workers=max_workers, idle_s=idle_s, clock=clock
        ),
        poisson_arrivals(JOBS / (HOURS * 3_600), HOURS * 3_600, seed=2024),
        {"sleep_ms": 50},
        linger_s=idle_s + 1.0,  # the last worker idles out and stops
    )
    return {
        "cost_usd_per_day": served.cost_usd(RATE_USD_PER_S),
        "p95_s": served.p95_s(),
        "jobs": len(served.truths),
    }


def test_the_batch_goes_to_the_night_window_and_costs_there_what_advise_said(
    batch: BatchAdvice,
) -> None:
    hours = {s.hour: s for s in batch.slots}
    assert sorted(hours) == [3, 15] and all(s.days == 2 for s in hours.values()), batch.slots
    assert hours[3].cold_start_p50_s < hours[15].cold_start_p50_s
    best = batch.best
    assert best.start_hour is not None and 3 in {(best.start_hour + i) % 24 for i in range(HOURS)}
    assert [s.hour for s in best.slots] == [3] and best.fewest_days == 2
    e, spread = best.advice.recommended, batch.spread.advice.recommended
    assert e is not None and spread is not None and best.advice.meets_objectives, best.advice.reason
    assert e.cost_usd_per_day[0] < spread.cost_usd_per_day[0], batch.reason
    assert "Run the batch in" in batch.reason and "less than spread over the day" in batch.reason
    assert any("fewer than 3 days per slot" in n for n in batch.notes), batch.notes
    assert any("1 of its 4 hour(s) measured" in n for n in batch.notes), batch.notes
    o = e.option
    real = _serve_batch(BOOT[3], o.min_workers, o.max_workers, o.scale_down_s)
    assert real["p95_s"] <= SLO_S, real
    assert abs(real["cost_usd_per_day"] / e.cost_usd_per_day[0] - 1) <= 0.05, (real, e)


def test_cli_batch_from_a_campaign(campaign_store: Path) -> None:
    args = ["advise", "--store", str(campaign_store), "--campaign", "night-and-day",
            "--batch", "1000", "--batch-hours", "4", "--p95-ms", "600",
            "--resamples", "5"]  # fmt: skip
    done = CliRunner().invoke(main, [*args, "--json"])
    assert done.exit_code == 0, done.output
    out = json.loads(done.output)
    assert out["batch"] == {"jobs_per_day": 1000.0, "hours": 4}
    assert out["best"].startswith(("00:", "01:", "02:", "03:")) and out["windows"], out["best"]
    assert out["windows"][0]["days_per_hour_slot"] == {"3": 2}
    table = CliRunner().invoke(main, args)
    assert table.exit_code == 0 and "spread over the day" in table.output, table.output
    for bad in (["--batch-hours", "30"], ["--batch", "0"], ["--rate", "1"]):
        out2 = CliRunner().invoke(main, [*args, *bad])
        assert out2.exit_code == 2 and "Traceback" not in out2.output, (bad, out2.output)
    alone = CliRunner().invoke(main, [a for a in args if a != "--batch-hours" and a != "4"])
    assert alone.exit_code == 2 and "--batch-hours" in alone.output, alone.output


def test_cli_advise_over_a_campaigns_runs(campaign_store: Path) -> None:
    args = ["advise", "--store", str(campaign_store), "--campaign", "night-and-day",
            "--rate", "0.05", "--p95-ms", "600", "--resamples", "3", "--json"]  # fmt: skip
    done = CliRunner().invoke(main, args)
    assert done.exit_code == 0, done.output
    out = json.loads(done.output)
    assert any("pooled from runs 1, 2, 3, 4" in n for n in out["notes"]), out["notes"]
    # RunPod has concurrent handlers, but one job per worker was all the campaign measured
    assert any("concurrency per worker" in n and "not searched" in n for n in out["notes"])
    assumed = CliRunner().invoke(main, [*args, "--assume-concurrency"])
    assert assumed.exit_code == 0, assumed.output
    levels = {o["concurrency"] for o in json.loads(assumed.output)["options"]}
    assert levels == {1, 2, 4, 8}, levels
    unknown = CliRunner().invoke(main, [*args[:3], "--campaign", "nope", *args[5:]])
    assert unknown.exit_code == 2 and "Traceback" not in unknown.output, unknown.output
