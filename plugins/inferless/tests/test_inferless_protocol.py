"""Inferless protocol details beyond the conformance suite, over loopback HTTP to the emulator:
KServe v2 bodies both ways, error shapes, throttling, SSE streaming and inferred cold starts."""

from __future__ import annotations

import asyncio
import json
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import httpx
import pytest
from gpubench_inferless import BILLING, InferlessProvider, datatype_of
from gpubench_inferless.emulator import infer_url, make_app

from gpubench_sdk import (
    ClientHTTPError,
    ColdStarts,
    ConfigError,
    EchoProbe,
    InputMap,
    InvalidResponseError,
    Request,
    ServerHTTPError,
    Store,
    ThrottledError,
    list_plugins,
    load_provider,
    load_workload,
    run,
)
from gpubench_sdk.cost import load_catalog
from gpubench_sdk.testing import (
    Fault,
    ServedApp,
    SimulatedFleet,
    fleet_fixture,
    serve,
    served_fixture,
)

pytestmark = pytest.mark.anyio
KEY = "inf_protocol_test_3b8d01"
MODEL = "llama_ab12"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def seen(payload: Mapping[str, Any]) -> Any:
    """A model that answers with what it received (after the emulator decoded the tensors)."""
    return {"seen": dict(payload), "echo": payload.get("echo")}


fleet = fleet_fixture(0.3, max_workers=2, idle_timeout_s=0.5, handler=seen)
served = served_fixture(make_app, api_key=KEY, model=MODEL)


def provider(served: ServedApp, **options: Any) -> InferlessProvider:
    defaults = {"url": infer_url(served.url, MODEL), "cold_threshold_ms": 150}
    return InferlessProvider(api_key=KEY, **{**defaults, **options})


def test_datatypes_follow_json_types() -> None:
    assert [datatype_of(v) for v in ("a", True, 3, 0.5, {"k": 1})] == [
        "BYTES",
        "BOOL",
        "INT64",
        "FP32",
        "BYTES",
    ]


async def test_request_body_is_kserve_v2_mapped_by_the_shared_input_map(served: ServedApp) -> None:
    # inferless/mistral-7b-v0-1-multi-lora-adapter's input_schema.py: prompt, adapter_name
    # (required), temperature, repetition_penalty, max_new_tokens (INT16)
    mistral = InputMap(
        rename={"max_tokens": "max_new_tokens"}, drop=["stream"], set={"adapter_name": "sql"}
    )
    async with provider(
        served, input=mistral, datatypes={"max_new_tokens": "INT16", "temperature": "FP64"}
    ) as p:
        payload = {
            "prompt": "hi",
            "max_tokens": 4,
            "temperature": 0.7,
            "stream": False,
            "stop": ["a", "b"],
            "seed": None,
        }
        result = await p.invoke(Request(seq=0, payload=payload))
    # a structured output travels as a BYTES tensor of its JSON text, as KServe requires
    assert json.loads(result.output["seen"]) == {
        "prompt": "hi",
        "max_new_tokens": 4,
        "temperature": 0.7,
        "stop": ["a", "b"],
        "adapter_name": "sql",
    }
    assert payload["max_tokens"] == 4 and "adapter_name" not in payload  # the caller's, intact
    assert result.cold is not None and result.cold_confirmed is False
    body = {
        "id": "req-1",
        "inputs": [{"name": "prompt", "shape": [1], "datatype": "BYTES", "data": ["x"]}],
    }
    async with httpx.AsyncClient() as client:
        auth = {"Authorization": f"Bearer {KEY}"}
        answer = (await client.post(infer_url(served.url, MODEL), json=body, headers=auth)).json()
    assert set(answer) == {"model_name", "model_version", "id", "outputs"}
    assert (answer["model_name"], answer["model_version"], answer["id"]) == (MODEL, "1", "req-1")
    assert {"name": "echo", "shape": [1], "datatype": "BYTES", "data": [None]} not in answer[
        "outputs"
    ]  # None outputs are left out, as a tensor cannot hold them


