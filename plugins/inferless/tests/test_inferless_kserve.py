"""The Inferless plugin, unchanged, against a real KServe v2 server: kserve's own
``ModelServer`` serving a model written for it (``examples/kserve_sleep_model.py``: it sleeps
the echo probe's ``sleep_ms`` and reports the time ``predict`` took as
``parameters.inference_ms``), through the runner and through ``gpubench run`` of the example;
and KServe's own client (``kserve.InferenceRESTClient``, ``kserve_client_calls.py``) against
the emulator.

kserve pins ``psutil<6`` while ``runpod`` needs ``psutil>=7.2``, so it cannot share the test
venv: the server runs in its own interpreter, ``GPUBENCH_KSERVE_PYTHON`` (CI makes one, see
``.ci/run`` and ``plugins/inferless/requirements-kserve.txt``), or this one if it has kserve.
Without either the test is skipped locally, and fails in CI (``CI`` set).
"""

from __future__ import annotations

import importlib.util
import os
import socket
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from gpubench_inferless import InferlessProvider

from gpubench_sdk import Burst, EchoProbe, Store, load_provider, run

pytestmark = pytest.mark.anyio
MODEL = "sleepy"
SLEEP_MS = 20.0
BASE_SLEEP_MS = 1.0
EXAMPLES = Path(__file__).resolve().parents[3] / "examples"
MODEL_SCRIPT = EXAMPLES / "kserve_sleep_model.py"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def kserve_python() -> str:
    given = os.environ.get("GPUBENCH_KSERVE_PYTHON")
    if given:
        return given  # set: it must work, a broken one fails the test
    if importlib.util.find_spec("kserve") is not None:
        return sys.executable
    hint = "pip install -r plugins/inferless/requirements-kserve.txt (its own venv)"
    if os.environ.get("CI"):  # .ci/run sets GPUBENCH_KSERVE_PYTHON: CI must run these
        pytest.fail(f"GPUBENCH_KSERVE_PYTHON is not set and kserve is not installed: {hint}")
    pytest.skip(f"kserve is not installed: {hint}")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def kserve_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """kserve's ModelServer on a free port, ready (``GET /v2/health/ready``). Its log (a line
    per request) goes to a file: a pipe nobody reads would fill and stall the server."""
    port = free_port()
    command = [kserve_python(), str(MODEL_SCRIPT), "--http_port", str(port)]
    command += ["--model_name", MODEL, "--enable_grpc", "false"]
    log_path = tmp_path_factory.mktemp("kserve") / "server.log"
    base = f"http://127.0.0.1:{port}"
    with log_path.open("wb") as log:
        server = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 60
        while True:
            if server.poll() is not None:
                tail = log_path.read_text(errors="replace")[-2000:]
                pytest.fail(f"kserve ModelServer exited {server.returncode}: {tail}")
            try:
                if httpx.get(f"{base}/v2/health/ready", timeout=1).json().get("ready"):
                    break
            except httpx.HTTPError:
                pass
            assert time.monotonic() < deadline, "kserve ModelServer not ready in 60 s"
            time.sleep(0.1)
        yield base
    finally:
        server.terminate()
        try:
            server.wait(10)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()


async def server_inference_ms(url: str, n: int) -> list[float]:
    """The server-reported ``parameters.inference_ms`` of ``n`` requests (the plugin keeps no
    server figure: Inferless reports none), asked with a plain HTTP client."""
    body = {
        "id": "raw",
        "inputs": [{"name": "sleep_ms", "shape": [1], "datatype": "FP32", "data": [SLEEP_MS]}],
    }
    async with httpx.AsyncClient() as client:
        answers = [await client.post(url, json=body) for _ in range(n)]
    return [float(a.raise_for_status().json()["parameters"]["inference_ms"]) for a in answers]


async def measured(url: str, sleep_ms: float, scenarios: list[Burst], store: Path) -> list[Any]:
    """The plugin, unchanged, through the runner: the measured invocations, all of them OK."""
    provider = InferlessProvider(url=url)
    result = await run({"kserve": provider}, EchoProbe(sleep_ms=sleep_ms), scenarios, store=store)
    assert result.status == "completed"
    with Store(store) as s:
        invocations = [
            i for i in s.invocations(max(r.id for r in s.runs())) if i.phase == "measure"
        ]
    errors = [(i.outcome, i.error) for i in invocations if not i.ok]
    assert errors == []  # 0 spurious errors
    assert len(invocations) == sum(b.total for b in scenarios)  # every request stored
    return invocations


