"""A compressed campaign against the real local runtime, its scheduler SIGKILLed mid-slot and
restarted: no slot lost or run twice, every sample kept. Plus the example plan, ticked."""

from __future__ import annotations

import contextlib
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from gpubench_sdk import Outcome, Store
from gpubench_sdk._plan._config import load_config, parse_config
from gpubench_sdk.campaign import (
    Budget,
    CampaignDB,
    Schedule,
    campaign_spend,
    create_campaign,
    run_campaign,
)

EXAMPLE = Path(__file__).parents[1] / "examples" / "campaign.toml"
BURST = 150  # requests per target per slot: long enough to be killed in the middle of


def gpubench(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "gpubench_sdk", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


@pytest.fixture(scope="module")
def runtime_url() -> Iterator[str]:
    """One local runtime for every slot, so a slot costs requests, not a runtime start."""
    proc = gpubench(
        "local", "serve", "--port", "0", "--handler", "gpubench_sdk.demo:echo",
        "--max-workers", "2", "--idle-timeout", "30",
    )  # fmt: skip
    assert proc.stdout is not None
    line = proc.stdout.readline()
    assert "listening on http://127.0.0.1:" in line, line
    try:
        yield line.rsplit(" ", 1)[1].strip()
    finally:
        proc.terminate()
        proc.wait(20)


def wait_for(check: object, timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if check():  # type: ignore[operator]
            return
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


def running_samples(store: Path, slot: int) -> int:
    """Samples committed so far by the running attempt of ``slot`` (0 if none runs)."""
    with contextlib.closing(sqlite3.connect(store, timeout=30)) as db:
        row = db.execute(
            "SELECT (SELECT count(*) FROM invocations i JOIN runs r ON r.id = i.run_id"
            " WHERE r.name = a.run_name) FROM campaign_attempts a"
            " WHERE a.slot = ? AND a.status = 'running'",
            (slot,),
        ).fetchone()
    return int(row[0]) if row else 0


def test_sigkill_mid_slot_then_resume(tmp_path: Path, runtime_url: str) -> None:
    store = tmp_path / "campaign.sqlite"
    plan = {
        "run": {"name": "resume"},
        # ~2 s a slot: several of the store's 0.5 s commits land while it runs, even on an
        # idle machine, so the test sees it half-way before killing it
        "workload": {"kind": "probe", "sleep_ms": 6},
        "targets": [
            {"name": t, "provider": "local", "url": runtime_url, "region": r}
            for t, r in (("a", "local-east"), ("b", "local-west"))
        ],
        "scenarios": [{"kind": "burst", "total": BURST, "concurrency": 1}],
    }
    # 4 slots 2.5 s apart from 2 s on; a generous grace, since 2 cores are shared by all tests
    schedule = Schedule(time.time_ns() + 2 * 10**9, 10, every_s=2.5, grace_s=120, seed=1)
    create_campaign(parse_config(plan), schedule, store=store)

    first = gpubench("campaign", "run", "--store", str(store), "--heartbeat", "0.5")
    try:
        wait_for(lambda: running_samples(store, 1) >= 20, 90, "slot 1 to be half-way")
    except AssertionError:
        first.kill()
        raise AssertionError(first.communicate()[0]) from None
    seen = running_samples(store, 1)
    first.kill()  # SIGKILL: no handler runs, the attempt stays 'running' in the file
    first.wait(10)

    second = gpubench("campaign", "run", "--store", str(store), "--heartbeat", "0.5")
    out, _ = second.communicate(timeout=120)
    assert second.returncode == 0, out
    assert "slot 1 (attempt 2): completed" in out

    with CampaignDB(store) as db:
        c = db.get("resume")
        slots = db.slots(c)
        attempts = db.attempts(c)
    assert [s.status for s in slots] == ["done"] * 4
    completed = [a.slot for a in attempts if a.status == "completed"]
    assert sorted(completed) == [0, 1, 2, 3]  # every slot ran to completion exactly once
    (killed,) = [a for a in attempts if a.status == "interrupted"]
    assert (killed.slot, killed.attempt) == (1, 1) and "is gone" in (killed.error or "")
    with Store(store) as s:
        runs = {r.name: r for r in s.runs()}
        assert len(runs) == 5
        lost = runs["campaign resume slot 1 attempt 1"]
        assert lost.status == "interrupted" and lost.samples >= seen  # its samples are kept
        for a in attempts:
            if a.status == "completed":
                run = runs[a.run_name]
                invs = s.invocations(run.id)
                assert run.samples == a.requests == 2 * BURST
                assert all(i.outcome is Outcome.OK for i in invs)
    with sqlite3.connect(store) as db:
        regions = dict(db.execute("SELECT target, region FROM campaign_tags").fetchall())
        tagged = db.execute("SELECT count(DISTINCT run_id) FROM campaign_tags").fetchone()[0]
    assert regions == {"a": "local-east", "b": "local-west"} and tagged == 5


def test_example_campaign_ticked_compressed(tmp_path: Path) -> None:
    """examples/campaign.toml, two slots 2 s apart, run by two `campaign tick`s as cron would."""
    store = tmp_path / "example.sqlite"
    config = load_config(EXAMPLE)
    start_ns = time.time_ns()
    schedule = Schedule(start_ns, 4, every_s=2, grace_s=600, seed=3)
    create_campaign(config, schedule, store=store, name="example")
    for slot in (0, 1):
        # cron ticks after the slot is due: on a fast machine slot 0's tick ends before
        # slot 1's time, and a tick then would rightly find nothing due
        time.sleep(max(0.0, (start_ns + slot * 2_000_000_000 - time.time_ns()) / 1e9 + 0.05))
        tick = gpubench("campaign", "tick", "example", "--store", str(store))
        out, _ = tick.communicate(timeout=120)
        assert tick.returncode == 0, out
        assert f"slot {slot} (attempt 1): completed" in out
    show = gpubench("campaign", "show", "example", "--store", str(store))
    out, _ = show.communicate(timeout=60)
    assert show.returncode == 0, out
    assert "latency by day" in out and "cold start by time of day" in out
    assert "(region local)" in out


def test_budgets_per_slot_and_per_campaign(tmp_path: Path, runtime_url: str) -> None:
    store = tmp_path / "budget.sqlite"
    target = {"provider": "local", "url": runtime_url, "price_per_s_usd": 0.001}
    plan = {
        "run": {"name": "capped"},
        "workload": {"kind": "probe", "sleep_ms": 1},
        "targets": [{"name": "a", **target}],
        "scenarios": [{"kind": "burst", "total": 100, "concurrency": 2}],
    }
    every = Schedule(time.time_ns(), 1.2, every_s=0.3, grace_s=120)  # 4 slots, all due at once
    create_campaign(
        parse_config(plan), every, store=store, budget=Budget(slot_max_requests=30, max_requests=70)
    )
    reports = run_campaign(store, "capped")
    assert [r.requests for r in reports] == [30, 30, 10]  # the last slot gets what is left
    with CampaignDB(store) as db:
        c = db.get("capped")
        slots = db.slots(c)
        spent = campaign_spend(db, c)
    assert [s.status for s in slots] == ["done", "done", "done", "skipped"]
    assert "70 requests of max_requests 70" in (slots[3].reason or "")
    assert spent[0] == 70 and spent[1] is not None and spent[1] > 0

    # a USD cap over the campaign: each slot's guard holds the estimated bill (two workers' 5 s
    # idle tails at $0.001/s, each request reserving 0.2 s + its tail) under what the earlier
    # slots left, so the campaign's bill never passes the cap
    create_campaign(
        parse_config(
            {**plan, "run": {"name": "usd"}, "targets": [{**target, "name": "a", "timeout_s": 0.2}]}
        ),
        Schedule(time.time_ns(), 0.6, every_s=0.3, grace_s=120),
        store=store,
        budget=Budget(max_cost_usd=0.012),
    )
    first, second = run_campaign(store, "usd")
    assert 0 < first.requests < 100 and 0 < second.requests < 100  # stopped by the guard
    assert first.cost_usd is not None and second.cost_usd is not None
    assert first.cost_usd + second.cost_usd <= 0.012
    with CampaignDB(store) as db:
        slots = db.slots(db.get("usd"))
    assert all("max_cost_usd" in (s.reason or "") for s in slots)
    left = 0.012 - first.cost_usd
    assert f"${left:.6f} cap" in (slots[1].reason or "")  # the second slot got what was left


def test_a_scheduler_started_late_records_missed_slots(tmp_path: Path, runtime_url: str) -> None:
    store = tmp_path / "late.sqlite"
    plan = {
        "run": {"name": "late"},
        "workload": {"kind": "probe"},
        "targets": [{"name": "a", "provider": "local", "url": runtime_url}],
        "scenarios": [{"kind": "burst", "total": 5, "concurrency": 1}],
    }
    # slots every 5 s from 32 s ago: 7 are past their 1 s grace, the 8th falls in 3 s
    late = Schedule(time.time_ns() - 32 * 10**9, 40, every_s=5, grace_s=1)
    create_campaign(parse_config(plan), late, store=store)
    (report,) = run_campaign(store)
    assert (report.slot, report.status, report.requests) == (7, "completed", 5)
    with CampaignDB(store) as db:
        slots = db.slots(db.get())
    assert [s.status for s in slots] == ["missed"] * 7 + ["done"]
    assert all(s.reason == "not started within its grace window" for s in slots[:7])


def test_sigterm_stops_the_slot_and_the_next_scheduler_resumes_it(
    tmp_path: Path, runtime_url: str
) -> None:
    store = tmp_path / "term.sqlite"
    plan = {
        "run": {"name": "term"},
        "workload": {"kind": "probe", "sleep_ms": 2},
        "targets": [{"name": "a", "provider": "local", "url": runtime_url}],
        "scenarios": [{"kind": "burst", "total": 400, "concurrency": 1}],
    }
    create_campaign(parse_config(plan), Schedule(time.time_ns(), 1, every_s=1, grace_s=120),
                    store=store)  # fmt: skip
    first = gpubench("campaign", "run", "--store", str(store))
    wait_for(lambda: running_samples(store, 0) >= 10, 90, "slot 0 to be running")
    first.send_signal(signal.SIGTERM)
    out, _ = first.communicate(timeout=60)
    assert first.returncode == 0, out
    assert "slot 0 (attempt 1): cancelled" in out and "stopped by SIGTERM" in out
    with CampaignDB(store) as db:
        assert [s.status for s in db.slots(db.get())] == ["pending"]
    (report,) = run_campaign(store)
    assert (report.slot, report.attempt, report.status, report.requests) == (0, 2, "completed", 400)