async def test_output_name_selects_one_tensor(served: ServedApp) -> None:
    async with provider(served, output_name="echo") as p:
        assert (await p.invoke(Request(seq=0, payload={"echo": "e"}))).output == "e"
    async with provider(served, output_name="generated_text") as p:
        with pytest.raises(InvalidResponseError, match="generated_text"):
            await p.invoke(Request(seq=0, payload={"echo": "e"}))


async def test_error_bodies_map_into_the_taxonomy(served: ServedApp) -> None:
    async with provider(served) as p:
        with pytest.raises(ServerHTTPError, match="model ran out of memory") as failed:
            await p.invoke(Request(seq=0, payload={"fail": "model ran out of memory"}))
    assert failed.value.status_code == 500
    # the core's wording: the call named, then KServe's {"error"} text, not the raw body
    where = f"[inferless] POST {infer_url(served.url, MODEL)}: HTTP 500 Internal Server Error"
    assert str(failed.value) == f"{where}: model ran out of memory"
    async with provider(served, url=infer_url(served.url, "other_model")) as p:
        with pytest.raises(ClientHTTPError) as missing:
            await p.invoke(Request(seq=0, payload={"echo": "e"}))
    assert missing.value.status_code == 404
    async with httpx.AsyncClient() as client:
        auth = {"Authorization": f"Bearer {KEY}"}
        bad = await client.post(infer_url(served.url, MODEL), json={"x": 1}, headers=auth)
    assert bad.status_code == 422 and bad.json()["detail"][0]["loc"] == ["body", "inputs"]


async def test_too_many_concurrent_requests_are_throttled(fleet: SimulatedFleet) -> None:
    with serve(make_app(fleet, api_key=KEY, model=MODEL, max_concurrent=1)) as served:
        async with provider(served) as p:
            results = await asyncio.gather(
                *(p.invoke(Request(seq=i, payload={"sleep_ms": 200})) for i in range(2)),
                return_exceptions=True,
            )
    (throttled,) = [r for r in results if isinstance(r, ThrottledError)]
    assert throttled.status_code == 429 and throttled.retry_after_s is None


async def test_a_streamed_429_reads_an_http_date_retry_after(
    served: ServedApp, fleet: SimulatedFleet
) -> None:
    """Retry-After may be an HTTP date (RFC 9110); the stream route reads it through the
    core's parser, where the plugin's own float-only copy gave None."""
    fleet.faults.next(1, Fault.throttle(30, as_date=True))
    async with provider(served) as p:
        with pytest.raises(ThrottledError) as info:
            await p.invoke(Request(seq=0, payload={"chunks": 2}, stream=True))
    assert info.value.status_code == 429 and fleet.faults.injected
    assert info.value.retry_after_s is not None and 27 <= info.value.retry_after_s <= 30


async def test_stream_times_each_event(served: ServedApp, fleet: SimulatedFleet) -> None:
    async with provider(served) as p:
        request = Request(seq=0, payload={"echo": "s", "chunks": 4, "sleep_ms": 200}, stream=True)
        result = await p.invoke(request)
        with pytest.raises(ServerHTTPError, match="stream error: broke"):
            await p.invoke(Request(seq=1, payload={"chunks": 2, "fail": "broke"}, stream=True))
    assert result.output == [{"chunk": i, "echo": "s"} for i in range(4)]
    times = list(result.token_times_ns or [])
    assert len(times) == 4 and times == sorted(times) and result.first_byte_ns == times[0]
    assert (times[-1] - times[0]) / 1e6 >= 100  # spread over the 200 ms execution
    assert fleet.truth(str(result.request_id)).chunks == 4


async def test_a_model_that_does_not_stream_answers_whole(fleet: SimulatedFleet) -> None:
    with serve(make_app(fleet, api_key=KEY, model=MODEL, streams=False)) as served:
        async with provider(served) as p:
            request = Request(seq=0, payload={"echo": "w", "chunks": 2}, stream=True)
            result = await p.invoke(request)
    assert result.output["echo"] == "w" and result.token_times_ns is None
    assert fleet.truth(str(result.request_id)).chunks == 2


