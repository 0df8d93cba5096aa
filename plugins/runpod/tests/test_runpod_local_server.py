"""The plugin, unchanged, against the ``runpod`` package's own local API server.

A handler is started as RunPod documents for local testing, ``python handler.py --rp_serve_api
--rp_api_port <port>``: runpod 1.12.0's ``serverless/modules/rp_fastapi.py`` then serves
``POST /run``, ``POST /runsync``, ``POST /status/{id}`` and ``POST /stream/{id}`` at the root,
answers ``{"id", "status", "output" | "error"}`` with no ``delayTime``/``executionTime``/
``workerId``, and has no ``/cancel``, ``/health`` or control plane. ``/run`` only stores the job:
the handler runs inside the first ``/status`` (or ``/stream``) call, which then forgets the job.

Latency is compared with a plain httpx client timing the same requests on the same server, so
the server's own overhead (FastAPI, uvicorn, runpod's job wrapper) is measured, not guessed.
"""

from __future__ import annotations

import asyncio
import importlib
import os
import socket
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from gpubench_runpod import RunPodProvider

from gpubench_sdk import (
    Burst,
    ClientHTTPError,
    EchoProbe,
    Invocation,
    Outcome,
    Request,
    ServerHTTPError,
    Store,
    Target,
    run,
)
from gpubench_sdk.testing import noise_tolerance_ms

# CI installs runpod (requirements-dev.txt: plugins/runpod[testing]) and must run these tests;
# elsewhere they skip when it is missing.
(
    importlib.import_module("runpod")
    if os.environ.get("CI")
    else pytest.importorskip("runpod", reason="pip install -e './plugins/runpod[testing]'")
)

ROOT = Path(__file__).resolve().parents[3]
HANDLER = ROOT / "examples" / "runpod_local_handler.py"
EXAMPLE = ROOT / "examples" / "runpod_local.toml"
SLEEP_MS = 50.0  # what the handler sleeps per job (the probe workload's sleep_ms)
N = 20
# issue 14: p50 within 5 ms of the handler's sleep plus the server's overhead, on a quiet
# machine; on a busy one, as far as the plain client's own spread says (noise_tolerance_ms)
TOLERANCE_MS = 5.0

