"""The official ``runpod`` client (PyPI ``runpod``) drives our emulator over loopback HTTP.

Every job-API call the plugin makes (``/run``, ``/runsync`` and its polling fallback,
``/status``, ``/stream``, ``/cancel``, ``/health``, and ``/purge-queue``, which the plugin does
not use) is made here by the client's sync ``Endpoint``/``Job`` (requests) and its
``AsyncioEndpoint``/``AsyncioJob`` (aiohttp), and the fields the plugin reads (``id``,
``status``, ``output``, ``error``, ``delayTime``, ``executionTime``, ``workerId``,
``stream[].output``, ``/health``'s counts) are checked in what the client received. Where the
client and the emulator disagree, the client is right. The REST control plane
(``rest.runpod.io/v1``) has no counterpart in the client (its ``runpod.api`` speaks GraphQL).

The client reads ``runpod.endpoint_url_base`` (``RUNPOD_ENDPOINT_BASE_URL``, default
``https://api.runpod.ai/v2``) when an endpoint or job object is made (runpod 1.12.0,
``endpoint/runner.py`` and ``endpoint/asyncio/asyncio_runner.py``).
"""

from __future__ import annotations

import asyncio
import importlib
import os
from collections.abc import Iterator
from typing import Any

import pytest
from gpubench_runpod.emulator import make_app

from gpubench_sdk.testing import (
    ServedApp,
    SimulatedFleet,
    fleet_fixture,
    serve,
)

# CI installs runpod (requirements-dev.txt: plugins/runpod[testing]) and must run these tests;
# elsewhere they skip when it is missing.
runpod = (
    importlib.import_module("runpod")
    if os.environ.get("CI")
    else pytest.importorskip("runpod", reason="pip install -e './plugins/runpod[testing]'")
)
requests = pytest.importorskip("requests")

KEY = "rpa_official_client_3c9e1f"
EP = "ep-official"
pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


fleet = fleet_fixture(0.05, max_workers=1, idle_timeout_s=5)


@pytest.fixture
def served(fleet: SimulatedFleet, monkeypatch: pytest.MonkeyPatch) -> Iterator[ServedApp]:
    # /runsync lets go after 300 ms here (the service: ~90 s), so the fallback is exercised
    with serve(make_app(fleet, api_key=KEY, endpoint_id=EP, runsync_cap_ms=300)) as served:
        monkeypatch.setattr(runpod, "endpoint_url_base", f"{served.url}/v2")
        yield served


def endpoint() -> Any:
    return runpod.Endpoint(EP, api_key=KEY)


def done(fleet: SimulatedFleet, n: int = 1) -> None:
    """Wait until the emulator finished ``n`` jobs, so a client call needs no 1 s poll."""
    fleet.wait_for(lambda c: c.completed + c.failed + c.timed_out + c.cancelled >= n, 5)


def test_run_status_output_and_the_fields_the_plugin_reads(
    served: ServedApp, fleet: SimulatedFleet
) -> None:
    job = endpoint().run({"echo": "a", "sleep_ms": 20})
    assert job.status() in ("IN_QUEUE", "IN_PROGRESS")
    done(fleet)
    assert job.status() == "COMPLETED"
    assert job.output(timeout=5) == {"echo": "a"}
    raw = job.rp_client.get(f"{EP}/status/{job.job_id}")  # the client's own GET, parsed JSON
    assert raw["id"] == job.job_id and raw["status"] == "COMPLETED"
    assert isinstance(raw["delayTime"], int) and isinstance(raw["executionTime"], int)
    assert raw["executionTime"] >= 20 and raw["workerId"]


def test_run_sync_returns_the_output_and_falls_back_to_polling(served: ServedApp) -> None:
    ep = endpoint()
    assert ep.run_sync({"echo": "b", "sleep_ms": 10}, timeout=10) == {"echo": "b"}
    # longer than /runsync holds: the client polls /status with the id it got back
    assert ep.run_sync({"echo": "c", "sleep_ms": 500}, timeout=10) == {"echo": "c"}


