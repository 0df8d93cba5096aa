"""The Hugging Face plugin, unchanged, against Hugging Face's own inference toolkit (the
starlette webservice HF Inference Endpoints run custom handlers with), serving
``examples/hf_probe_handler/handler.py``.

The toolkit is not on PyPI and pins ``transformers==4.51.3`` and ``huggingface_hub==0.30.2``
(the tests use 2.x), and needs ``starlette<0.50`` (it passes ``on_startup``, which starlette 1.0
removed), so it runs in an interpreter of its own, named by ``GPUBENCH_HF_TOOLKIT_PYTHON``:

    python3 -m venv .hf-toolkit
    .hf-toolkit/bin/pip install --no-deps \\
      git+https://github.com/huggingface/huggingface-inference-toolkit@833b5a2efd70c4e2c6a275c5866a0b82f3fc3e93
    .hf-toolkit/bin/pip install transformers==4.51.3 huggingface_hub==0.30.2 \\
        'starlette<0.50' uvicorn orjson pandas pillow
    GPUBENCH_HF_TOOLKIT_PYTHON=.hf-toolkit/bin/python pytest plugins/huggingface/tests

Without it the test is skipped: CI installs from package indexes only, where the toolkit is
not (see docs/providers/huggingface.md).
"""

from __future__ import annotations

import os
import socket
import statistics
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from gpubench_huggingface import HandlerError, HuggingFaceProvider

from gpubench_sdk import Burst, EchoProbe, Request, Store, run

pytestmark = pytest.mark.anyio
SLEEP_MS = 20.0
BASE_SLEEP_MS = 1.0
HANDLER_DIR = Path(__file__).resolve().parents[3] / "examples" / "hf_probe_handler"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module")
def toolkit_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    python = os.environ.get("GPUBENCH_HF_TOOLKIT_PYTHON")
    if not python:
        pytest.skip("set GPUBENCH_HF_TOOLKIT_PYTHON to an interpreter with the inference toolkit")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    app = "huggingface_inference_toolkit.webservice_starlette:app"
    command = [python, "-m", "uvicorn", app, "--host", "127.0.0.1", "--port", str(port)]
    log_path = tmp_path_factory.mktemp("toolkit") / "server.log"
    env = {**os.environ, "HF_MODEL_DIR": str(HANDLER_DIR)}
    with log_path.open("wb") as log:  # a file: an unread pipe would stall the server
        server = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=env)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            if server.poll() is not None:
                tail = log_path.read_text(errors="replace")[-2000:]
                pytest.fail(f"the inference toolkit exited {server.returncode}: {tail}")
            try:
                if httpx.get(f"{base}/health", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert time.monotonic() < deadline, "the inference toolkit not ready in 60 s"
            time.sleep(0.1)
        yield base
    finally:
        server.terminate()
        try:
            server.wait(10)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()


async def measured(url: str, sleep_ms: float, scenarios: list[Burst], store: Path) -> list[Any]:
    provider = HuggingFaceProvider(url=url)  # a plain URL: no management API, toolkit route
    result = await run({"tk": provider}, EchoProbe(sleep_ms=sleep_ms), scenarios, store=store)
    assert result.status == "completed"
    with Store(store) as s:
        invocations = [i for i in s.invocations(max(r.id for r in s.runs()))]
    invocations = [i for i in invocations if i.phase == "measure"]
    assert [(i.outcome, i.error) for i in invocations if not i.ok] == []  # 0 spurious errors
    assert len(invocations) == sum(b.total for b in scenarios)
    return invocations


async def test_plugin_against_the_inference_toolkit(toolkit_url: str, tmp_path: Path) -> None:
    store = tmp_path / "toolkit.sqlite"
    sequential = Burst(total=30, concurrency=1, warmup=2)
    short = await measured(toolkit_url, BASE_SLEEP_MS, [sequential], store)
    overhead_ms = statistics.median(i.latency_ms for i in short) - BASE_SLEEP_MS
    invocations = await measured(toolkit_url, SLEEP_MS, [sequential, Burst(20, 4)], store)
    seq = [i.latency_ms for i in invocations if i.scenario == 0]
    par = [i.latency_ms for i in invocations if i.scenario == 1]
    async with HuggingFaceProvider(url=toolkit_url) as p:
        answers = [await p.invoke(EchoProbe(sleep_ms=SLEEP_MS).request(k)) for k in range(10)]
        with pytest.raises(HandlerError) as failed:  # the toolkit's 400 for a handler error
            await p.invoke(Request(seq=0, payload={"fail": "CUDA out of memory"}))
    inference_ms = statistics.median(float(a.output["inference_ms"]) for a in answers)
    p50 = statistics.median(seq)
    print(
        f"toolkit: sleep {SLEEP_MS} ms, handler-reported p50 {inference_ms:.2f} ms, "
        f"overhead (sleep 1 ms, p50 less 1 ms) {overhead_ms:.2f} ms, "
        f"plugin sequential p50 {p50:.2f} ms, burst(20, 4) p50 {statistics.median(par):.2f} ms"
    )
    assert abs(inference_ms - SLEEP_MS) <= 2
    assert abs(p50 - (SLEEP_MS + overhead_ms)) <= 5, (p50, overhead_ms)
    # the toolkit runs one handler call at a time (async_utils: MAX_CONCURRENT_THREADS = 1):
    # four in flight wait for each other
    assert statistics.median(par) >= 2 * SLEEP_MS
    assert failed.value.status_code == 400 and "CUDA out of memory" in str(failed.value)
    assert all(i.cold is False for i in invocations)


async def test_emulator_refuses_as_the_toolkit_does(toolkit_url: str) -> None:
    """The emulator's custom-handler route (``POST /`` with an object ``inputs``) answers a bad
    body and a failing handler with the toolkit's statuses and ``{"error"}`` bodies."""
    from gpubench_huggingface.emulator import make_app

    from gpubench_sdk.testing import FleetConfig, SimulatedFleet, serve

    hold = {"X-Scale-Up-Timeout": "10"}  # the emulator's proxy: wait for its replica
    with serve(make_app(SimulatedFleet(FleetConfig()))) as emulated:
        async with httpx.AsyncClient(timeout=30) as client:
            for body in ({"nope": 1}, {"inputs": {"fail": "boom"}}, {"inputs": {"echo": "e"}}):
                real = await client.post(toolkit_url, json=body)
                ours = await client.post(emulated.url, json=body, headers=hold)
                assert real.status_code == ours.status_code, (body, real.text, ours.text)
                if real.status_code >= 400:
                    assert set(real.json()) == set(ours.json()) == {"error"}
                    assert "boom" in real.json()["error"] or "inputs" in real.json()["error"]
                else:
                    assert real.json()["echo"] == ours.json()["echo"] == "e"