GENERATOR_HANDLER = '''
import asyncio
import runpod


async def handler(job):
    """A generator handler: the local server streams what it yields."""
    for i in range(int(job["input"].get("chunks", 3))):
        await asyncio.sleep(0.01)
        yield {"chunk": i, "echo": job["input"].get("echo")}


runpod.serverless.start({"handler": handler})
'''


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _serve(script: Path, log: Path) -> Iterator[str]:
    port = _free_port()
    env = {**os.environ, "UVICORN_LOG_LEVEL": "warning", "RUNPOD_LOG_LEVEL": "ERROR"}
    with log.open("w") as out:
        # the flags runpod 1.12.0 parses in serverless/__init__.py
        flags = ["--rp_serve_api", "--rp_api_host", "127.0.0.1", "--rp_api_port", str(port)]
        proc = subprocess.Popen(
            [sys.executable, str(script), *flags, "--rp_log_level", "ERROR"],
            stdout=out,
            stderr=subprocess.STDOUT,
            env=env,
        )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            assert proc.poll() is None, log.read_text()
            try:
                if httpx.get(f"{url}/openapi.json", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert time.monotonic() < deadline, f"no local server on {url}\n{log.read_text()}"
            time.sleep(0.1)
        yield url
    finally:
        proc.terminate()
        proc.wait(10)


@pytest.fixture(scope="module")
def local(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The example handler, served by runpod's local API server."""
    yield from _serve(HANDLER, tmp_path_factory.mktemp("rp") / "server.log")


@pytest.fixture(scope="module")
def local_generator(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    base = tmp_path_factory.mktemp("rpgen")
    script = base / "handler.py"
    script.write_text(GENERATOR_HANDLER)
    yield from _serve(script, base / "server.log")


def _plain_ms(one: Callable[[httpx.Client], None], n: int = N // 2) -> list[float]:
    """``one`` done sequentially by a plain keep-alive httpx client: the floor. Taken half
    before and half after the benchmark, so a machine whose load drifts meanwhile (CI's is
    shared) moves both sides of the comparison alike."""
    times = []
    with httpx.Client(timeout=10) as client:
        one(client)  # connect first, as the runs below reuse their connection
        for _ in range(n):
            began = time.perf_counter()
            one(client)
            times.append((time.perf_counter() - began) * 1e3)
    return times


def _probe(url: str, slept_ms: list[float]) -> Callable[[httpx.Client], None]:
    body = {"input": {"sleep_ms": SLEEP_MS, "echo": "x" * 16}}

    def runsync(client: httpx.Client) -> None:
        answer = client.post(f"{url}/runsync", json=body).json()
        assert answer["status"] == "COMPLETED", answer
        slept_ms.append(answer["output"]["slept_ms"])  # what the handler measured itself

    return runsync


def _submit_then_poll(url: str) -> Callable[[httpx.Client], None]:
    body = {"input": {"sleep_ms": SLEEP_MS, "echo": "x" * 16}}

    def both(client: httpx.Client) -> None:
        job = client.post(f"{url}/run", json=body).json()
        assert client.post(f"{url}/status/{job['id']}").json()["status"] == "COMPLETED"

    return both


def _benchmark(url: str, store: Path, scenarios: list[Burst], **options: Any) -> list[Invocation]:
    provider = RunPodProvider(base_url=url, **options)
    workload = EchoProbe(sleep_ms=SLEEP_MS)
    result = asyncio.run(run([Target("local", provider)], workload, scenarios, store=store))
    assert result.status == "completed"
    with Store(store) as s:
        return list(s.invocations(result.run_id))


def test_runsync_sequential_and_burst_match_the_server(local: str, tmp_path: Path) -> None:
    slept_ms: list[float] = []
    plain = _plain_ms(_probe(local, slept_ms))
    invs = _benchmark(
        local,
        tmp_path / "runsync.sqlite",
        [Burst(total=N, concurrency=1), Burst(total=N, concurrency=4)],
        mode="runsync",
    )
    reference = plain + _plain_ms(_probe(local, slept_ms))
    floor_ms = statistics.median(reference)
    handler_ms = statistics.median(slept_ms)
    assert [i.outcome for i in invs] == [Outcome.OK] * (2 * N), [i.error for i in invs]
    assert len({i.request_id for i in invs}) == 2 * N
    assert all(str(i.request_id).startswith("test-") for i in invs)  # the server's job ids
    # The local server reports no timings and no worker: none are invented.
    assert all(i.execution_ms is None and i.queue_ms is None and i.worker_id is None for i in invs)
    sequential = statistics.median(i.latency_ms for i in invs if i.scenario == 0)
    burst = [i.latency_ms for i in invs if i.scenario == 1]
    print(
        f"\nrunsync: plain httpx p50 {floor_ms:.2f} ms, gpubench p50 {sequential:.2f} ms, "
        f"burst(4) p50 {statistics.median(burst):.2f} ms, handler slept p50 {handler_ms:.2f} ms "
        f"(asked {SLEEP_MS:g}), so server + client overhead p50 {floor_ms - handler_ms:.2f} ms"
    )
    assert handler_ms >= SLEEP_MS and floor_ms >= handler_ms and sequential >= handler_ms
    assert abs(sequential - floor_ms) <= noise_tolerance_ms(reference, TOLERANCE_MS)
    # Four at once on an async handler overlap: serialized, the p50 would be ~2-4 sleeps.
    assert min(burst) >= SLEEP_MS and statistics.median(burst) < 2 * SLEEP_MS


def test_run_then_status_polls_with_post(local: str, tmp_path: Path) -> None:
    plain = _plain_ms(_submit_then_poll(local))
    poll_s = 0.001  # the first poll waits this long after /run answered
    invs = _benchmark(
        local, tmp_path / "run.sqlite", [Burst(total=N, concurrency=1)], poll_interval_s=poll_s
    )
    reference = plain + _plain_ms(_submit_then_poll(local))
    floor_ms = statistics.median(reference)
    assert [i.outcome for i in invs] == [Outcome.OK] * N, [i.error for i in invs]
    p50 = statistics.median(i.latency_ms for i in invs)
    print(f"\nrun+status: plain httpx p50 {floor_ms:.2f} ms, gpubench p50 {p50:.2f} ms")
    assert p50 >= SLEEP_MS
    assert abs(p50 - (floor_ms + poll_s * 1e3)) <= noise_tolerance_ms(reference, TOLERANCE_MS)


def test_a_failed_poll_is_stored_with_its_job_id(local: str, tmp_path: Path) -> None:
    invs = _benchmark(local, tmp_path / "get.sqlite", [Burst(total=2, concurrency=1)],
                      poll_method="GET")  # fmt: skip
    assert [(i.outcome, i.http_status) for i in invs] == [(Outcome.HTTP_4XX, 405)] * 2
    for inv in invs:
        assert str(inv.request_id).startswith("test-")
        where = f"GET {local}/status/{inv.request_id}"
        assert f"{where}: HTTP 405 Method Not Allowed" in str(inv.error)


def test_errors_name_the_call_and_keep_the_job_id(local: str) -> None:
    async def scenario() -> None:
        async with RunPodProvider(base_url=local, poll_method="GET") as p:
            with pytest.raises(ClientHTTPError) as info:
                await p.invoke(Request(seq=0, payload={"sleep_ms": 1}))
        assert info.value.status_code == 405
        assert str(info.value.request_id).startswith("test-")
        where = f"GET {local}/status/{info.value.request_id}"
        assert f"{where}: HTTP 405 Method Not Allowed" in str(info.value)
        async with RunPodProvider(base_url=local, mode="runsync") as p:
            with pytest.raises(ServerHTTPError, match="job FAILED") as failed:
                await p.invoke(Request(seq=0, payload={"sleep_ms": "not a number"}))
        assert str(failed.value.request_id).startswith("test-")
        async with RunPodProvider(base_url=f"{local}/v2", endpoint_id="nope") as p:
            not_found = f"POST {local}/v2/nope/run: HTTP 404 Not Found"
            with pytest.raises(ClientHTTPError, match=not_found):
                await p.invoke(Request(seq=0, payload={}))

    asyncio.run(scenario())


def test_stream_from_a_generator_handler(local_generator: str) -> None:
    async def scenario() -> None:
        async with RunPodProvider(base_url=local_generator) as p:
            assert p.capabilities.fleet_state is False and p.capabilities.billing is None
            result = await p.invoke(Request(seq=0, payload={"echo": "s", "chunks": 3}, stream=True))
        assert result.output == [{"chunk": i, "echo": "s"} for i in range(3)]
        assert result.first_byte_ns is not None and result.execution_ms is None

    asyncio.run(scenario())


def test_gpubench_run_of_the_example_against_the_local_server(local: str, tmp_path: Path) -> None:
    plan = EXAMPLE.read_text().replace("http://127.0.0.1:8000", local)
    assert local in plan
    (tmp_path / "plan.toml").write_text(plan)
    done = subprocess.run(
        [sys.executable, "-m", "gpubench_sdk", "run", "plan.toml", "--quiet"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    with Store(tmp_path / "gpubench-runpod-local.sqlite") as store:
        (info,) = store.runs()
        invs = store.invocations(info.id)
    assert info.status == "completed"
    assert len(invs) == 40 and all(i.outcome is Outcome.OK for i in invs)
    assert min(i.latency_ms for i in invs) >= SLEEP_MS