def test_stream_yields_every_chunk_once(served: ServedApp, fleet: SimulatedFleet) -> None:
    job = endpoint().run({"echo": "s", "sleep_ms": 40, "chunks": 3})
    assert list(job.stream()) == [{"chunk": i, "echo": "s"} for i in range(3)]


def test_cancel_then_status_is_cancelled(served: ServedApp, fleet: SimulatedFleet) -> None:
    job = endpoint().run({"sleep_ms": 5000})
    answer = job.cancel()
    assert answer["id"] == job.job_id and answer["status"] == "CANCELLED"
    assert job.status() == "CANCELLED"


def test_health_and_purge_queue(served: ServedApp, fleet: SimulatedFleet) -> None:
    ep = endpoint()
    running = ep.run({"sleep_ms": 5000})
    queued = [ep.run({"sleep_ms": 10}) for _ in range(2)]  # one worker: these wait
    fleet.wait_for(lambda c: c.running == 1 and c.queued == 2, 5)
    health = ep.health()
    assert health["jobs"]["inQueue"] == 2 and health["jobs"]["inProgress"] == 1
    assert health["workers"]["running"] == 1 and "idle" in health["workers"]
    assert ep.purge_queue()["removed"] == 2
    assert [job.status() for job in queued] == ["CANCELLED", "CANCELLED"]
    running.cancel()


def test_failed_and_timed_out_jobs(served: ServedApp, fleet: SimulatedFleet) -> None:
    ep = endpoint()
    failed = ep.run({"fail": "bad prompt"})
    timed_out = ep.run({"input": {"sleep_ms": 2000}, "policy": {"executionTimeout": 50}})
    done(fleet, 2)
    assert failed.status() == "FAILED" and failed.output() is None
    raw = failed.rp_client.get(f"{EP}/status/{failed.job_id}")
    assert raw["error"] == "bad prompt"
    assert timed_out.status() == "TIMED_OUT"


def test_errors_the_client_raises(served: ServedApp) -> None:
    with pytest.raises(RuntimeError, match="401 Unauthorized"):
        runpod.Endpoint(EP, api_key="rpa_wrong").health()
    with pytest.raises(requests.HTTPError, match="404"):
        runpod.Endpoint("no-such-endpoint", api_key=KEY).health()
    job = runpod.endpoint.Job(EP, "no-such-job", endpoint().rp_client)
    with pytest.raises(requests.HTTPError, match="404"):
        job.status()


async def test_asyncio_endpoint_and_job(served: ServedApp, fleet: SimulatedFleet) -> None:
    from runpod.http_client import AsyncClientSession

    async with AsyncClientSession() as session:
        ep = runpod.AsyncioEndpoint(EP, session, api_key=KEY)
        job = await ep.run({"echo": "x", "sleep_ms": 20})
        assert await job.status() in ("IN_QUEUE", "IN_PROGRESS")
        await asyncio.to_thread(done, fleet)
        assert await job.status() == "COMPLETED"
        assert await job.output(timeout=5) == {"echo": "x"}

        streamed = await ep.run({"echo": "y", "sleep_ms": 40, "chunks": 2})
        assert [c async for c in streamed.stream()] == [{"chunk": i, "echo": "y"} for i in (0, 1)]

        long = await ep.run({"sleep_ms": 5000})
        waiting = await ep.run({"sleep_ms": 10})
        await asyncio.to_thread(fleet.wait_for, lambda c: c.queued == 1, 5)
        health = await ep.health()
        assert health["jobs"]["inQueue"] == 1 and health["workers"]["running"] == 1
        assert (await ep.purge_queue())["removed"] == 1
        assert await waiting.status() == "CANCELLED"
        assert (await long.cancel())["status"] == "CANCELLED"
