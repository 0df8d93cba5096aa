"""``QueueEmulator`` (the testing kit's piece for job APIs), ``WallClock`` and ``sse_event``,
over real sockets: a small job API declared on it, served on loopback."""

from __future__ import annotations

import time
from datetime import UTC
from typing import Any

import httpx
import pytest

import gpubench_sdk.testing as kit
from gpubench_sdk.testing import (
    Job,
    JobStatus,
    QueueEmulator,
    Reject,
    Request,
    SimulatedFleet,
    WallClock,
    quick_fleet,
    serve,
    sse_event,
)


def job_api(fleet: SimulatedFleet, runs_per_s: int = 100) -> kit.ASGIApp:
    """A job API on ``QueueEmulator``: submit (to an app: the job's tag), status, a held call,
    a streamed call and a submit with a start deadline."""
    emu = QueueEmulator(
        fleet,
        name="Acme",
        missing="no such job",
        rate_limits={"run": runs_per_s},
        throttled="{operation}: over {limit}",
        throttle_headers={"Retry-After": "1"},
    )

    def status_of(job: Job) -> dict[str, Any]:
        return {
            "id": job.id,
            "status": job.status.value,
            "ahead": emu.position(job),
            "ended_by": emu.ended_by(job),
            "created": emu.clock.iso(job.submitted_s),
        }

    def ended(job: Job) -> str:
        return "aborted" if job.started_s is None else "canceled"

    @emu.route("/{app}/run", "POST", fault="submit")
    async def run(request: Request) -> Any:
        emu.throttle("run")
        body = await emu.read_input(request)
        job = emu.submit(body["input"], tag=request.path_params["app"])
        if "start_within_s" in body:
            emu.cancel_after(job, body["start_within_s"], "expired", queued_only=True)
        if "cancel_after_s" in body:
            emu.cancel_after(job, body["cancel_after_s"], ended)
        if "wait_s" in body:
            await emu.wait(job, body["wait_s"])
        return status_of(job)

    @emu.route("/{app}/status/{job_id}", fault="poll")
    async def status(request: Request) -> Any:
        return status_of(emu.find(request, tag=request.path_params["app"]))

    @emu.route("/any/{job_id}", fault="poll")
    async def any_app(request: Request) -> Any:
        return {"tag": emu.tag(emu.find(request)), "all": [j.id for j in emu.jobs()]}

    @emu.route("/call", "POST", fault="submit")
    async def call(request: Request) -> Any:
        job = emu.submit((await emu.read_input(request))["input"])
        if not await emu.hold(request, job):
            return emu.reply(status=499)
        return {"output": job.output}

    @emu.route("/stream", "POST", fault="submit")
    async def stream(request: Request) -> Any:
        job = emu.submit((await emu.read_input(request))["input"])
        started = await emu.first_output(job, request)
        if started != "output":
            raise Reject(499 if started == "hung_up" else 500, job.error or started)

        def closing(sent: int) -> list[bytes]:
            return [sse_event(f"{job.status.value} after {sent}", event="end")]

        def piece(value: Any, n: int) -> bytes:
            return sse_event(str(value["chunk"]), event_id=n)

        return emu.stream_job(job, piece, end=closing, cancel_on_hang_up=True)

    return emu.app()


def test_jobs_are_found_by_id_and_tag_and_a_queue_position_is_counted() -> None:
    fleet = quick_fleet(0.0, max_workers=1)
    with serve(job_api(fleet)) as served, httpx.Client(base_url=served.url, timeout=10) as http:
        ids = [
            http.post(f"/{app}/run", json={"input": {"sleep_ms": 400}}).json()["id"]
            for app in ("a", "a", "b")
        ]
        third = http.get(f"/b/status/{ids[2]}").json()
        assert third["status"] == "queued" and third["ahead"] == 1  # the 2nd waits; the 1st runs
        assert third["created"].endswith("+00:00")
        wrong_app = http.get(f"/a/status/{ids[2]}")
        assert wrong_app.status_code == 404 and wrong_app.json() == {"error": "no such job"}
        assert http.get("/a/status/nope").status_code == 404
        assert http.get(f"/any/{ids[2]}").json() == {"tag": "b", "all": ids}


def test_an_unknown_job_can_be_answered_with_a_rejection_of_the_emulators_own() -> None:
    fleet = quick_fleet(0.0)
    emu = QueueEmulator(fleet, name="Acme", missing=Reject(410, "gone", {"X-Why": "expired"}))

    @emu.route("/jobs/{job_id}")
    async def job(request: Request) -> Any:
        return {"id": emu.find(request).id}

    with serve(emu.app()) as served:
        for _ in range(2):  # the same rejection, every time
            answer = httpx.get(f"{served.url}/jobs/nope", timeout=10)
            assert answer.status_code == 410 and answer.json() == {"error": "gone"}
            assert answer.headers["x-why"] == "expired"


