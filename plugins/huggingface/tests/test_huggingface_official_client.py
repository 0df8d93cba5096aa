"""``huggingface_hub`` (the official client) drives the emulator over loopback HTTP: every call
the plugin's protocol depends on must parse and behave as against Hugging Face. Where the two
disagree, the client is right (issue 14): the emulator and the plugin follow it.

Inference: ``InferenceClient`` with the endpoint URL as the model (TGI's ``POST /``), plain,
``details=True``, ``stream=True`` and both, errors (422, 424, 429, the cold proxy's 503, and
``X-Scale-Up-Timeout`` holding instead), ``health_check`` and ``get_endpoint_info``.
Management: ``HfApi``'s Inference Endpoints calls, pointed at the emulator through
``huggingface_hub.constants.INFERENCE_ENDPOINTS_ENDPOINT`` (the base URL every one of them
reads at call time; the client has no other setting for it).
"""

from __future__ import annotations

import asyncio
import importlib
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

# CI installs huggingface_hub (requirements-dev.txt: plugins/huggingface[testing]) and must run
# these tests; elsewhere they skip when it is missing.
INSTALL = "pip install -e './plugins/huggingface[testing]'"
hub = (
    importlib.import_module("huggingface_hub")
    if os.environ.get("CI")
    else pytest.importorskip("huggingface_hub", reason=INSTALL)
)

from gpubench_huggingface import HuggingFaceProvider  # noqa: E402
from gpubench_huggingface.emulator import make_app  # noqa: E402
from huggingface_hub import HfApi, InferenceClient  # noqa: E402
from huggingface_hub.errors import (  # noqa: E402
    GenerationError,
    HfHubHTTPError,
    OverloadedError,
    ValidationError,
)

from gpubench_sdk import Request  # noqa: E402
from gpubench_sdk.testing import (  # noqa: E402
    ServedApp,
    SimulatedFleet,
    fleet_fixture,
    serve,
)

KEY = "hf_official_client_test_4d1f77"
NS, NAME = "org", "ep"
BOOT_S = 0.3


fleet = fleet_fixture(BOOT_S, max_workers=2, idle_timeout_s=5)


@pytest.fixture
def served(fleet: SimulatedFleet, monkeypatch: pytest.MonkeyPatch) -> Iterator[ServedApp]:
    app = make_app(fleet, api_key=KEY, namespace=NS, endpoint_name=NAME, minute_s=1.0)
    with serve(app) as served:
        monkeypatch.setattr(hub.constants, "INFERENCE_ENDPOINTS_ENDPOINT", f"{served.url}/v2")
        yield served


def client_for(served: ServedApp, **kw: Any) -> InferenceClient:
    # health_check and get_endpoint_info refuse any provider but "hf-inference" (2.4 leaves
    # it None unless given); the inference calls work either way.
    return InferenceClient(model=served.url, token=KEY, provider="hf-inference", **kw)


def warm(client: InferenceClient) -> None:
    """A replica up, so requests reach TGI (the proxy answers 503 until one is): one request
    the proxy holds (X-Scale-Up-Timeout) until the replica is ready."""
    assert not client.health_check()
    hold = InferenceClient(model=client.model, token=KEY, headers={"X-Scale-Up-Timeout": "5"})
    hold.text_generation("wake up", max_new_tokens=1)
    assert client.health_check()


def test_text_generation_plain_details_and_stream(served: ServedApp, fleet: SimulatedFleet) -> None:
    client = client_for(served)
    warm(client)
    text = client.text_generation("one two three", max_new_tokens=4)
    assert text == " tok0 tok1 tok2 tok3"

    out = client.text_generation("one two three", max_new_tokens=4, details=True)
    assert out.generated_text == text
    assert out.details is not None and out.details.generated_tokens == 4
    assert [t.text for t in out.details.tokens] == [" tok0", " tok1", " tok2", " tok3"]
    assert out.details.finish_reason == "length"

    tokens = list(client.text_generation("one two three", max_new_tokens=3, stream=True))
    assert tokens == [" tok0", " tok1", " tok2"]

    events = list(
        client.text_generation("one two three", max_new_tokens=3, stream=True, details=True)
    )
    assert [e.token.text for e in events] == [" tok0", " tok1", " tok2"]
    assert [e.generated_text for e in events[:-1]] == [None, None]
    last = events[-1]
    assert last.generated_text == " tok0 tok1 tok2"
    assert last.details is not None and last.details.generated_tokens == 3
    assert last.details.input_length == 3  # the prompt's three words

    info = client.get_endpoint_info()
    assert info["model_id"] == "gpubench/emulated" and info["max_concurrent_requests"] == 128


def test_async_client_streams_with_details(served: ServedApp) -> None:
    from huggingface_hub import AsyncInferenceClient

    async def stream() -> list[Any]:
        client = AsyncInferenceClient(model=served.url, token=KEY, provider="hf-inference")
        warm(client_for(served))
        events = await client.text_generation("a b", max_new_tokens=3, stream=True, details=True)
        return [event async for event in events]

    events = asyncio.run(stream())
    assert [e.token.text for e in events] == [" tok0", " tok1", " tok2"]
    assert events[-1].details is not None and events[-1].details.generated_tokens == 3


