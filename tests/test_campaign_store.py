"""Campaign bookkeeping at chosen instants: claims, missed slots, dead attempts, budgets;
then a synthetic five-day campaign through the analysis and the regression gate."""

from __future__ import annotations

import datetime as dt
import json
import os
import socket
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from click.testing import CliRunner

from gpubench_sdk import ConfigError, Invocation, Outcome, Phase, Store
from gpubench_sdk._cli import main
from gpubench_sdk._plan._config import parse_config
from gpubench_sdk._store._store import TargetRecord
from gpubench_sdk.campaign import (
    Budget,
    CampaignDB,
    Schedule,
    campaign_summary,
    create_campaign,
)
from gpubench_sdk.campaign._records import Claim

S = 10**9
START = int(dt.datetime(2024, 6, 3, tzinfo=dt.UTC).timestamp()) * S  # a Monday, 00:00 UTC


def plan(price: bool = False) -> dict[str, Any]:
    target = {"provider": "local", "url": "http://127.0.0.1:9"}
    if price:
        target["price_per_s_usd"] = 0.001
    return {
        "run": {"name": "study"},
        "workload": {"kind": "probe"},
        "targets": [{"name": "a", "region": "eu-west-1", **target}, {"name": "b", **target}],
        "scenarios": [{"kind": "burst", "total": 10, "concurrency": 2}],
    }


def dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def set_owner(store: Path, claim: Claim, **fields: Any) -> None:
    """Rewrite who holds an attempt: how a crashed or remote scheduler looks in the file."""
    sets = ", ".join(f"{k} = ?" for k in fields)
    with sqlite3.connect(store) as db:
        db.execute(
            f"UPDATE campaign_attempts SET {sets} WHERE slot = ? AND attempt = ?",
            (*fields.values(), claim.slot, claim.attempt),
        )


def status(db: CampaignDB, name: str = "study") -> list[str]:
    return [s.status for s in db.slots(db.get(name))]


def test_claims_missed_slots_dead_attempts_and_budget(tmp_path: Path) -> None:
    store = tmp_path / "c.sqlite"
    schedule = Schedule(START, 60, every_s=10, grace_s=5)  # slots at 0, 10, ..., 50 s
    create_campaign(parse_config(plan()), schedule, store=store)
    with CampaignDB(store) as db:
        c = db.get()
        assert c.regions == {"a": "eu-west-1", "b": None}
        kw: dict[str, Any] = {"stale_s": 2.0, "max_attempts": 2}
        assert db.claim(c, START - S, **kw) == "no slot is due"
        first = db.claim(c, START + S, **kw)
        assert isinstance(first, Claim) and (first.slot, first.attempt) == (0, 1)
        # a second scheduler (a cron tick) finds the slot taken, in the same file
        with CampaignDB(store) as other:
            busy = other.claim(c, START + 2 * S, **kw)
        assert busy == f"slot 0 is running (pid {os.getpid()} on {socket.gethostname()})"
        db.finish(first, status="completed", now_ns=START + 2 * S)
        # at 27 s, slots 1 (10 s) and 2 (20 s) are past their 5 s grace: missed
        assert db.claim(c, START + 27 * S, **kw) == "no slot is due"
        assert status(db)[:4] == ["done", "missed", "missed", "pending"]

        # slot 3: its scheduler dies (pid gone) inside the grace window: a new attempt
        third = db.claim(c, START + 31 * S, **kw)
        assert isinstance(third, Claim) and third.slot == 3
        set_owner(store, third, pid=dead_pid())
        retry = db.claim(c, START + 33 * S, **kw)
        assert isinstance(retry, Claim) and (retry.slot, retry.attempt) == (3, 2)
        # dies again, now past the grace window: the slot is recorded as interrupted
        set_owner(store, retry, pid=dead_pid())
        assert db.claim(c, START + 36 * S, **kw) == "no slot is due"
        assert status(db)[3] == "interrupted"
        att = [(a.slot, a.attempt, a.status) for a in db.attempts(c) if a.slot == 3]
        assert att == [(3, 1, "interrupted"), (3, 2, "interrupted")]

        # slot 4: held by another host that stopped sending heartbeats
        fourth = db.claim(c, START + 41 * S, **kw)
        assert isinstance(fourth, Claim)
        set_owner(store, fourth, host="elsewhere", pid=1, heartbeat_ns=START + 41 * S)
        assert db.claim(c, START + 42 * S, **kw) == "slot 4 is running (pid 1 on elsewhere)"
        again = db.claim(c, START + 44 * S, **kw)  # 3 s of silence > stale_s
        assert isinstance(again, Claim) and (again.slot, again.attempt) == (4, 2)
        # the silent one was alive after all: it learns it lost the slot, and its late end
        # overwrites neither its "interrupted" record nor the new attempt's slot
        assert not db.heartbeat(fourth, START + 44 * S) and db.heartbeat(again, START + 44 * S)
        db.finish(fourth, status="completed", now_ns=START + 44 * S)
        assert status(db)[4] == "running"
        assert [a.status for a in db.attempts(c) if a.slot == 4] == ["interrupted", "running"]
        db.finish(again, status="cancelled", now_ns=START + 44 * S)  # stopped: back to pending
        assert status(db)[4] == "pending"

        # the campaign budget is spent: what is left is skipped, with the reason
        why = "campaign budget spent: 10 requests of max_requests 10"
        assert db.claim(c, START + 44 * S, budget_spent=why, **kw) == why
        assert status(db)[4:] == ["skipped", "skipped"]
        assert all(s.reason == why for s in db.slots(c)[4:])


