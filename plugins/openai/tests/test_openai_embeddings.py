"""Embeddings: the emulator's ``/v1/embeddings`` as the official client reads it, the plugin's
``api = "embeddings"`` over real HTTP (counts, dimensions, base64, a short answer refused, no
usage counted by the core in words and marked so), the seeded batches, and the example run
through the CLI with its latency grouped by batch size."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

import anyio
import numpy as np
import openai
import pytest
from gpubench_openai import OpenAIProvider
from gpubench_openai.emulator import make_app
from starlette.applications import Starlette
from starlette.requests import Request as StarletteRequest
from starlette.responses import JSONResponse
from starlette.routing import Route

from gpubench_sdk import (
    Burst,
    Embeddings,
    InvalidResponseError,
    Outcome,
    Request,
    Result,
    Store,
    metrics,
)
from gpubench_sdk import run as run_benchmark
from gpubench_sdk.testing import ASGIApp, CliEndToEnd, quick_fleet, serve

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "embeddings_emulated.toml"
KEY = "sk-embeddings-5c1f09"
MODEL = "embedder"


def provider(url: str, **options: Any) -> OpenAIProvider:
    return OpenAIProvider(
        base_url=f"{url}/v1", model=MODEL, api="embeddings", api_key=KEY, **options
    )


def test_the_official_client_reads_floats_and_base64_alike() -> None:
    app = make_app(quick_fleet(0.0), api_key=KEY, model=MODEL, embedding_dim=24)
    with serve(app) as served:
        client = openai.OpenAI(
            base_url=f"{served.url}/v1", api_key=KEY, _strict_response_validation=True
        )
        texts = ["the model reads each document", "and writes a vector"]
        floats = client.embeddings.create(model=MODEL, input=texts, encoding_format="float")
        # the client asks for base64 by default and decodes it with numpy, after validating:
        # its strict mode refuses the base64 text itself, so its default (lenient) client
        packed = openai.OpenAI(base_url=f"{served.url}/v1", api_key=KEY).embeddings.create(
            model=MODEL, input=texts
        )
        short = client.embeddings.create(
            model=MODEL, input=texts[0], dimensions=8, encoding_format="float"
        )
        with pytest.raises(openai.BadRequestError, match="dimensions"):
            client.embeddings.create(model=MODEL, input="x", dimensions=25)
        with pytest.raises(openai.BadRequestError, match=r"input\[1\]"):
            client.embeddings.create(model=MODEL, input=["ok", ""])
    assert [len(d.embedding) for d in floats.data] == [24, 24]
    for a, b in zip(floats.data, packed.data, strict=True):
        assert np.allclose(a.embedding, b.embedding, atol=1e-6)  # float32 round trip
    assert np.linalg.norm(floats.data[0].embedding) == pytest.approx(1.0, rel=1e-5)
    assert floats.data[0].embedding != floats.data[1].embedding
    assert len(short.data[0].embedding) == 8
    assert floats.usage.prompt_tokens == 9 and floats.usage.total_tokens == 9


async def invoke(app: ASGIApp, request: Request, **options: Any) -> Result:
    with serve(app) as served:
        async with provider(served.url, **options) as p:
            return await p.invoke(request)


def test_the_plugin_counts_vectors_tokens_and_dimensions() -> None:
    workload = Embeddings(inputs_per_request=3, input_tokens=10, encoding_format="base64")
    request = workload.request(0)
    app = make_app(quick_fleet(0.0), api_key=KEY, model=MODEL, embedding_dim=32)
    result = anyio.run(invoke, app, request)
    assert result.output_units == 3 and result.input_units == 33  # 10 words + the [0.i] marker
    assert result.detail == {"dimensions": 32}
    assert result.output["embeddings"] == 3 and "data" not in result.output  # no vectors kept
    assert workload.read(result.output) == (33, 3)


def test_without_usage_the_core_counts_the_words_and_marks_them(tmp_path: Path) -> None:
    app = make_app(quick_fleet(0.0), api_key=KEY, model=MODEL, usage=False)
    workload = Embeddings(inputs_per_request=2, input_tokens=5)
    assert anyio.run(invoke, app, workload.request(4)).input_units is None  # not the plugin's
    with serve(app) as served:
        store = tmp_path / "e.sqlite"
        burst = [Burst(total=3, concurrency=1)]
        target = {"e": provider(served.url)}
        outcome = anyio.run(functools.partial(run_benchmark, target, workload, burst, store=store))
    with Store(store) as opened:
        invocations = opened.invocations(outcome.run_id)
    assert [i.input_units for i in invocations] == [12, 12, 12]  # 2 x (5 words + a marker)
    assert all(i.detail and i.detail["input_tokens_from"] == "words" for i in invocations)
    assert all(i.detail and "output_tokens_from" not in i.detail for i in invocations)


def test_an_answer_with_fewer_vectors_than_inputs_is_refused() -> None:
    async def one_vector(request: StarletteRequest) -> JSONResponse:
        return JSONResponse({"object": "list", "data": [{"embedding": [0.1]}], "model": MODEL})

    short_answer = Starlette(routes=[Route("/v1/embeddings", one_vector, methods=["POST"])])
    request = Embeddings(inputs_per_request=2).request(0)
    with pytest.raises(InvalidResponseError, match="asked for 2 embeddings, got 1"):
        anyio.run(invoke, short_answer, request)


def test_the_batches_are_seeded_per_request() -> None:
    def build(seed: int, order: range) -> dict[int, object]:
        w = Embeddings(
            inputs_per_request={"dist": "uniform", "min": 1, "max": 8},
            input_tokens={"dist": "lognormal", "mean": 40, "stdev": 20, "max": 200},
            seed=seed,
        )
        return {seq: w.request(seq).payload for seq in order}

    forward, backward = build(1, range(50)), build(1, range(49, -1, -1))
    assert forward == backward  # the same request whatever was built before it
    assert forward != build(2, range(50))
    sizes = {len(p["input"]) for p in forward.values()}  # type: ignore[index]
    assert sizes == set(range(1, 9))


def test_a_run_stores_every_batch_with_what_it_asked_for(tmp_path: Path) -> None:
    app = make_app(quick_fleet(0.0, max_workers=2), api_key=KEY, model=MODEL)
    workload = Embeddings(inputs_per_request={"dist": "uniform", "min": 1, "max": 16})
    path = tmp_path / "r.sqlite"
    with serve(app) as served:
        targets = {"emu": provider(served.url)}
        scenarios = [Burst(total=24, concurrency=3)]
        result = anyio.run(lambda: run_benchmark(targets, workload, scenarios, store=path))
    assert result.status == "completed"
    with Store(path) as store:
        invs = store.invocations(result.run_id)
    assert len(invs) == 24 and all(i.outcome is Outcome.OK for i in invs)
    for inv in invs:
        asked = inv.detail["requested"]  # type: ignore[index]
        assert inv.output_units == asked["inputs"]
        assert inv.input_units == asked["prompt_tokens"] + asked["inputs"]  # + the markers
    groups = metrics.by_batch_size(invs)
    assert [g.label for g in groups][:2] == ["1 text", "2-3 texts"]
    assert sum(g.requests for g in groups) == 24


@pytest.mark.slow
def test_the_embeddings_example_runs_and_groups_by_batch_size(tmp_path: Path) -> None:
    e2e = CliEndToEnd(tmp_path)
    e2e.env["OPENAI_API_KEY"] = KEY
    try:
        url = e2e.emulator(
            "gpubench_openai.emulator", "--api-key-env", "OPENAI_API_KEY",
            "--embedding-dim", "384", "--max-workers", "2",
        )  # fmt: skip
        done = e2e.run(EXAMPLE, replace={"http://127.0.0.1:8000/v1": url}, args=("--quiet",))
        invs = done.measured(secret=KEY)
    finally:
        e2e.close()
    assert len(invs) == 60 and all(i.outcome is Outcome.OK for i in invs)
    assert all(i.detail and i.detail["dimensions"] == 384 for i in invs)
    assert "p50 latency by batch size: 1 text" in done.stdout
    groups = metrics.by_batch_size(invs)
    # 0.2 ms per token: a batch of 16-31 texts of ~120 words takes far longer than one text
    assert groups[-1].latency_p50_ms > groups[0].latency_p50_ms