def test_a_bad_body_and_a_rate_over_its_cap_are_rejected() -> None:
    fleet = quick_fleet(0.0, max_workers=2)
    with (
        serve(job_api(fleet, runs_per_s=3)) as served,
        httpx.Client(base_url=served.url, timeout=10) as http,
    ):
        assert http.post("/a/run", json={"input": 1}).json() == {
            "error": "body must be a JSON object with an 'input' object"
        }
        not_json = http.post("/a/run", content=b"{")
        assert not_json.status_code == 400 and not_json.json() == {
            "error": "body is not valid JSON"
        }
        over = [http.post("/a/run", json={"input": {}}) for _ in range(2)][-1]
        assert over.status_code == 429  # the cap of 3 a second: the two bad bodies counted too
        assert over.json() == {"error": "run: over 3"} and over.headers["retry-after"] == "1"


def test_a_held_call_answers_pending_after_its_wait_and_done_before_it() -> None:
    fleet = quick_fleet(0.0, max_workers=1)
    with serve(job_api(fleet)) as served, httpx.Client(base_url=served.url, timeout=10) as http:
        quick = http.post("/a/run", json={"input": {"sleep_ms": 10}, "wait_s": 5}).json()
        assert quick["status"] == "completed"
        began = time.perf_counter()
        slow = http.post("/a/run", json={"input": {"sleep_ms": 2000}, "wait_s": 0.2}).json()
        assert slow["status"] == "running" and time.perf_counter() - began < 1.5
        assert http.post("/call", json={"input": {"echo": "hi"}}).json() == {
            "output": {"echo": "hi"}
        }


def test_deadlines_end_a_job_with_their_reason() -> None:
    fleet = quick_fleet(0.0, max_workers=1)
    with serve(job_api(fleet)) as served, httpx.Client(base_url=served.url, timeout=10) as http:
        running = http.post("/a/run", json={"input": {"sleep_ms": 600}}).json()["id"]
        started_in_time = http.post(
            "/a/run", json={"input": {"sleep_ms": 10}, "start_within_s": 5}
        ).json()["id"]
        expired = http.post(
            "/a/run", json={"input": {"sleep_ms": 10}, "start_within_s": 0.1}
        ).json()["id"]
        time.sleep(0.3)
        assert http.get(f"/a/status/{expired}").json()["ended_by"] == "expired"
        assert fleet.truth(expired).status is JobStatus.CANCELLED
        # a start deadline never ends a job once it has started
        canceled = http.post(
            "/a/run", json={"input": {"sleep_ms": 2000}, "cancel_after_s": 1.2}
        ).json()["id"]
        fleet.wait_for(lambda c: c.completed == 2, 10)
        assert http.get(f"/a/status/{started_in_time}").json()["ended_by"] is None
        assert fleet.truth(running).status is JobStatus.COMPLETED
        fleet.wait_for(lambda c: c.cancelled == 2, 10)
        assert http.get(f"/a/status/{canceled}").json()["ended_by"] == "canceled"


def test_a_stream_starts_with_its_first_piece_or_answers_the_failure() -> None:
    fleet = quick_fleet(0.0, max_workers=1)
    with serve(job_api(fleet)) as served, httpx.Client(base_url=served.url, timeout=10) as http:
        streamed = http.post("/stream", json={"input": {"chunks": 3, "sleep_ms": 30}})
        assert streamed.headers["content-type"].startswith("text/event-stream")
        events = streamed.text.split("\n\n")[:-1]
        assert events[:3] == [f"id: {n}\ndata: {n - 1}" for n in (1, 2, 3)]
        assert events[3] == "event: end\ndata: completed after 3"
        failed = http.post("/stream", json={"input": {"fail": "boom"}})
        assert failed.status_code == 500 and failed.json() == {"error": "boom"}


def test_a_client_that_hangs_up_on_a_stream_cancels_its_job() -> None:
    fleet = quick_fleet(0.0, max_workers=1)
    with serve(job_api(fleet)) as served:
        # before the first piece (the job sleeps first), then in the middle of the stream
        with pytest.raises(httpx.ReadTimeout):
            httpx.post(f"{served.url}/stream", json={"input": {"sleep_ms": 5000}}, timeout=0.3)
        fleet.wait_for(lambda c: c.cancelled == 1, 10)
        body = {"input": {"chunks": 50, "sleep_ms": 5000}}
        with httpx.stream("POST", f"{served.url}/stream", json=body, timeout=10) as answer:
            assert next(answer.iter_lines()) == "id: 1"
        fleet.wait_for(lambda c: c.cancelled == 2, 10)


def test_wall_clock_and_sse_event() -> None:
    clock = WallClock()
    now_s = time.perf_counter()
    assert abs(clock.unix(now_s) - time.time()) < 0.05
    assert clock.at(now_s).tzinfo is UTC and clock.iso(None) is None
    assert clock.iso(now_s) == clock.at(now_s).isoformat()
    assert sse_event("x") == b"data: x\n\n"
    assert sse_event('{"a": 1}', event="output", event_id=7) == (
        b'event: output\nid: 7\ndata: {"a": 1}\n\n'
    )


def test_the_request_type_comes_from_starlette() -> None:
    from starlette.requests import Request as StarletteRequest

    assert Request is StarletteRequest
