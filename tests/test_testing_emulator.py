"""The emulators' shared plumbing (``hold``, ``EmulatorParser``) and
``Fault.throttle(as_date=True)``, over real sockets."""

from __future__ import annotations

import email.utils
import subprocess
import sys
import time

import httpx
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from gpubench_sdk.testing import (
    Duration,
    EmulatorParser,
    Fault,
    FaultInjector,
    FleetConfig,
    JobStatus,
    SimulatedFleet,
    fleet_lifespan,
    hold,
    serve,
)


def test_hold_answers_a_finished_job_and_cancels_an_abandoned_one() -> None:
    fleet = SimulatedFleet(FleetConfig(cold_start=Duration.fixed(0.0), max_workers=2))

    async def held(request: Request) -> Response:
        job = fleet.submit(await request.json())
        if not await hold(request, job, fleet):
            return Response(status_code=499)
        return JSONResponse({"status": job.status.value, "output": job.output})

    app = Starlette(routes=[Route("/", held, methods=["POST"])], lifespan=fleet_lifespan(fleet))
    with serve(app) as served:  # fleet_lifespan starts the fleet: without it no job would run
        done = httpx.post(served.url, json={"echo": "a", "sleep_ms": 20}, timeout=10)
        assert done.json() == {"status": "completed", "output": {"echo": "a"}}
        with pytest.raises(httpx.ReadTimeout):  # the client gives up on a 30 s job
            httpx.post(served.url, json={"sleep_ms": 30_000}, timeout=0.5)
        abandoned = fleet.truths()[1].job_id
        fleet.wait_for(lambda c: c.cancelled == 1, 10)
    assert fleet.truth(abandoned).status is JobStatus.CANCELLED


def test_the_shared_options_keep_fixed_names_under_the_providers_flags(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("EMU_KEY", "emu-key-5f1c")
    parser = EmulatorParser("An emulator.\n\nMore.", port=8123, idle_flag="--keep-alive-s")
    parser.add_argument("--model", default="m")
    args = parser.parse(["--api-key-env", "EMU_KEY", "--keep-alive-s", "7", "--max-workers", "2"])
    assert (args.host, args.port, args.api_key, args.model) == (
        "127.0.0.1",
        8123,
        "emu-key-5f1c",
        "m",
    )
    config = args.fleet(min_workers=1).config
    assert (config.max_workers, config.idle_timeout_s, config.min_workers) == (2, 7.0, 1)
    assert parser.parse([]).api_key is None and parser.description == "An emulator."


def test_an_unset_key_variable_is_refused_by_name(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("EMU_MISSING", raising=False)
    with pytest.raises(SystemExit) as info:
        EmulatorParser(None, port=1).parse(["--api-key-env", "EMU_MISSING"])
    assert info.value.code == 2
    assert "--api-key-env: environment variable 'EMU_MISSING' is not set" in capsys.readouterr().err


def test_an_emulator_command_serves_with_the_key_it_was_given() -> None:
    """End to end: ``python -m gpubench_runpod.emulator`` built on the parser, over loopback."""
    env = {"RP_EMU_KEY": "rp-emu-key-0c2d", "PATH": "/usr/bin:/bin"}
    command = [sys.executable, "-m", "gpubench_runpod.emulator", "--port", "0",
               "--api-key-env", "RP_EMU_KEY", "--max-workers", "1"]  # fmt: skip
    with subprocess.Popen(command, stdout=subprocess.PIPE, text=True, env=env) as server:
        try:
            assert server.stdout is not None
            url = server.stdout.readline().strip()
            health = f"{url}/v2/emulated-endpoint/health"
            assert httpx.get(health, timeout=10).status_code == 401
            answer = httpx.get(health, headers={"Authorization": "rp-emu-key-0c2d"}, timeout=10)
            assert answer.status_code == 200
        finally:
            server.terminate()


def test_a_throttle_can_say_retry_after_as_an_http_date() -> None:
    fleet = SimulatedFleet()
    fleet.faults.next(1, Fault.throttle(retry_after_s=30, as_date=True))
    with serve(FaultInjector(Starlette(), fleet, lambda scope: "submit")) as served:
        answer = httpx.post(served.url)
    assert answer.status_code == 429
    date = email.utils.parsedate_to_datetime(answer.headers["retry-after"])
    assert 28 < date.timestamp() - time.time() <= 30