def test_text_generation_errors(served: ServedApp, fleet: SimulatedFleet) -> None:
    cold = client_for(served)
    with pytest.raises(HfHubHTTPError) as loading:  # no replica: the proxy's 503
        cold.text_generation("hi", max_new_tokens=2)
    assert loading.value.response.status_code == 503
    assert not cold.health_check()

    # X-Scale-Up-Timeout: the proxy holds the request until the replica is up
    holding = InferenceClient(model=served.url, token=KEY, headers={"X-Scale-Up-Timeout": "5"})
    started = time.monotonic()
    assert holding.text_generation("hi", max_new_tokens=2) == " tok0 tok1"
    assert time.monotonic() - started < 5

    with pytest.raises(ValidationError, match="temperature"):
        holding.text_generation("hi", max_new_tokens=2, temperature=0.0)
    with pytest.raises(GenerationError, match="bad weights"):
        holding.text_generation('{"fail": "bad weights", "sleep_ms": 1}')
    with pytest.raises(GenerationError, match="nan"):  # a failure mid-stream: the error event
        list(holding.text_generation('{"fail": "nan", "chunks": 2}', stream=True))
    with pytest.raises(HfHubHTTPError) as unauthorized:
        InferenceClient(model=served.url, token="hf_wrong").text_generation("hi")
    assert unauthorized.value.response.status_code == 401


def test_overloaded_is_overloaded_error(fleet: SimulatedFleet) -> None:
    app = make_app(fleet, api_key=KEY, max_concurrent_requests=1)
    with serve(app) as served:
        client = client_for(served)
        warm(client)

        async def both() -> list[Any]:
            def call() -> Any:
                return client.text_generation('{"sleep_ms": 400, "echo": 1}')

            return await asyncio.gather(
                asyncio.to_thread(call), asyncio.to_thread(call), return_exceptions=True
            )

        results = asyncio.run(both())
    (overloaded,) = [r for r in results if isinstance(r, BaseException)]
    assert isinstance(overloaded, OverloadedError), overloaded


def test_endpoint_management_calls(served: ServedApp, fleet: SimulatedFleet) -> None:
    api = HfApi(token=KEY)
    # token= again: the InferenceEndpoint object does not inherit HfApi's token (2.4's from_raw
    # makes a fresh HfApi), and its update/pause/resume calls need one
    endpoint = api.get_inference_endpoint(NAME, namespace=NS, token=KEY)
    assert (endpoint.name, endpoint.status, endpoint.url) == (NAME, "scaledToZero", served.url)
    assert endpoint.revision and endpoint.repository == "gpubench/emulated"
    assert endpoint.health_route == "/health" and endpoint.type == "authenticated"

    updated = endpoint.update(min_replica=1, max_replica=2, scale_to_zero_timeout=3)
    scaling = updated.raw["compute"]["scaling"]
    assert [scaling[k] for k in ("minReplica", "maxReplica", "scaleToZeroTimeout")] == [1, 2, 3]
    assert endpoint.wait(timeout=10, refresh_every=1).status == "running"
    assert endpoint.client.text_generation("hi", max_new_tokens=2) == " tok0 tok1"
    assert api.resume_inference_endpoint(NAME, namespace=NS).status == "running"  # running_ok
    with pytest.raises(HfHubHTTPError) as running:
        api.resume_inference_endpoint(NAME, namespace=NS, running_ok=False)
    assert running.value.response.status_code == 400

    paused = endpoint.pause()
    assert paused.status == "paused" and paused.url is None
    resumed = endpoint.resume()
    assert resumed.status in ("initializing", "running")
    api.update_inference_endpoint(NAME, namespace=NS, min_replica=0)
    endpoint.wait(timeout=10, refresh_every=1)
    zero = endpoint.scale_to_zero()
    assert zero.raw["compute"]["scaling"]["minReplica"] == 0
    fleet.wait_for(lambda c: c.workers == 0, 5)
    fetched = endpoint.fetch()
    assert fetched.status == "scaledToZero"
    scaling = fetched.raw["compute"]["scaling"]  # the user's settings outlive scale-to-zero
    assert [scaling[k] for k in ("minReplica", "maxReplica", "scaleToZeroTimeout")] == [0, 2, 3]


def test_plugin_reads_what_the_client_wrote(served: ServedApp, fleet: SimulatedFleet) -> None:
    """The plugin and the client see the same endpoint: settings one writes the other reads."""
    HfApi(token=KEY).update_inference_endpoint(
        NAME, namespace=NS, max_replica=1, scale_to_zero_timeout=4
    )
    options = {"namespace": NS, "endpoint_name": NAME, "management_url": f"{served.url}/v2"}

    async def read() -> Any:
        async with HuggingFaceProvider(api_key=KEY, minute_s=1.0, **options) as p:
            scaling = await p.get_scaling()
            result = await p.invoke(Request(seq=0, payload={"prompt": "a b", "max_tokens": 2}))
            running = await p.resume()  # HF answers 400 "already running"; so does the client
            paused = await p.pause()
            resumed = await p.resume()
            return scaling, result, running.state, paused.state, resumed.state

    scaling, result, running, paused, resumed = asyncio.run(read())
    assert (scaling.max_workers, scaling.idle_timeout_s) == (1, 4.0)
    assert result.output == " tok0 tok1"
    assert (running, paused) == ("running", "paused")
    assert resumed in ("scaledToZero", "initializing", "running")


def test_the_official_client_example_runs(tmp_path: Path) -> None:
    """examples/huggingface_hub_client.py, as a user runs it: a fresh interpreter."""
    script = Path(__file__).resolve().parents[3] / "examples" / "huggingface_hub_client.py"
    done = subprocess.run(
        [sys.executable, str(script)], cwd=tmp_path, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert "huggingface_hub: 8 tokens" in done.stdout and "streamed 4 tokens" in done.stdout
    assert "gpubench: n=20 ok=20" in done.stdout and "tokens {8}" in done.stdout
