"""The builder's answers for what emulators' routes repeat (``Emulator.sse``, ``static``,
``finished``, ``calls``, ``later``), ``InFlight``, ``Operations`` and ``EmulatorArgs.own``,
served on real loopback sockets."""

from __future__ import annotations

import json
import time
from typing import Any

import httpx
import pytest
from pydantic import SecretStr
from starlette.requests import Request

from gpubench_sdk import KeyScheme, key_headers
from gpubench_sdk.testing import (
    Emulator,
    EmulatorParser,
    InFlight,
    JobStatus,
    KeyCheck,
    Operations,
    Reject,
    follow,
    quick_fleet,
    serve,
    sse_event,
)


def test_an_event_is_json_after_data_in_either_spacing() -> None:
    assert sse_event({"a": [1, 2]}) == b'data: {"a": [1, 2]}\n\n'
    assert sse_event({"a": [1, 2]}, compact=True) == b'data:{"a":[1,2]}\n\n'


def test_a_stream_frames_each_value_ends_with_its_marker_and_closes_once() -> None:
    fleet = quick_fleet(0.0)
    emu = Emulator(fleet, name="Acme")
    closed: list[str] = []

    @emu.route("/stream", "POST")
    async def stream(request: Request) -> Any:
        job = emu.submit(await emu.read_json(request))
        return emu.sse(follow(job), end="[DONE]", on_close=lambda: closed.append(job.id))

    with serve(emu.app()) as served:
        answer = httpx.post(f"{served.url}/stream", json={"chunks": 2, "sleep_ms": 20}, timeout=10)
    assert answer.headers["content-type"].startswith("text/event-stream")
    events = [line.removeprefix("data: ") for line in answer.text.split("\n\n") if line]
    assert [json.loads(e)["chunk"] for e in events[:-1]] == [0, 1]
    assert events[-1] == "[DONE]"
    assert closed == [fleet.truths()[0].job_id]


def test_a_client_leaving_a_stream_runs_its_close_and_the_job_is_cancelled() -> None:
    fleet = quick_fleet(0.0)
    emu = Emulator(fleet, name="Acme")

    @emu.route("/stream", "POST")
    async def stream(request: Request) -> Any:
        job = emu.submit(await emu.read_json(request))
        return emu.sse(follow(job), on_close=lambda: fleet.cancel(job.id))

    with serve(emu.app()) as served:
        body = {"chunks": 100, "sleep_ms": 30_000}
        with httpx.stream("POST", f"{served.url}/stream", json=body, timeout=10) as answer:
            first = next(answer.iter_lines())  # one piece came: then the client hangs up
        assert json.loads(first.removeprefix("data: "))["chunk"] == 0
        fleet.wait_for(lambda c: c.cancelled == 1, 10)
    assert fleet.truths()[0].status is JobStatus.CANCELLED


@pytest.mark.parametrize(
    ("scheme", "headers"),
    [
        ("bearer", {"authorization": "Bearer k:s"}),
        ("api-key", {"authorization": "Api-Key k:s"}),
        ("key", {"authorization": "Key k:s"}),
        ("modal", {"modal-key": "k", "modal-secret": "s"}),
    ],
)
def test_a_key_check_reads_the_key_as_the_providers_scheme_sends_it(
    scheme: KeyScheme, headers: dict[str, str]
) -> None:
    check = KeyCheck.sent_as(scheme, "k:s", message="no")
    assert check.accepts(headers) and check.message == "no"
    assert check.accepts(httpx.Headers(key_headers(SecretStr("k:s"), scheme)))  # as sent
    assert not check.accepts({}) and not check.accepts({"authorization": "Other k:s"})
    assert KeyCheck.sent_as("none", "k:s").accepts({})


def test_a_static_route_answers_its_json_every_time_behind_the_check_unless_skipped() -> None:
    emu = Emulator(quick_fleet(0.0), name="Acme", check=KeyCheck("k"))
    emu.static("/v2/health/live", {"live": True}, check=False)
    emu.static("/info", {"model": "m", "sizes": [1, 2]})

    with serve(emu.app()) as served:
        for _ in range(2):
            live = httpx.get(f"{served.url}/v2/health/live", timeout=10)
            assert (live.status_code, live.json()) == (200, {"live": True})
        assert httpx.get(f"{served.url}/info", timeout=10).status_code == 401
        info = httpx.get(f"{served.url}/info", headers={"Authorization": "Bearer k"}, timeout=10)
        assert info.json() == {"model": "m", "sizes": [1, 2]}
        assert httpx.post(f"{served.url}/info", timeout=10).status_code == 405  # GET only


