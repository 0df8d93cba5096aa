"""The runner over real HTTP: scenarios, outcomes, timing, interleaving, stopping."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import anyio
import numpy as np
import pytest
from conftest import EchoProvider, LoopbackServer

from gpubench_sdk import (
    Burst,
    ColdStarts,
    ConfigError,
    EchoProbe,
    Invocation,
    Outcome,
    Phase,
    Provider,
    Rate,
    Request,
    Result,
    Runner,
    RunResult,
    Store,
    ThrottledError,
    run,
)
from gpubench_sdk._store._store import RetryAfter

pytestmark = pytest.mark.anyio


async def run_then_stop(runner: Runner, after_s: float) -> RunResult:
    """Run, calling ``runner.stop()`` (as Ctrl-C does) ``after_s`` seconds in."""
    async with anyio.create_task_group() as tg:

        async def stop_soon() -> None:
            await anyio.sleep(after_s)
            runner.stop()

        tg.start_soon(stop_soon)
        result = await runner.run()
    return result


async def test_burst_records_every_request(echo_server: LoopbackServer, tmp_path: Path) -> None:
    store = tmp_path / "r.sqlite"
    result = await run(
        {"a": EchoProvider(url=echo_server.url)},
        EchoProbe(sleep_ms=2),
        [Burst(total=40, concurrency=5, warmup=3)],
        store=store,
    )
    assert result.status == "completed"
    with Store(store) as s:
        invs = s.invocations(result.run_id)
    measured = [i for i in invs if i.phase is Phase.MEASURE]
    assert sorted(i.seq for i in measured) == list(range(40))
    assert len([i for i in invs if i.phase is Phase.WARMUP]) == 3
    for inv in measured:
        assert inv.outcome is Outcome.OK
        assert inv.scheduled_ns <= inv.start_ns <= inv.first_byte_ns <= inv.end_ns  # type: ignore[operator]
        assert inv.latency_ms >= 2.0  # the server slept 2 ms
        assert inv.request_id == "req-1" and inv.execution_ms == 1.5
    # closed loop: never more than `concurrency` requests overlap
    events = sorted([(i.start_ns, 1) for i in measured] + [(i.end_ns, -1) for i in measured])
    assert max(np.cumsum([d for _, d in events])) <= 5


@pytest.mark.parametrize(
    ("mode", "outcome", "status"),
    [
        ("429", Outcome.THROTTLED, 429),
        ("404", Outcome.HTTP_4XX, 404),
        ("503", Outcome.HTTP_5XX, 503),
        ("garbage", Outcome.INVALID_RESPONSE, None),
        ("reset", Outcome.TRANSPORT, None),
    ],
)
async def test_failures_map_to_the_taxonomy(
    echo_server: LoopbackServer, tmp_path: Path, mode: str, outcome: Outcome, status: int | None
) -> None:
    result = await run(
        {"a": EchoProvider(url=echo_server.url, mode=mode)},
        EchoProbe(),
        [Burst(total=3, concurrency=1)],
        store=tmp_path / "r.sqlite",
    )
    assert result.status == "completed"  # failures are data, not crashes
    with Store(tmp_path / "r.sqlite") as s:
        invs = s.invocations(result.run_id)
    assert [i.outcome for i in invs] == [outcome] * 3
    assert all(i.http_status == status for i in invs)
    assert all(i.error for i in invs)
    # the server's Retry-After: 1 on its 429s is kept, per request
    assert [i.retry_after_s for i in invs] == [1.0 if mode == "429" else None] * 3


async def test_connection_refused_is_transport(tmp_path: Path) -> None:
    result = await run(
        {"a": EchoProvider(url="http://127.0.0.1:9")},
        EchoProbe(),
        [Burst(total=2, concurrency=1)],
        store=tmp_path / "r.sqlite",
    )
    with Store(tmp_path / "r.sqlite") as s:
        assert {i.outcome for i in s.invocations(result.run_id)} == {Outcome.TRANSPORT}


async def test_timeout_outcome(echo_server: LoopbackServer, tmp_path: Path) -> None:
    result = await run(
        {"a": EchoProvider(url=echo_server.url, timeout_s=0.05)},
        EchoProbe(sleep_ms=500),
        [Burst(total=1, concurrency=1)],
        store=tmp_path / "r.sqlite",
    )
    with Store(tmp_path / "r.sqlite") as s:
        (inv,) = s.invocations(result.run_id)
    assert inv.outcome is Outcome.TIMEOUT
    assert inv.service_ms < 400


async def _stored(
    tmp_path: Path, providers: dict[str, Any], probe: Any, scenarios: list[Any], **kw: Any
) -> list[Invocation]:
    """``run`` into a store under ``tmp_path``: the invocations it stored, in ``seq`` order."""
    result = await run(providers, probe, scenarios, store=tmp_path / "r.sqlite", **kw)
    with Store(tmp_path / "r.sqlite") as s:
        return sorted(s.invocations(result.run_id), key=lambda i: i.seq)


async def test_invalid_echo_is_invalid_response(tmp_path: Path) -> None:
    from aiohttp import web

    async def wrong(request: web.Request) -> web.Response:
        return web.json_response(
            {"output": {"echo": "not it"}, "id": "x", "execution_ms": 1, "queue_ms": 0}
        )

    app = web.Application()
    app.router.add_post("/invoke", wrong)
    with LoopbackServer(app) as server:
        invs = await _stored(
            tmp_path, {"a": EchoProvider(url=server.url)}, EchoProbe(), [Burst(2, 1)]
        )
    assert {i.outcome for i in invs} == {Outcome.INVALID_RESPONSE}


async def test_rate_counts_latency_from_the_schedule(
    echo_server: LoopbackServer, tmp_path: Path
) -> None:
    # one request in flight at most and a 50 ms server: at 40 req/s the client must fall
    # behind; latency (from the schedule) must then exceed service time by the send lag
    invs = await _stored(
        tmp_path,
        {"a": EchoProvider(url=echo_server.url)},
        EchoProbe(sleep_ms=50),
        [Rate(rps=40, duration_s=0.5, max_inflight=1)],
        monitor=False,
    )
    assert len(invs) == 20
    gaps = np.diff([i.scheduled_ns for i in invs]) / 1e6
    assert np.allclose(gaps, 25.0, atol=0.01)  # the schedule is exact: 1/40 s apart
    last = invs[-1]
    assert last.send_lag_ms > 200  # 20 requests x 50 ms cannot fit in 0.5 s
    assert last.latency_ms == pytest.approx(last.service_ms + last.send_lag_ms, abs=0.01)


async def test_poisson_arrivals_are_seeded() -> None:
    a = list(Rate(rps=100, duration_s=5, arrivals="poisson", seed=3).offsets_s())
    b = list(Rate(rps=100, duration_s=5, arrivals="poisson", seed=3).offsets_s())
    assert a == b and 400 < len(a) < 600
    gaps = np.diff(a)
    assert 0.8 < np.std(gaps) / np.mean(gaps) < 1.2  # exponential gaps: CV close to 1


async def test_targets_run_side_by_side(tmp_path: Path) -> None:
    with (
        LoopbackServer(__import__("conftest").echo_app()) as s1,
        LoopbackServer(__import__("conftest").echo_app()) as s2,
    ):
        result = await run(
            {"one": EchoProvider(url=s1.url), "two": EchoProvider(url=s2.url)},
            EchoProbe(sleep_ms=5),
            [Burst(total=30, concurrency=2), Rate(rps=50, duration_s=0.4)],
            store=tmp_path / "r.sqlite",
        )
    with Store(tmp_path / "r.sqlite") as s:
        invs = s.invocations(result.run_id)
    for sidx in (0, 1):
        one = [i for i in invs if i.target == "one" and i.scenario == sidx]
        two = [i for i in invs if i.target == "two" and i.scenario == sidx]
        assert len(one) == len(two) > 0
        # interleaved: the two targets' windows overlap almost entirely
        overlap = min(max(i.end_ns for i in one), max(i.end_ns for i in two)) - max(
            min(i.start_ns for i in one), min(i.start_ns for i in two)
        )
        span = max(i.end_ns for i in one + two) - min(i.start_ns for i in one + two)
        assert overlap / span > 0.8
    rate_one = sorted(i.scheduled_ns for i in invs if i.target == "one" and i.scenario == 1)
    rate_two = sorted(i.scheduled_ns for i in invs if i.target == "two" and i.scenario == 1)
    assert np.max(np.abs(np.subtract(rate_one, rate_two))) < 2e6  # same schedule, within 2 ms


class CountingProvider(EchoProvider):
    """Counts the requests it has answered, so a test can stop a run after enough of them
    (a fixed delay measures nothing on a loaded machine that takes that long to start)."""

    answered = 0
    enough: anyio.Event

    async def invoke(self, request: Any) -> Any:
        result = await super().invoke(request)
        type(self).answered += 1
        if type(self).answered >= 30:
            type(self).enough.set()
        return result


async def test_stop_keeps_what_was_measured(echo_server: LoopbackServer, tmp_path: Path) -> None:
    CountingProvider.answered, CountingProvider.enough = 0, anyio.Event()
    runner = Runner(
        {"a": CountingProvider(url=echo_server.url)},
        EchoProbe(sleep_ms=20),
        [Burst(total=10_000, concurrency=4)],
        store=tmp_path / "r.sqlite",
    )
    async with anyio.create_task_group() as tg:

        async def stop_after_enough() -> None:
            with anyio.move_on_after(30):
                await CountingProvider.enough.wait()
            runner.stop()

        tg.start_soon(stop_after_enough)
        result = await runner.run()
    assert result.status == "cancelled"
    with Store(tmp_path / "r.sqlite") as s:
        info = s.run(result.run_id)
        invs = s.invocations(result.run_id)
    assert info.status == "cancelled"
    ok = [i for i in invs if i.outcome is Outcome.OK]
    cancelled = [i for i in invs if i.outcome is Outcome.CANCELLED]
    assert len(ok) > 20
    assert 1 <= len(cancelled) <= 4  # the ones in flight at the stop, each recorded
    assert len(invs) == result.requests


async def test_max_requests_limits_the_run(echo_server: LoopbackServer, tmp_path: Path) -> None:
    result = await run(
        {"a": EchoProvider(url=echo_server.url)},
        EchoProbe(),
        [Burst(100, 1)],
        store=tmp_path / "r.sqlite",
        max_requests=7,
    )
    assert result.status == "completed" and result.stop_reason == "max_requests reached"
    with Store(tmp_path / "r.sqlite") as s:
        assert len(s.invocations(result.run_id)) == 7
        assert s.run(result.run_id).error == "max_requests reached"  # why it stopped, kept


class GuessingProvider(EchoProvider):
    """Says "cold" from a timing guess for the first request, and as a fact for the second."""

    async def invoke(self, request: Request) -> Result:
        result = await super().invoke(request)
        result.cold = request.seq < 2
        result.cold_confirmed = request.seq == 1
        return result


async def test_a_guessed_cold_start_is_not_stored_as_confirmed(
    echo_server: LoopbackServer, tmp_path: Path
) -> None:
    provider = GuessingProvider(url=echo_server.url)
    invs = await _stored(tmp_path, {"a": provider}, EchoProbe(), [Burst(3, 1)])
    assert [(i.cold, i.cold_confirmed) for i in invs] == [
        (True, False),
        (True, True),
        (False, False),
    ]


async def test_cold_starts_without_control_need_an_idle_gap(
    echo_server: LoopbackServer, tmp_path: Path
) -> None:
    with pytest.raises(ConfigError, match=r"cold_starts\.idle_gap_s"):  # before anything is sent
        await run(
            {"a": EchoProvider(url=echo_server.url)},
            EchoProbe(),
            [ColdStarts(1)],
            store=tmp_path / "r.sqlite",
        )
    assert not (tmp_path / "r.sqlite").exists()


async def test_cold_starts_inferred_by_idle_gap(
    echo_server: LoopbackServer, tmp_path: Path
) -> None:
    started = time.perf_counter()
    result = await run(
        {"a": EchoProvider(url=echo_server.url)},
        EchoProbe(),
        [ColdStarts(2, idle_gap_s=0.2, warm_after=1)],
        store=tmp_path / "r.sqlite",
    )
    assert time.perf_counter() - started >= 0.4
    with Store(tmp_path / "r.sqlite") as s:
        invs = sorted(s.invocations(result.run_id), key=lambda i: i.seq)
    assert [(i.cold, i.cold_confirmed) for i in invs] == [(True, False), (False, False)] * 2


def test_bad_runner_arguments(tmp_path: Path) -> None:
    p = EchoProvider(url="http://127.0.0.1:9")
    with pytest.raises(ConfigError, match="targets"):
        Runner({}, EchoProbe(), [Burst(1, 1)], store=tmp_path / "x")
    with pytest.raises(ConfigError, match="scenarios"):
        Runner({"a": p}, EchoProbe(), [], store=tmp_path / "x")
    with pytest.raises(ConfigError, match=r"burst.concurrency: got 0"):
        Burst(total=1, concurrency=0)


async def test_a_provider_the_caller_opened_is_not_reopened(
    echo_server: LoopbackServer, tmp_path: Path
) -> None:
    provider = EchoProvider(url=echo_server.url)
    async with provider:
        client = provider.client
        await run({"a": provider}, EchoProbe(), [Burst(2, 1)], store=tmp_path / "a.sqlite")
        assert provider.client is client  # the runner's exit did not close it under us
        await run({"a": provider}, EchoProbe(), [Burst(2, 1)], store=tmp_path / "a.sqlite")
    with pytest.raises(RuntimeError, match="not open"):
        _ = provider.client


class Scripted(Provider):
    """A provider whose behaviour each test scripts: no HTTP, so only the runner is tested."""

    name = "scripted"

    def __init__(self, behave: Any, **kw: Any) -> None:
        super().__init__(**kw)
        self.behave = behave
        self.closed_cleanly = False

    async def invoke(self, request: Request) -> Any:
        return await self.behave(request)

    async def close(self) -> None:
        await anyio.sleep(0.05)  # restoring settings takes a moment, even when stopped
        self.closed_cleanly = True


async def _ok(request: Request) -> Result:
    await anyio.sleep(0.002)
    return Result(output={"echo": request.payload["echo"]})


async def test_providers_close_fully_when_a_run_is_stopped(tmp_path: Path) -> None:
    provider = Scripted(_ok)
    runner = Runner({"a": provider}, EchoProbe(), [Burst(100_000, 2)], store=tmp_path / "r.sqlite")
    result = await run_then_stop(runner, after_s=0.2)
    assert result.status == "cancelled"
    assert provider.closed_cleanly  # close() ran to its end outside the cancelled scope


async def test_cancelling_the_callers_scope_records_cancelled(tmp_path: Path) -> None:
    with anyio.move_on_after(0.2):
        await run(
            {"a": Scripted(_ok)}, EchoProbe(), [Burst(100_000, 2)], store=tmp_path / "r.sqlite"
        )
    with Store(tmp_path / "r.sqlite") as s:
        assert s.runs()[0].status == "cancelled"


async def test_max_requests_lets_requests_in_flight_finish(tmp_path: Path) -> None:
    result = await run(
        {"a": Scripted(_ok)},
        EchoProbe(),
        [Burst(100, 4), Burst(50, 2)],
        store=tmp_path / "r.sqlite",
        max_requests=10,
    )
    assert result.status == "completed" and result.stop_reason == "max_requests reached"
    with Store(tmp_path / "r.sqlite") as s:
        invs = s.invocations(result.run_id)
    assert len(invs) == 10 and all(i.outcome is Outcome.OK for i in invs)


async def test_per_request_deadline_is_enforced_by_the_runner(tmp_path: Path) -> None:
    async def hang(request: Request) -> Result:
        await anyio.sleep(30)  # e.g. a job that polls forever
        raise AssertionError

    result = await run(
        {"a": Scripted(hang, timeout_s=0.2)},
        EchoProbe(),
        [Burst(2, 2)],
        store=tmp_path / "r.sqlite",
    )
    with Store(tmp_path / "r.sqlite") as s:
        invs = s.invocations(result.run_id)
    assert [i.outcome for i in invs] == [Outcome.TIMEOUT] * 2
    assert all(190 < i.service_ms < 1000 for i in invs)
    assert "timeout_s=0.2" in (invs[0].error or "")


async def test_plugin_mistakes_are_recorded_not_raised(tmp_path: Path) -> None:
    async def not_a_result(request: Request) -> Any:
        return {"output": "a dict, not a Result"}

    async def wrong_clock(request: Request) -> Result:
        return Result(output={"echo": request.payload["echo"]}, first_byte_ns=time.time_ns())

    seen: list[Invocation] = []

    def bad_observer(inv: Invocation) -> None:
        seen.append(inv)
        raise RuntimeError("progress bar broke")

    result = await run(
        {"a": Scripted(not_a_result), "b": Scripted(wrong_clock)},
        EchoProbe(),
        [Burst(3, 1)],
        store=tmp_path / "r.sqlite",
        observers=[bad_observer],
    )
    assert result.status == "completed" and len(seen) == 6
    with Store(tmp_path / "r.sqlite") as s:
        invs = s.invocations(result.run_id)
    a = [i for i in invs if i.target == "a"]
    b = [i for i in invs if i.target == "b"]
    assert {i.outcome for i in a} == {Outcome.INVALID_RESPONSE}
    assert "not Result" in (a[0].error or "")
    assert {i.outcome for i in b} == {Outcome.OK}
    assert all(i.first_byte_ns is None for i in b)  # a wall-clock value is dropped, not stored


async def test_a_saturated_target_does_not_delay_the_others_schedule(tmp_path: Path) -> None:
    async def slow(request: Request) -> Result:
        await anyio.sleep(0.1)
        return Result(output={"echo": request.payload["echo"]})

    result = await run(
        {"fast": Scripted(_ok), "slow": Scripted(slow)},
        EchoProbe(),
        [Rate(rps=50, duration_s=0.6, max_inflight=1)],
        store=tmp_path / "r.sqlite",
        monitor=False,
    )
    with Store(tmp_path / "r.sqlite") as s:
        invs = s.invocations(result.run_id)
    fast = [i.latency_ms for i in invs if i.target == "fast"]
    slow_lat = [i.latency_ms for i in invs if i.target == "slow"]
    assert len(fast) == len(slow_lat) == 30
    assert max(fast) < 50  # its own schedule, unaffected
    assert max(slow_lat) > 1000  # 30 x 100 ms in 0.6 s: the slow one falls far behind


async def test_a_spent_budget_stops_waiting_for_cold_starts(tmp_path: Path) -> None:
    started = time.perf_counter()
    result = await run(
        {"a": Scripted(_ok)},
        EchoProbe(),
        [ColdStarts(5, idle_gap_s=0.5, warm_after=0)],
        store=tmp_path / "r.sqlite",
        max_requests=1,
    )
    assert time.perf_counter() - started < 1.5  # one idle gap, not five
    assert result.requests == 1 and result.stop_reason == "max_requests reached"


def test_rate_never_sends_ahead_of_schedule_under_uvloop(tmp_path: Path) -> None:
    # uvloop's timers have millisecond resolution and fire up to 1 ms early; the schedule
    # must still hold: no request leaves before its scheduled time.
    from gpubench_sdk._runner._multiproc import run_blocking

    runner = Runner(
        {"a": Scripted(_ok)},
        EchoProbe(),
        [Rate(rps=300, duration_s=0.5, arrivals="poisson")],
        store=tmp_path / "r.sqlite",
        monitor=False,
    )
    result = run_blocking(runner)  # uvloop, as the CLI runs
    with Store(tmp_path / "r.sqlite") as s:
        invs = s.invocations(result.run_id)
    offsets = list(Rate(rps=300, duration_s=0.5, arrivals="poisson").offsets_s())
    assert len(invs) == len(offsets)
    scheduled = sorted(i.scheduled_ns for i in invs)
    planned = [scheduled[0] + int((o - offsets[0]) * 1e9) for o in offsets]
    assert max(abs(a - b) for a, b in zip(scheduled, planned, strict=True)) < 20_000  # 20 us


# -- signals kept, deadlines said, plans sized in O(1) ---------------------------------------


async def test_retry_after_is_stored_per_request_and_summarised(tmp_path: Path) -> None:
    waits = iter([2.0, None, 4.0, 3.0])

    async def throttle(request: Request) -> Result:
        raise ThrottledError("slow down", provider="p", status_code=429, retry_after_s=next(waits))

    result = await run(
        {"a": Scripted(throttle), "b": Scripted(_ok)},
        EchoProbe(),
        [Burst(4, 1)],
        store=tmp_path / "r.sqlite",
    )
    with Store(tmp_path / "r.sqlite") as s:
        invs = [i for i in s.invocations(result.run_id) if i.target == "a"]
        summary = s.retry_after(result.run_id)
        cols = s.columns(result.run_id, target="a")
    assert sorted(i.retry_after_s or 0 for i in invs) == [0, 2.0, 3.0, 4.0]
    assert summary == {"a": RetryAfter(count=3, median_s=3.0, max_s=4.0)}  # b: none
    assert np.nansum(cols["retry_after_s"]) == 9.0


def test_retry_after_header_in_seconds_or_as_a_date() -> None:
    from datetime import UTC, datetime, timedelta
    from email.utils import format_datetime

    import httpx

    from gpubench_sdk._runner._runner import retry_after_s

    def throttled(value: str) -> httpx.HTTPStatusError:
        request = httpx.Request("POST", "http://h.test/")
        response = httpx.Response(429, headers={"Retry-After": value}, request=request)
        return httpx.HTTPStatusError("429", request=request, response=response)

    assert retry_after_s(throttled("7")) == 7.0
    later = format_datetime(datetime.now(UTC) + timedelta(seconds=120), usegmt=True)
    assert 100 < (retry_after_s(throttled(later)) or 0) <= 121
    assert retry_after_s(throttled("soon")) is None
    assert retry_after_s(ValueError("not throttled")) is None


async def test_a_scenario_cut_by_its_deadline_is_said_to_be(tmp_path: Path) -> None:
    async def slow(request: Request) -> Result:
        await anyio.sleep(0.2)
        return Result(output={"echo": request.payload["echo"]})

    result = await run(
        {"a": Scripted(slow)},
        EchoProbe(),
        [Burst(1_000, 4, deadline_s=0.5), Burst(2, 1)],
        store=tmp_path / "r.sqlite",
    )
    assert result.status == "completed" and result.deadline_cut == (0,)
    with Store(tmp_path / "r.sqlite") as s:
        info = s.run(result.run_id)
        invs = s.invocations(result.run_id)
    assert [sc.status for sc in info.scenarios] == ["deadline", None]
    cut = [i for i in invs if i.scenario == 0 and i.outcome is Outcome.CANCELLED]
    assert cut and all("deadline_s" in (i.error or "") for i in cut)
    assert len([i for i in invs if i.scenario == 0]) < 1_000
    assert len([i for i in invs if i.scenario == 1 and i.ok]) == 2


def test_planned_counts_are_o1_and_absurd_plans_are_refused() -> None:
    began = time.perf_counter()
    day = Rate(rps=10_000, duration_s=86_400)  # 864 million arrivals: counted, not drawn
    assert day.planned(2) == 2 * 864_000_000
    poisson = Rate(rps=1_000, duration_s=3_600, arrivals="poisson", seed=7)
    assert poisson.planned(1) == 3_600_000  # the expected count
    assert time.perf_counter() - began < 0.5  # was minutes (one Python step per arrival)
    drawn = sum(1 for _ in Rate(rps=200, duration_s=5, arrivals="poisson", seed=3).offsets_s())
    assert abs(drawn - Rate(rps=200, duration_s=5, arrivals="poisson").planned(1)) < 5 * 32
    for kwargs, field in (
        ({"rps": 1e9, "duration_s": 1e9}, "rate.rps"),
        ({"rps": 1e6, "duration_s": 1e6, "arrivals": "poisson"}, "rate.duration_s"),
        ({"rps": 5, "duration_s": 1, "deadline_s": 0}, "rate.deadline_s"),
        ({"rps": 5, "duration_s": 1, "deadline_s": -1}, "rate.deadline_s"),
    ):
        with pytest.raises(ConfigError) as info:
            Rate(**kwargs)  # type: ignore[arg-type]
        assert info.value.field == field
    for make, field in (
        (lambda: ColdStarts(1, idle_gap_s=0, deadline_s=0), "cold_starts.deadline_s"),
        (lambda: ColdStarts(1, idle_gap_s=0, deadline_s=-1), "cold_starts.deadline_s"),
        (lambda: Burst(10**10, 1), "burst.total"),
    ):
        with pytest.raises(ConfigError) as info:
            make()
        assert info.value.field == field


async def test_what_exists_at_the_start_is_out_of_the_collectors_sight_during_the_run(
    echo_server: LoopbackServer, tmp_path: Path
) -> None:
    """The collector's full passes stop the loop for everything it tracks (imports included:
    210 ms a pass, profiled); the run freezes what exists before its first request and
    unfreezes it after, and leaves a caller's own ``gc.freeze`` alone."""
    import gc

    frozen: list[int] = []

    def note(inv: Invocation) -> None:
        frozen.append(gc.get_freeze_count())

    async def once() -> RunResult:
        return await run(
            {"a": EchoProvider(url=echo_server.url)},
            EchoProbe(),
            [Burst(total=3, concurrency=1)],
            store=tmp_path / "r.sqlite",
            observers=[note],
        )

    assert gc.get_freeze_count() == 0
    assert (await once()).status == "completed"
    assert len(frozen) == 3 and min(frozen) > 10_000  # gpubench, httpx, numpy, ... frozen
    assert gc.get_freeze_count() == 0  # and back in sight after the run
    gc.freeze()  # the caller's own
    try:
        mine = gc.get_freeze_count()
        frozen.clear()
        assert (await once()).status == "completed"
        # not unfrozen by the run (the count falls by what was freed meanwhile)
        assert gc.get_freeze_count() > mine * 0.9
    finally:
        gc.unfreeze()
