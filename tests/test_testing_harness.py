"""The loopback harness and the fault injector, over real sockets."""

from __future__ import annotations

import contextlib
import socket
import subprocess
import sys
from collections.abc import AsyncIterator, Callable

import httpx
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from gpubench_sdk.testing import (
    ASGIApp,
    Fault,
    FaultInjector,
    FleetConfig,
    ServedApp,
    SimulatedFleet,
    serve,
)
from gpubench_sdk.testing._harness import require


def fleet_app(fleet: SimulatedFleet) -> ASGIApp:
    """A one-route emulator: POST /jobs runs a job on the fleet and answers its result."""

    async def jobs(request: Request) -> Response:
        job = fleet.submit(await request.json())
        await job.done.wait()
        return JSONResponse({"id": job.id, "output": job.output, "padding": "x" * 200})

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        async with fleet:
            yield

    app = Starlette(routes=[Route("/jobs", jobs, methods=["POST"])], lifespan=lifespan)
    return FaultInjector(app, fleet, lambda scope: "submit" if scope["path"] == "/jobs" else None)


def refused(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) != 0


def test_serve_runs_the_lifespan_and_frees_the_port() -> None:
    fleet = SimulatedFleet(FleetConfig())
    with serve(fleet_app(fleet)) as served:
        assert served.url == f"http://127.0.0.1:{served.port}"
        response = httpx.post(f"{served.url}/jobs", json={"echo": "hi"})
        assert response.json()["output"] == {"echo": "hi"}
        assert fleet.counts().idle == 1  # the lifespan started the fleet on the server's loop
    assert refused(served.port)
    assert fleet.counts().workers == 0  # and stopped it


def test_an_app_that_fails_to_start_is_reported() -> None:
    @contextlib.asynccontextmanager
    async def broken(app: Starlette) -> AsyncIterator[None]:
        raise RuntimeError("no model weights")
        yield

    with pytest.raises(RuntimeError, match="did not start"), serve(Starlette(lifespan=broken)):
        pass


@pytest.mark.parametrize(
    ("fault", "check"),
    [
        (Fault.throttle(), lambda r: r.status_code == 429 and "retry-after" not in r.headers),
        (Fault.throttle(2.5), lambda r: r.status_code == 429 and r.headers["retry-after"] == "2.5"),
        (Fault.server_error(502), lambda r: r.status_code == 502 and "error" in r.json()),
        (Fault.server_error(500, body='{"detail": "x"}'), lambda r: r.json() == {"detail": "x"}),
        (Fault.unavailable_while_cold(), lambda r: r.status_code == 503),
        (Fault.malformed(), lambda r: r.status_code == 200 and not _is_json(r)),
        (Fault.slow(0.2), lambda r: r.elapsed.total_seconds() >= 0.2 and r.status_code == 200),
    ],
    ids=["429", "429-retry-after", "502", "custom-body", "503-cold", "malformed", "slow"],
)
def test_http_faults(fault: Fault, check: Callable[[httpx.Response], bool]) -> None:
    fleet = SimulatedFleet(FleetConfig())
    with serve(fleet_app(fleet)) as served:
        fleet.faults.next(1, fault)
        response = httpx.post(f"{served.url}/jobs", json={"echo": "x"})
        assert check(response), (response.status_code, response.headers, response.text)
        after = httpx.post(f"{served.url}/jobs", json={"echo": "x"})  # one fault, then normal
        assert after.json()["output"] == {"echo": "x"}
    assert [i.fault for i in fleet.faults.injected] == [fault]


def test_unavailable_while_cold_only_while_cold_and_wakes_a_worker() -> None:
    fleet = SimulatedFleet(FleetConfig())
    with serve(fleet_app(fleet)) as served:
        fleet.faults.next(1, Fault.unavailable_while_cold())
        assert httpx.post(f"{served.url}/jobs", json={}).status_code == 503
        fleet.wait_for(lambda c: c.idle == 1, 5)  # the 503 booted a worker
        fleet.faults.next(1, Fault.unavailable_while_cold())
        assert httpx.post(f"{served.url}/jobs", json={}).status_code == 200


@pytest.mark.parametrize("fault", [Fault.reset(), Fault.truncated()], ids=["reset", "truncated"])
def test_connection_faults(fault: Fault) -> None:
    fleet = SimulatedFleet(FleetConfig())
    with serve(fleet_app(fleet)) as served:
        fleet.faults.next(1, fault)
        with pytest.raises(httpx.RemoteProtocolError):
            httpx.post(f"{served.url}/jobs", json={"echo": "x"})
        assert httpx.post(f"{served.url}/jobs", json={"echo": "x"}).status_code == 200


def test_fixtures_come_from_the_pytest_plugin(
    simulated_fleet: SimulatedFleet, serve_app: Callable[[ASGIApp], ServedApp]
) -> None:
    served = serve_app(fleet_app(simulated_fleet))
    assert httpx.post(f"{served.url}/jobs", json={"echo": 1}).json()["output"] == {"echo": 1}


def test_missing_extra_fails_with_the_install_hint(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "uvicorn", None)
    with pytest.raises(ImportError, match=r"pip install 'gpubench-sdk\[testing\]'"):
        require("uvicorn")


def test_the_sdk_and_the_kit_import_without_the_servers() -> None:
    code = (
        "import sys; import gpubench_sdk, gpubench_sdk.testing; "
        "print(sorted(m for m in ('uvicorn', 'starlette', 'pytest') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def _is_json(response: httpx.Response) -> bool:
    try:
        response.json()
    except ValueError:
        return False
    return True


def test_connections_are_served_without_nagle_delay() -> None:
    """Responses go out in two writes (headers, body): without TCP_NODELAY the second waits
    for the client's delayed ACK, ~40 ms per request on Linux loopback."""

    async def app(scope: dict, receive: object, send: object) -> None:  # type: ignore[type-arg]
        if scope["type"] != "http":
            return
        sock = send.__self__.transport.get_extra_info("socket")  # type: ignore[attr-defined]
        nodelay = sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY)
        body = str(nodelay).encode()
        await send({"type": "http.response.start", "status": 200, "headers": []})  # type: ignore[operator]
        await send({"type": "http.response.body", "body": body})  # type: ignore[operator]

    with serve(app) as served:
        assert httpx.get(served.url).text != "0"
