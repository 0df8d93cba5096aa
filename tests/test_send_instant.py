"""A request's start is when its bytes were handed to the socket (issue 32): the transport writes
a request in the step that sends it, ahead of callbacks already waiting in the loop's ready
queue, notes that instant, and the runner stores it as ``start_ns``, keeping the scheduled
instant apart. Real servers on loopback; the server notes when its handler read each request on
the same monotonic clock."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

import pytest
from aiohttp import web
from conftest import LoopbackServer, module_server

from gpubench_sdk import (
    Burst,
    ColdCheck,
    Load,
    PreparedCall,
    Provider,
    ProviderOptions,
    Request,
    Result,
    Scenario,
    Store,
    Workload,
    make_client,
    run,
    telemetry,
)
from gpubench_sdk._transport._request import record_calls

pytestmark = pytest.mark.anyio

READS: dict[str, int] = {}  # request id: perf_counter_ns when the handler read it


def _routes() -> web.RouteTableDef:
    routes = web.RouteTableDef()

    @routes.route("*", "/echo")
    async def echo(request: web.Request) -> web.Response:
        read = time.perf_counter_ns()
        body = await request.read()
        rid = request.headers.get("x-id", "")
        READS[rid] = read
        return web.Response(body=body, headers={"X-Request-Id": rid})

    return routes


server = module_server(_routes)


def _note_now(into: list[int]) -> None:
    into.append(time.perf_counter_ns())


@pytest.mark.parametrize("how", ["httpx", "prepared", "get"])
async def test_the_bytes_leave_before_callbacks_already_queued(
    server: LoopbackServer, how: str
) -> None:
    body = b'{"prompt": "x"}' * 50
    async with make_client() as client:
        call = PreparedCall(client, "POST", f"{server.url}/echo", headers={"x-id": how})
        for reused in (False, True):  # a new connection (it waits to connect), a kept-alive one
            ran: list[int] = []
            log = record_calls()
            # A callback already in the ready queue when the request is sent: the request's
            # bytes must not wait for it (nor, in a busy run, for every other stream's read).
            asyncio.get_running_loop().call_soon(_note_now, ran)
            if how == "prepared":
                answer = (await call.send(body)).content
            elif how == "httpx":
                response = await client.post(
                    f"{server.url}/echo", content=body, headers={"x-id": how}
                )
                answer = response.content
            else:
                response = await client.get(f"{server.url}/echo", headers={"x-id": how})
                answer = response.content
            assert answer == (b"" if how == "get" else body)  # the body arrived whole
            assert log.sent_ns is not None and ran
            assert log.sent_ns <= READS[how]  # noted before the server could read it
            if reused:
                assert log.sent_ns < ran[0]  # on the socket ahead of the queued callback


class _Queued(Provider):
    """Waits on the loop before it sends: the client's own time, never the provider's."""

    name = "queued"

    class Options(ProviderOptions):
        url: str

    async def invoke(self, request: Request) -> Result:
        await asyncio.sleep(0.02)
        rid = f"run-{request.seq}"
        url = self.options.url  # type: ignore[attr-defined]
        response = await self.client.post(url, content=b"{}", headers={"x-id": rid})
        return Result(output=None, http_status=response.status_code, request_id=rid)


class _Any(Workload):
    name = "any"

    def request(self, seq: int) -> Request:
        return Request(payload={}, seq=seq)

    def read(self, output: object) -> tuple[int | None, int | None]:
        return (None, None)


async def test_the_runner_starts_a_request_when_it_left(
    server: LoopbackServer, tmp_path: Path
) -> None:
    result = await run(
        {"q": _Queued(url=f"{server.url}/echo")}, _Any(), [Burst(total=6, concurrency=3)],
        store=tmp_path / "r.sqlite",
    )  # fmt: skip
    with Store(tmp_path / "r.sqlite") as store:
        origin = store.run(result.run_id).origin_ns
        invs = list(store.invocations(result.run_id))
    assert len(invs) == 6
    for inv in invs:
        assert inv.outcome.value == "ok"
        # scheduled, then the provider's 20 ms of its own, then the bytes left, then the read
        assert inv.start_ns - inv.scheduled_ns >= 20_000_000
        assert inv.send_lag_ms >= 20.0 and inv.latency_ms > inv.service_ms
        assert inv.start_ns + origin <= READS[f"run-{inv.seq}"] < inv.end_ns + origin


async def test_a_client_without_the_transport_keeps_the_invoke_start(tmp_path: Path) -> None:
    class Silent(Provider):
        name = "silent"

        async def invoke(self, request: Request) -> Result:
            await asyncio.sleep(0.01)
            return Result(output=None)

    result = await run(
        {"s": Silent()}, _Any(), [Burst(total=2, concurrency=1)],
        store=tmp_path / "r.sqlite",
    )  # fmt: skip
    with Store(tmp_path / "r.sqlite") as store:
        invs = list(store.invocations(result.run_id))
    assert all(i.service_ms >= 10.0 for i in invs)  # no send noted: from the invoke's start


@dataclass(frozen=True, slots=True)
class _SendThenCheck(Scenario):
    """One request, then a cold check in the same task: a call outside any invocation."""

    kind: ClassVar[str] = "send_then_check"
    name: str | None = None
    deadline_s: float | None = None

    def planned(self, targets: int) -> int:
        return targets

    def inflight(self) -> int:
        return 1

    async def drive(self, load: Load) -> None:
        for target in load.targets:
            await load.send(target, 0)
            await load.ensure_cold(target, 5.0)


class _Checked(_Queued):
    async def ensure_cold(self, timeout_s: float) -> ColdCheck:
        await self.client.get(self.options.url, headers={"x-id": "check"})  # type: ignore[attr-defined]
        return ColdCheck(True, 0.0, "checked")


async def test_spans_come_from_the_record_and_calls_after_it_stay_live(
    server: LoopbackServer, tmp_path: Path
) -> None:
    setup = telemetry.configure(in_memory=True, set_global=False)
    result = await run(
        {"q": _Checked(url=f"{server.url}/echo")}, _Any(), [_SendThenCheck()],
        store=tmp_path / "r.sqlite", instruments=setup.instruments(),
    )  # fmt: skip
    with Store(tmp_path / "r.sqlite") as store:
        (inv,) = store.invocations(result.run_id)
    assert setup.spans is not None
    spans = setup.spans.get_finished_spans()
    (invoke,) = [s for s in spans if s.name == telemetry.SPAN_INVOKE]
    assert invoke.start_time == inv.wall_start_ns  # made from the record: it starts at the send
    (post,) = [s for s in spans if s.name == "POST"]
    assert post.parent is not None and post.parent.span_id == invoke.context.span_id
    assert invoke.start_time <= post.start_time <= post.end_time <= invoke.end_time  # type: ignore[operator]
    (check,) = [s for s in spans if s.name == "GET"]  # the cold check's call: its own span
    assert check.parent is None and (check.attributes or {})["http.response.status_code"] == 200