def test_campaign_tables_do_not_touch_the_core_schema(tmp_path: Path) -> None:
    store = tmp_path / "c.sqlite"
    create_campaign(parse_config(plan()), Schedule(START, 60, every_s=10), store=store)
    with sqlite3.connect(store) as db:
        meta = dict(db.execute("SELECT key, value FROM meta").fetchall())
        tables = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    assert meta["campaign_schema_version"] == "1" and meta["schema_version"]
    assert {t for t in tables if t.startswith("campaign_")} == {
        "campaign_plans", "campaign_slots", "campaign_attempts", "campaign_tags"
    }  # fmt: skip
    with Store(store) as s:  # the core still opens it
        assert s.runs() == []
    with pytest.raises(ConfigError, match="not used in this store"):
        create_campaign(parse_config(plan()), Schedule(START, 60, every_s=10), store=store)
    with pytest.raises(ConfigError, match="price"):  # a USD cap needs prices
        create_campaign(
            parse_config(plan()),
            Schedule(START, 60, every_s=10),
            store=store,
            name="capped",
            budget=Budget(max_cost_usd=1.0),
        )


# -- a synthetic five-day campaign ---------------------------------------------------------


def record_run(
    store: Store, name: str, wall0: int, lat_ms: np.ndarray, *, cold_ms: float, price: bool
) -> int:
    """A stored run of targets a and b as the runner would leave it."""
    info = store.begin_run(
        name=name,
        config=plan(price),
        targets=[TargetRecord("a", "local"), TargetRecord("b", "local")],
        scenarios=[],
        origin_ns=0,
        started_wall_ns=wall0,
    )
    for row, target in enumerate(("a", "b")):
        for i, ms in enumerate(lat_ms[row]):
            t0 = i * 50_000_000
            cold = i == 0
            service = ms + (cold_ms if cold else 0)
            store.append(
                info.id,
                Invocation(
                    target,
                    0,
                    i,
                    Phase.MEASURE,
                    t0,
                    t0,
                    t0 + int(service * 1e6),
                    wall0 + t0,
                    Outcome.OK,
                    execution_ms=ms,
                    cold=cold,
                    cold_confirmed=cold,
                ),
            )
    store.flush()
    return info.id


