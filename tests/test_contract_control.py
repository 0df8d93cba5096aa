"""The plugin kit's control-plane pieces (``_contract._control``): ``read_scaling``, the
``ensure_cold`` steps, ``shielded``, ``held_json_call`` and ``ingress_call``, the last two
against a real server on loopback."""

from __future__ import annotations

import time

import anyio
import httpx
import pytest
from aiohttp import web
from conftest import LoopbackServer, module_server

from gpubench_sdk import (
    ColdMark,
    IngressOptions,
    InvalidResponseError,
    Polling,
    Provider,
    Request,
    Result,
    ScalingSettings,
    held_json_call,
    ingress_call,
    lower_min_workers,
    make_client,
    read_scaling,
    shielded,
    wait_cold,
)

pytestmark = pytest.mark.anyio


def test_read_scaling_reads_the_providers_fields_in_its_units() -> None:
    fields = {"workersMin": 1, "workersMax": "3", "idleTimeout": 2}
    settings = read_scaling(
        fields, "workersMin", "workersMax", "idleTimeout", provider="p", where="endpoint"
    )
    assert settings == ScalingSettings(min_workers=1, max_workers=3, idle_timeout_s=2.0)
    in_minutes = read_scaling(
        {"lo": 0, "hi": 2, "idle": 3}, "lo", "hi", "idle", provider="p", where="x", idle_unit_s=60
    )
    assert in_minutes.idle_timeout_s == 180.0
    no_idle_knob = read_scaling({"lo": 0, "hi": 2}, "lo", "hi", provider="p", where="x")
    assert no_idle_knob.idle_timeout_s is None


def test_read_scaling_gives_a_missing_or_null_idle_field_its_default() -> None:
    for fields in ({"lo": 0, "hi": 1}, {"lo": 0, "hi": 1, "idle": None}):
        with_default = read_scaling(
            fields, "lo", "hi", "idle", provider="p", where="x", idle_default=900
        )
        assert with_default.idle_timeout_s == 900
        unknown = read_scaling(
            fields, "lo", "hi", "idle", provider="p", where="x", idle_default=None
        )
        assert unknown.idle_timeout_s is None


@pytest.mark.parametrize(
    "fields",
    [
        {"hi": 1, "idle": 5},  # no min
        {"lo": 0, "hi": "many", "idle": 5},  # not a number
        {"lo": 0, "hi": 1},  # the idle field is required without a default
        {"lo": 0, "hi": 1, "idle": None},
    ],
)
def test_read_scaling_names_what_lacks_a_field(fields: dict[str, object]) -> None:
    with pytest.raises(InvalidResponseError, match="autoscaling_settings lacks a scaling field"):
        read_scaling(fields, "lo", "hi", "idle", provider="p", where="autoscaling_settings")


async def test_wait_cold_confirms_once_a_look_sees_the_fleet_cold() -> None:
    looks: list[float] = []
    mark = ColdMark()

    async def look() -> tuple[bool, str]:
        looks.append(time.monotonic())
        return len(looks) == 3, "0 workers" if len(looks) == 3 else f"{3 - len(looks)} up"

    check = await wait_cold(look, timeout_s=5, poll=Polling(0.01, 0.02), mark=mark)
    assert check.confirmed and check.how == "0 workers" and check.waited_s < 5
    assert len(looks) == 3 and looks[2] - looks[1] >= 0.015  # the backoff grew the delay
    assert mark.take() is True  # the next request is cold as a fact


async def test_wait_cold_answers_unconfirmed_inside_its_time() -> None:
    mark = ColdMark()

    async def look() -> tuple[bool, str]:
        return False, "1 idle"

    started = time.monotonic()
    # a fixed interval longer than the time: the wait is cut to the deadline, not overrun
    check = await wait_cold(look, timeout_s=0.3, poll=5.0, started=started, margin_s=0.1)
    elapsed = time.monotonic() - started
    assert not check.confirmed and check.how == "timed out: 1 idle"
    assert 0.2 <= elapsed < 0.3 and check.waited_s == pytest.approx(elapsed, abs=0.05)
    assert mark.take() is None