def test_finished_answers_a_completed_job_and_rejects_a_failed_one_in_the_error_body() -> None:
    fleet = quick_fleet(0.0)
    emu = Emulator(fleet, name="Acme")

    @emu.route("/text", "POST")
    async def text(request: Request) -> Any:
        job = emu.submit(await emu.read_json(request))
        return (await emu.finished(request, job, "it failed: {error}")).result

    @emu.route("/own", "POST")
    async def own(request: Request) -> Any:
        job = emu.submit(await emu.read_json(request))
        await emu.finished(request, job, lambda job: Reject(424, f"{job.status.value}"))
        return job.result

    with serve(emu.app()) as served:
        assert httpx.post(f"{served.url}/text", json={"echo": "a"}).json() == {"echo": "a"}
        failed = httpx.post(f"{served.url}/text", json={"fail": "boom"})
        assert (failed.status_code, failed.json()) == (500, {"error": "it failed: boom"})
        own_failed = httpx.post(f"{served.url}/own", json={"fail": "boom"})
        assert (own_failed.status_code, own_failed.json()) == (424, {"error": "failed"})
        with pytest.raises(httpx.ReadTimeout):  # the client gives up: its job is cancelled
            httpx.post(f"{served.url}/text", json={"sleep_ms": 30_000}, timeout=0.5)
        fleet.wait_for(lambda c: c.cancelled == 1, 10)


def test_calls_serve_posts_behind_their_own_check_with_plain_text_errors() -> None:
    fleet = quick_fleet(0.0)
    emu = Emulator(fleet, name="Acme", check=KeyCheck("control-key"))
    emu.calls(check=KeyCheck("ingress-key"))
    signed = {"Authorization": "Bearer ingress-key"}
    with serve(emu.app()) as served:
        called = httpx.post(f"{served.url}/any/path", json={"echo": 1}, headers=signed)
        assert called.json() == {"echo": 1}
        assert called.headers["x-request-id"] == fleet.truths()[0].job_id
        wrapped = httpx.post(served.url + "/", json=[1], headers=signed)
        assert wrapped.json() == {"echo": None}  # a bare value runs as {"input": value}
        refused = httpx.post(f"{served.url}/x", json={}, headers={"Authorization": "Bearer no"})
        assert (refused.status_code, refused.text) == (401, "Unauthorized")
        got = httpx.get(f"{served.url}/x", headers=signed)
        assert (got.status_code, got.text) == (405, "method not allowed")
        failed = httpx.post(f"{served.url}/x", json={"fail": "oom"}, headers=signed)
        assert (failed.status_code, failed.text) == (500, "container error: oom")


def test_later_fires_once_and_not_after_the_app_stops() -> None:
    fleet = quick_fleet(0.0)
    emu = Emulator(fleet, name="Acme")
    fired: list[str] = []

    @emu.route("/later", "POST")
    async def later(request: Request) -> Any:
        body = await emu.read_json(request)
        emu.later(body["delay_s"], fired.append, body["name"])
        return {}

    with serve(emu.app()) as served:
        httpx.post(f"{served.url}/later", json={"delay_s": 0.01, "name": "soon"})
        httpx.post(f"{served.url}/later", json={"delay_s": 0.5, "name": "after stop"})
        deadline = time.monotonic() + 5
        while not fired and time.monotonic() < deadline:
            time.sleep(0.01)
    time.sleep(0.6)
    assert fired == ["soon"]


def test_in_flight_counts_against_its_cap() -> None:
    in_flight = InFlight(2)
    in_flight.enter()
    with in_flight:
        assert (in_flight.count, in_flight.full) == (2, True)
    assert (in_flight.count, in_flight.full) == (1, False)
    in_flight.leave()
    assert in_flight.count == 0


def test_an_operation_is_done_after_its_delay_and_an_unknown_one_is_a_404() -> None:
    fleet = quick_fleet(0.0)
    emu = Emulator(fleet, name="Acme")
    operations = Operations(delay_s=0.2, missing="no operation {name}")

    @emu.route("/start", "POST")
    async def start(request: Request) -> Any:
        return {"name": operations.start(result={"ok": True})}

    @emu.route("/operations/{name}")
    async def operation(request: Request) -> Any:
        done, result = operations.status(request.path_params["name"])
        return {"done": done, "result": result}

    with serve(emu.app()) as served:
        name = httpx.post(f"{served.url}/start").json()["name"]
        assert httpx.get(f"{served.url}/operations/{name}").json()["done"] is False
        time.sleep(0.25)
        later = httpx.get(f"{served.url}/operations/{name}").json()
        assert later == {"done": True, "result": {"ok": True}}
        unknown = httpx.get(f"{served.url}/operations/nope")
        assert (unknown.status_code, unknown.json()) == (404, {"error": "no operation nope"})
    assert Operations().start(name="projects/p/operations/1") == "projects/p/operations/1"


def test_own_options_are_the_emulators_own_by_name() -> None:
    parser = EmulatorParser("An emulator.", port=8123)
    parser.add_argument("--model", default="m")
    parser.add_argument("--tls-dir")
    args = parser.parse(["--model", "llama", "--max-workers", "4"])
    assert args.own() == {"model": "llama", "tls_dir": None}
    assert args.own(exclude=("tls_dir",)) == {"model": "llama"}