def test_five_day_campaign_analysis_and_gate(tmp_path: Path) -> None:
    path = tmp_path / "five.sqlite"
    schedule = Schedule(START, 5 * 86_400, every_s=4 * 3600, grace_s=600)
    create_campaign(parse_config(plan(price=True)), schedule, store=path)
    rng = np.random.default_rng(3)
    day_factor = [1.0, 1.0, 1.0, 1.6, 1.6]  # a drifts up from day 4 on; b is steady
    raw_a: dict[int, list[float]] = {}
    with CampaignDB(path) as db, Store(path) as store:
        c = db.get()
        for k, slot in enumerate(db.slots(c)):
            claim = db.claim(c, slot.scheduled_ns, stale_s=60, max_attempts=2)
            assert isinstance(claim, Claim) and claim.slot == k
            day = k // 6
            a = rng.lognormal(np.log(100), 0.1, 20) * day_factor[day]
            b = rng.lognormal(np.log(100), 0.1, 20)
            raw_a.setdefault(k % 6, []).extend(a + np.eye(1, a.size)[0] * 900)  # 1st is cold
            # on the last day every other cold start misses its snapshot: 900 ms or 9 s
            cold_ms = 9000 if day == 4 and k % 2 == 0 else 900  # (not the last slot: the gate)
            record_run(store, claim.run_name, slot.scheduled_ns, np.stack([a, b]),
                       cold_ms=cold_ms, price=True)  # fmt: skip
            db.finish(claim, status="completed", now_ns=slot.scheduled_ns + S)
    with Store(path) as store:
        summary = campaign_summary(store)
    assert summary.slot_status == {"done": 30}
    assert summary.requests == 30 * 40 and summary.cost_usd is not None
    a, b = summary.targets
    assert (a.target, a.region, b.region) == ("a", "eu-west-1", None)
    assert [p.slot for p in a.points] == list(range(30))
    assert [p.local_time for p in a.points[:6]] == ["00:00", "04:00", "08:00", "12:00",
                                                    "16:00", "20:00"]  # fmt: skip
    assert [d.day for d in a.daily_latency.days] == [f"2024-06-0{d}" for d in range(3, 8)]
    assert a.drift_days and a.drift_days[0] == "2024-06-06"
    assert b.drift_days == []
    medians = [d.median_ms for d in a.daily_latency.days]
    assert a.daily_latency.range_ms == pytest.approx(max(medians) - min(medians))
    assert medians[3] > 1.4 * medians[0]
    hours = a.time_of_day_latency.hours
    assert [h.hour for h in hours] == [0, 4, 8, 12, 16, 20]
    assert hours[0].median_ms == pytest.approx(float(np.median(raw_a[0])))
    assert a.daily_cold_start is not None and len(a.daily_cold_start.days) == 5
    assert a.points[0].cold_start_p50_ms == pytest.approx(900, abs=1)
    # per day, the cold starts' modes: one until the last day, then two of three each
    modes = dict(a.cold_start_modes_by_day)
    assert list(modes) == [f"2024-06-0{d}" for d in range(3, 8)]
    assert [len(m.modes) for m in modes.values()] == [1, 1, 1, 1, 2]
    fast, slow = modes["2024-06-07"].modes
    assert fast.share == pytest.approx(0.5, abs=0.01) and slow.share == pytest.approx(0.5, abs=0.01)
    assert fast.median_ms == pytest.approx(900, rel=0.02) and slow.median_ms == pytest.approx(
        9000, rel=0.02
    )
    shown = CliRunner().invoke(main, ["campaign", "show", "study", "--store", str(path)])
    assert shown.exit_code == 0, shown.output
    assert "a: cold-start modes by day" in shown.output  # (b's too: record_run gives both)
    day5 = next(
        line
        for line in shown.output.splitlines()
        if line.startswith("│ 2024-06-07") and " at " in line
    )
    assert day5.count("50% (") == 2 and "ms (" in day5
    as_json = json.loads(
        CliRunner().invoke(main, ["campaign", "show", "--json", "--store", str(path)]).output
    )
    assert [len(d[1]["modes"]) for d in as_json["targets"][0]["cold_start_modes_by_day"]] == [
        1,
        1,
        1,
        1,
        2,
    ]

    # the gate: the campaign's first three days against its last slot run
    cli = CliRunner()
    last = str(summary.runs[-1])
    args = ["compare", "--store", str(path), "--baseline", "study", "--candidate", last]
    passing = cli.invoke(main, [*args, "--target", "b", "--fail-on", "p95>+50%,p50>+50%"])
    assert passing.exit_code == 0, passing.output
    assert "PASS" in passing.output and "FAIL" not in passing.output
    failing = cli.invoke(main, [*args, "--target", "a", "--fail-on", "p50>+20%,error_rate>+1pp"])
    assert failing.exit_code == 1, failing.output
    row = next(line for line in failing.output.splitlines() if "p50" in line and "│" in line)
    assert "FAIL" in row and "%" in row  # baseline, candidate, change, threshold, CI, result
    as_json = cli.invoke(main, [*args, "--target", "a", "--json", "--fail-on", "p50>+20%"])
    data = json.loads(as_json.output)
    (r,) = data["rows"]
    assert r["verdict"] == "FAIL" and r["change_ci"][0] < r["change"] < r["change_ci"][1]
    assert r["change"] == pytest.approx(r["candidate"] / r["baseline"] - 1)
    missing = cli.invoke(main, [*args, "--fail-on", "ttft.p50>+10%"])  # no first byte stored
    assert missing.exit_code == 1 and "FAIL" in missing.output  # no data never passes a gate
    limits = cli.invoke(
        main, [*args, "--target", "a", "--fail-on", "p50>1ms", "--fail-on", "p50>1d"]
    )
    assert limits.exit_code == 2 and "a unit for a limit on p50" in limits.output
    limits = cli.invoke(
        main, [*args, "--target", "a", "--fail-on", "p50>1ms", "--fail-on", "p99>9m"]
    )
    assert limits.exit_code == 1, limits.output
    (held,) = [line for line in limits.output.splitlines() if "p99" in line and "│" in line]
    assert "PASS" in held and "FAIL" in limits.output
    bad = cli.invoke(main, [*args, "--fail-on", "p95>20%"])
    assert bad.exit_code == 2 and "signed change" in bad.output
    cost = cli.invoke(main, [*args, "--target", "a", "--fail-on", "cost_per_1k>+1000%"])
    assert cost.exit_code == 0, cost.output
    assert "$" in cost.output


