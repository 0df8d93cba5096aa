"""Cron parsing, durations, slot computation, and the --fail-on grammar."""

from __future__ import annotations

import datetime as dt
from zoneinfo import ZoneInfo

import pytest

from gpubench_sdk import ConfigError
from gpubench_sdk.campaign import Schedule, parse_cron, parse_duration, parse_fail_on

UTC = ZoneInfo("UTC")


def _ns(*args: int, tz: ZoneInfo = UTC) -> int:
    return int(dt.datetime(*args, tzinfo=tz).timestamp()) * 10**9


def _local(t_ns: int, tz: ZoneInfo = UTC) -> dt.datetime:
    return dt.datetime.fromtimestamp(t_ns / 1e9, tz)


def test_cron_fields_ranges_steps_lists_and_names() -> None:
    c = parse_cron("0,30 */4 1-10/3 jan-mar mon-fri")
    assert c.minutes == {0, 30}
    assert c.hours == {0, 4, 8, 12, 16, 20}
    assert c.days_of_month == {1, 4, 7, 10}
    assert c.months == {1, 2, 3}
    assert c.weekdays == {1, 2, 3, 4, 5}
    assert parse_cron("5/15 * * * *").minutes == {5, 20, 35, 50}  # N/S is N-max/S
    assert parse_cron("* * * * 7").weekdays == {0}  # 7 is Sunday too
    assert parse_cron("* * * * sun,sat").weekdays == {0, 6}


@pytest.mark.parametrize(
    ("expr", "field"),
    [
        ("60 * * * *", "cron.minute"),
        ("* 24 * * *", "cron.hour"),
        ("* * 0 * *", "cron.day-of-month"),
        ("* * * 13 *", "cron.month"),
        ("* * * foo *", "cron.month"),
        ("* * * * 8", "cron.day-of-week"),
        ("*/0 * * * *", "cron.minute"),
        ("5-1 * * * *", "cron.minute"),
        ("1,,2 * * * *", "cron.minute"),
        ("* * * *", "cron"),
    ],
)
def test_cron_errors_name_the_field(expr: str, field: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse_cron(expr)
    assert info.value.field == field


def test_cron_times_every_four_hours_for_five_days() -> None:
    start = _ns(2024, 6, 3, 0, 0)  # a Monday
    times = parse_cron("0 */4 * * *").times_ns(start, start + 5 * 86_400 * 10**9, UTC)
    assert len(times) == 30
    assert all(_local(t).minute == 0 and _local(t).hour % 4 == 0 for t in times)
    assert times == sorted(set(times))


def test_cron_day_of_month_or_day_of_week_when_both_restricted() -> None:
    start = _ns(2024, 6, 1, 0, 0)
    times = parse_cron("0 9 13 * fri").times_ns(start, _ns(2024, 7, 1, 0, 0), UTC)
    days = [_local(t).date() for t in times]
    # every Friday of June 2024, and the 13th (a Thursday): Vixie cron's OR
    assert days == [dt.date(2024, 6, d) for d in (7, 13, 14, 21, 28)]


def test_cron_reads_fields_in_the_time_zone() -> None:
    berlin = ZoneInfo("Europe/Berlin")
    start = _ns(2024, 1, 15, 0, 0)
    (t,) = parse_cron("30 9 * * *").times_ns(start, start + 86_400 * 10**9, berlin)
    assert _local(t, berlin).hour == 9 and _local(t).hour == 8  # CET is UTC+1 in January


def test_durations() -> None:
    assert parse_duration("4h", "--every") == 14_400
    assert parse_duration("1h30m", "--every") == 5_400
    assert parse_duration("2.5s", "--every") == 2.5
    assert parse_duration("1w", "--for") == 604_800
    for bad in ("", "4", "h", "4x", "4h 30m", "-1h"):
        with pytest.raises(ConfigError) as info:
            parse_duration(bad, "--every")
        assert info.value.field == "--every"


def test_every_slots_are_deterministic_and_jitter_stays_within_bounds() -> None:
    start = _ns(2024, 6, 3, 0, 0)
    s = Schedule(start, 5 * 86_400, every_s=4 * 3600, jitter_s=600, seed=7)
    slots = s.slots_ns()
    assert len(slots) == 30
    assert slots == Schedule(start, 5 * 86_400, every_s=4 * 3600, jitter_s=600, seed=7).slots_ns()
    assert slots != Schedule(start, 5 * 86_400, every_s=4 * 3600, jitter_s=600, seed=8).slots_ns()
    offsets = [t - n for t, n in zip(slots, s.nominal_ns(), strict=True)]
    assert all(0 <= o < 600 * 10**9 for o in offsets)
    assert len(set(offsets)) > 1  # not the same minute every time
    assert s.effective_grace_s() == 3600  # half of 4 h, capped at 1 h


def test_schedule_refusals() -> None:
    start = _ns(2024, 6, 3)
    with pytest.raises(ConfigError, match="exactly one"):
        Schedule(start, 3600, every_s=60, cron="* * * * *")
    with pytest.raises(ConfigError) as info:
        Schedule(start, 3600, every_s=60, jitter_s=60).slots_ns()
    assert info.value.field == "--jitter"
    with pytest.raises(ConfigError) as info:
        Schedule(start, 86_400 * 30, every_s=1).slots_ns()
    assert info.value.field == "--for"
    with pytest.raises(ConfigError) as info:
        Schedule(start, 3600, every_s=60, tz="Mars/Olympus")
    assert info.value.field == "--tz"
    with pytest.raises(ConfigError) as info:  # 29 February: not within one week of June
        Schedule(start, 7 * 86_400, cron="0 0 29 2 *").slots_ns()
    assert info.value.field == "--cron"


def test_fail_on_grammar() -> None:
    rules = parse_fail_on("p95>+20%, cold_start.p50>+2s,cost_per_1k>+10%,throughput<-10%")
    assert [(r.metric, r.op, r.limit, r.relative) for r in rules] == [
        ("p95", ">", 0.2, True),
        ("cold_start.p50", ">", 2000.0, False),
        ("cost_per_1k", ">", 0.1, True),
        ("throughput", "<", -0.1, True),
    ]
    (pp,) = parse_fail_on("error_rate>+0.5pp")
    assert pp.limit == pytest.approx(0.005) and not pp.relative
    assert parse_fail_on("cost_per_1k>+$0.25")[0].limit == 0.25
    assert parse_fail_on("p99>+150ms")[0].limit == 150.0


@pytest.mark.parametrize(
    ("expr", "expected"),
    [
        ("p96>+20%", "a metric among"),
        ("p95>20%", "a signed change"),
        ("p95>=+20%", "p95>CHANGE"),
        ("p95+20%", "p95>CHANGE"),
        ("p95>+20kg", "a unit for p95"),
        ("error_rate>+2s", "a unit for error_rate"),
        ("cost_per_1k>+2ms", "a unit for cost_per_1k"),
        ("p95>+20%,", "single commas"),
    ],
)
def test_fail_on_errors_are_clear(expr: str, expected: str) -> None:
    with pytest.raises(ConfigError, match=expected) as info:
        parse_fail_on(expr)
    assert info.value.field == "--fail-on"