async def test_plugin_against_kserve_model_server(kserve_url: str, tmp_path: Path) -> None:
    url = f"{kserve_url}/v2/models/{MODEL}/infer"  # kserve 0.21 refuses /versions/{v}: 501
    store = tmp_path / "kserve.sqlite"
    sequential = Burst(total=30, concurrency=1, warmup=2)
    # the overhead (server, HTTP, client): what a request that sleeps 1 ms takes beyond it. A
    # sleep, not none: a model that sleeps lets both processes idle, and waking them again
    # costs a loaded machine a few ms that a request sleeping 0 ms never pays
    short = await measured(url, BASE_SLEEP_MS, [sequential], store)
    overhead_ms = statistics.median(i.latency_ms for i in short) - BASE_SLEEP_MS
    invocations = await measured(url, SLEEP_MS, [sequential, Burst(40, 8)], store)
    seq = [i.latency_ms for i in invocations if i.scenario == 0]
    par = [i.latency_ms for i in invocations if i.scenario == 1]
    inference_ms = statistics.median(await server_inference_ms(url, 10))
    p50 = statistics.median(seq)
    print(
        f"kserve: sleep {SLEEP_MS} ms, server-reported inference p50 {inference_ms:.2f} ms, "
        f"overhead (sleep 1 ms, p50 less 1 ms) {overhead_ms:.2f} ms, "
        f"plugin sequential p50 {p50:.2f} ms, "
        f"burst(40, 8) p50 {statistics.median(par):.2f} ms"
    )
    assert abs(inference_ms - SLEEP_MS) <= 2, inference_ms  # predict() slept what it was asked
    assert abs(p50 - (SLEEP_MS + overhead_ms)) <= 5, (p50, overhead_ms)
    assert min(seq) >= SLEEP_MS and min(par) >= SLEEP_MS
    # the burst's requests overlap (kserve runs predict on its event loop): 8 never queue
    # behind each other, which would take 8 x 20 ms
    assert statistics.median(par) < 4 * SLEEP_MS + overhead_ms
    assert all(i.cold is False for i in invocations)


async def test_v2_health_and_metadata_routes_match_the_emulator(kserve_url: str) -> None:
    """The routes the emulator serves answer as kserve's do (shape and status)."""
    from gpubench_inferless.emulator import make_app

    from gpubench_sdk.testing import FleetConfig, SimulatedFleet, serve

    paths = ["/v2/health/live", "/v2/health/ready", f"/v2/models/{MODEL}/ready"]
    with serve(make_app(SimulatedFleet(FleetConfig()), model=MODEL)) as emulated:
        async with httpx.AsyncClient() as client:
            for path in [*paths, f"/v2/models/{MODEL}", "/v2/models/nope/ready"]:
                real = await client.get(kserve_url + path)
                ours = await client.get(emulated.url + path)
                assert real.status_code == ours.status_code, path
                assert set(real.json()) <= set(ours.json()) | {"versions"}, path
            for body in (
                {"inputs": [{"name": "p", "datatype": "BYTES", "data": ["x"]}]},  # no shape
                {"inputs": [{"name": "p", "shape": [1], "datatype": "WHAT", "data": ["x"]}]},
                {"id": 7, "inputs": []},
            ):
                real = await client.post(f"{kserve_url}/v2/models/{MODEL}/infer", json=body)
                ours = await client.post(f"{emulated.url}/v2/models/{MODEL}/infer", json=body)
                assert real.status_code == ours.status_code, body


async def test_kserve_receives_the_input_map_s_names_and_types(kserve_url: str) -> None:
    """The shared input map (as a plan's ``[targets.input]`` gives it) and ``datatypes``, on
    kserve's own server: its pydantic request model accepts the typed tensors, and the model,
    which answers its inputs back, got exactly the mapped names and values."""
    provider = load_provider(
        "inferless",
        url=f"{kserve_url}/v2/models/{MODEL}/infer",
        input={"rename": {"echo": "prompt"}, "set": {"adapter_name": "sql", "max_new_tokens": 256}},
        datatypes={"max_new_tokens": "INT16"},
    )
    request = EchoProbe(sleep_ms=1).request(0)
    async with provider:
        result = await provider.invoke(request)
    assert result.output == {
        "sleep_ms": 1.0,
        "prompt": request.payload["echo"],
        "adapter_name": "sql",
        "max_new_tokens": 256,
    }


def test_gpubench_run_of_the_kserve_example(kserve_url: str, tmp_path: Path) -> None:
    """examples/inferless_kserve.toml, as the docs run it, against this server."""
    plan = (EXAMPLES / "inferless_kserve.toml").read_text()
    plan = plan.replace("http://127.0.0.1:8080", kserve_url)
    (tmp_path / "plan.toml").write_text(plan)
    done = subprocess.run(
        [sys.executable, "-m", "gpubench_sdk", "run", "plan.toml", "--quiet"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    with Store(tmp_path / "gpubench-inferless-kserve.sqlite") as store:
        (r,) = store.runs()
        invocations = store.invocations(r.id)
    assert r.status == "completed" and len(invocations) == 2 + 30 + 40
    assert all(i.ok for i in invocations)


def test_kserve_client_drives_the_emulator() -> None:
    """KServe's own v2 client (``kserve.InferenceRESTClient``: health, readiness, infer from a
    dict and from an ``InferRequest``, and its refusals) accepts every answer of the emulator."""
    import json

    from gpubench_inferless.emulator import make_app

    from gpubench_sdk.testing import FleetConfig, SimulatedFleet, serve

    script = Path(__file__).with_name("kserve_client_calls.py")
    key = "inf_kserve_client_5e7a"
    with serve(make_app(SimulatedFleet(FleetConfig()), api_key=key, model=MODEL)) as emulated:
        done = subprocess.run(
            [kserve_python(), str(script), emulated.url, MODEL, key],
            capture_output=True,
            text=True,
            timeout=120,
        )
    assert done.returncode == 0, done.stderr[-2000:]
    calls = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    refused = [c for c in calls if not c["accepted"]]
    assert len(calls) == 9 and refused == [], refused