async def test_shielded_work_outlives_a_cancelled_run_and_a_stuck_one_is_given_up() -> None:
    done: list[str] = []

    async def restore() -> None:
        await anyio.sleep(0.05)
        done.append("restored")

    with anyio.CancelScope() as scope:
        scope.cancel()  # the run was cancelled before close()
        await shielded(restore())
    assert done == ["restored"]

    started = time.monotonic()
    await shielded(anyio.sleep(10), timeout_s=0.05)
    assert time.monotonic() - started < 5


def _app() -> web.RouteTableDef:
    routes = web.RouteTableDef()

    @routes.post("/ok")
    async def ok(request: web.Request) -> web.Response:
        body = await request.json()
        return web.json_response({"echo": body}, headers={"x-request-id": "req-7"})

    @routes.post("/busy")
    async def busy(request: web.Request) -> web.Response:
        return web.json_response({"error": "busy"}, status=503)

    @routes.post("/html")
    async def html(request: web.Request) -> web.Response:
        return web.Response(text="<html>", content_type="text/html")

    return routes


server = module_server(_app)


async def test_held_json_call_reads_the_answer_and_the_marks_verdict(
    server: LoopbackServer,
) -> None:
    mark = ColdMark(threshold_ms=60_000)
    kw = {"headers": {}, "mark": mark, "provider": "p", "request_id_header": "x-request-id"}
    async with make_client(timeout_s=10) as client:
        mark.expect()  # ensure_cold saw no worker
        first = await held_json_call(client, f"{server.url}/ok", {"a": 1}, **kw)
        assert first.output == {"echo": {"a": 1}} and first.request_id == "req-7"
        assert (first.cold, first.cold_confirmed, first.http_status) == (True, True, 200)
        assert first.first_byte_ns is not None
        second = await held_json_call(client, f"{server.url}/ok", {}, **kw)
        assert (second.cold, second.cold_confirmed) == (False, False)  # fast: inferred warm
        with pytest.raises(httpx.HTTPStatusError):  # invoke's boundary maps it
            await held_json_call(client, f"{server.url}/busy", {}, **kw)
        with pytest.raises(InvalidResponseError, match="not JSON"):
            await held_json_call(client, f"{server.url}/html", {}, **kw)


class _Service(Provider):
    name = "service"
    options: IngressOptions

    async def invoke(self, request: Request) -> Result:
        raise NotImplementedError


async def test_ingress_call_is_the_held_call_of_the_providers_client_name_and_header(
    server: LoopbackServer,
) -> None:
    mark = ColdMark()
    url = httpx.URL(f"{server.url}/ok")
    async with _Service(request_id_header="x-request-id") as service:
        mark.expect()
        result = await ingress_call(service, url, Request(seq=0, payload={"a": 1}), {}, mark)
    assert result.output == {"echo": {"a": 1}} and result.request_id == "req-7"
    assert (result.cold, result.cold_confirmed, result.http_status) == (True, True, 200)
    async with _Service(request_id_header="x-other") as service:
        other = await ingress_call(service, url, Request(seq=1, payload={}), {}, mark)
    assert other.request_id is None and other.cold is None  # the header it names; no verdict
    with pytest.raises(TypeError, match="IngressOptions"):
        await ingress_call(_Scaled(0), url, Request(seq=2, payload={}), {}, mark)


class _Scaled(Provider):
    name = "scaled"

    def __init__(self, min_workers: int) -> None:
        super().__init__()
        self.scaling = ScalingSettings(min_workers=min_workers, max_workers=3, idle_timeout_s=5)
        self.writes: list[ScalingSettings] = []

    async def invoke(self, request: Request) -> Result:
        raise NotImplementedError

    async def get_scaling(self) -> ScalingSettings:
        return self.scaling

    async def set_scaling(self, settings: ScalingSettings) -> None:
        self.writes.append(settings)


async def test_lower_min_workers_sets_zero_only_where_it_is_not() -> None:
    kept_warm = _Scaled(min_workers=2)
    assert (await lower_min_workers(kept_warm)).min_workers == 2  # the scaling before
    assert kept_warm.writes == [ScalingSettings(min_workers=0)]  # only that knob changed
    already = _Scaled(min_workers=0)
    assert (await lower_min_workers(already)).min_workers == 0
    assert already.writes == []