def test_a_plan_with_a_written_secret_is_refused(tmp_path: Path) -> None:
    schedule = Schedule(START, 60, every_s=10)
    leaky = plan()
    leaky["targets"][1]["headers"] = {"Authorization": "Bearer abcdef123456"}
    with pytest.raises(ConfigError) as info:
        create_campaign(parse_config(leaky), schedule, store=tmp_path / "c.sqlite")
    assert info.value.field == "targets[1].headers.Authorization"
    assert "abcdef123456" not in str(info.value)
    leaky = plan()
    leaky["targets"][0]["url"] = "http://user:hunter22@127.0.0.1:9"
    with pytest.raises(ConfigError) as info:
        create_campaign(parse_config(leaky), schedule, store=tmp_path / "c.sqlite")
    assert info.value.field == "targets[0].url" and "hunter22" not in str(info.value)


def test_gate_ttft_is_the_first_stored_token_else_the_first_byte(tmp_path: Path) -> None:
    from gpubench_sdk.campaign._sides import read_sample

    ms = 1_000_000
    with Store(tmp_path / "t.sqlite") as store:
        info = store.begin_run(
            name="t",
            config=plan(),
            targets=[TargetRecord("a", "local")],
            scenarios=[],
            origin_ns=0,
            started_wall_ns=START,
        )
        # streamed: first byte at 5 ms (headers), first token at 30 ms; then one not streamed
        store.append(
            info.id,
            Invocation(
                "a", 0, 0, Phase.MEASURE, 0, 0, 100 * ms, START, Outcome.OK,
                first_byte_ns=5 * ms, token_times_ns=[30 * ms, 40 * ms],
            ),
        )  # fmt: skip
        store.append(
            info.id,
            Invocation(
                "a", 0, 1, Phase.MEASURE, 200 * ms, 200 * ms, 300 * ms, START, Outcome.OK,
                first_byte_ns=220 * ms,
            ),
        )  # fmt: skip
        store.flush()
        sample = read_sample(store, (info.id,), "a", with_cost=False)
    assert sorted(sample.ttft_ms.tolist()) == pytest.approx([20.0, 30.0])