async def test_cold_is_inferred_against_the_warm_median(
    served: ServedApp, fleet: SimulatedFleet
) -> None:
    async with provider(served) as p:
        first = await p.invoke(Request(seq=0, payload={"sleep_ms": 5}))
        warm = [await p.invoke(Request(seq=i, payload={"sleep_ms": 5})) for i in range(1, 4)]
        await asyncio.to_thread(fleet.wait_for, lambda c: c.workers == 0, 5)
        again = await p.invoke(Request(seq=9, payload={"sleep_ms": 5}))
        slow_warm = await p.invoke(Request(seq=10, payload={"sleep_ms": 250}))
    assert first.cold is True and first.detail is None  # no warm median yet
    assert [w.cold for w in warm] == [False, False, False]
    assert again.cold is True and fleet.truth(str(again.request_id)).cold
    assert again.detail is not None and again.detail["cold_start_estimate_ms"] >= 250
    assert slow_warm.cold is True  # a slow warm request looks cold: the limit of inference
    assert not any(r.cold_confirmed for r in [first, *warm, again, slow_warm])


async def test_cold_starts_scenario_stores_inferred_not_confirmed(
    served: ServedApp, tmp_path: Path
) -> None:
    store = tmp_path / "inferless.sqlite"
    scenario = ColdStarts(n=2, warm_after=1, idle_gap_s=1.0, cold_timeout_s=10)
    result = await run({"inf": provider(served)}, EchoProbe(sleep_ms=5), [scenario], store=store)
    assert result.status == "completed"
    with Store(store) as s:
        (r,) = s.runs()
        invs = s.invocations(r.id)
    cold = [i for i in invs if i.cold]
    assert len(cold) == 2 and not any(i.cold_confirmed for i in invs)


def test_plugin_is_registered_and_options_checked() -> None:
    (info,) = [i for i in list_plugins() if i.name == "inferless"]
    assert info.ok and "streaming" in info.capabilities and "billing" in info.capabilities
    with pytest.raises(ConfigError, match="url"):
        load_provider("inferless", url="ftp://nope")
    with pytest.raises(ConfigError, match="datatypes"):
        load_provider("inferless", url="https://x.example/infer", datatypes={"p": "STRING"})
    for old, new in (("input_names", "input.rename"), ("omit", "input.drop")):
        with pytest.raises(ConfigError, match=rf"{old}: .*write it as {new}"):
            load_provider("inferless", url="https://x.example/infer", **{old: {}})
    p = load_provider("inferless", url="https://x.example/infer", api_key="inf_secret_24680")
    assert "inf_secret_24680" not in repr(p.options) + str(p.options.public())


async def test_billing_is_the_catalogs_per_second_rule(fleet: SimulatedFleet) -> None:
    assert load_catalog().billing_model("inferless") == BILLING
    assert BILLING.granularity_s == 1 and BILLING.bills("idle")
    with serve(make_app(fleet, api_key=KEY, model=MODEL)) as served:
        async with provider(served) as p:
            await asyncio.gather(
                *(p.invoke(Request(seq=i, payload={"sleep_ms": 150})) for i in range(3))
            )
    lives_s = [b.stopped_s - b.started_s for b in fleet.billing.workers if b.stopped_s]
    assert lives_s and fleet.billing.billed_s(BILLING, 0.0) == sum(math.ceil(s) for s in lives_s)


def test_the_doc_pages_targets_are_valid_options() -> None:
    """Every target on the page loads, and an input map fits its block's workload."""
    import re
    import tomllib

    page = Path(__file__).resolve().parents[3] / "docs" / "providers" / "inferless.md"
    blocks = [tomllib.loads(b) for b in re.findall(r"```toml\n(.*?)```", page.read_text(), re.S)]
    mapped = 0
    for plan in blocks:
        for target in plan.get("targets", []):
            options = {k: v for k, v in target.items() if k not in ("name", "provider")}
            options.pop("api_key_env", None)
            p = load_provider("inferless", api_key="inf_doc_check_1234", **options)
            if p.options.input is not None:
                workload = dict(plan["workload"])
                kind = workload.pop("kind")
                p.options.input.check(load_workload(kind, **workload).request(0).payload)
                mapped += 1
    assert mapped, "the page shows an input map"
