"""Pictures in chat messages: the ``vision`` workload's payload sent by the plugin as OpenAI's
content parts (text, then an ``image_url`` per picture), read by OpenAI's own client from the
emulator, whose usage counts each picture as GPT-4o-class models do (the vision guide's worked
examples); a run stores the server's counts and groups latency by picture size; the example
runs through the CLI."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

import anyio
import openai
import pytest
from gpubench_openai import OpenAIProvider
from gpubench_openai.emulator import image_tokens, make_app

from gpubench_sdk import Burst, Outcome, ProviderError, Store, VisionChat, metrics, run
from gpubench_sdk.testing import CliEndToEnd, quick_fleet, serve

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "vision_emulated.toml"
KEY = "sk-vision-0b44e1"
MODEL = "vlm"


def test_picture_tokens_follow_the_vision_guides_examples() -> None:
    assert image_tokens((1024, 1024)) == 765  # "a 1024 x 1024 square image ... costs 765"
    assert image_tokens((2048, 4096)) == 1105  # "a 2048 x 4096 image ... costs 1105"
    assert image_tokens((4096, 8192), "low") == 85  # "low" is a flat 85


def test_the_plugin_sends_content_parts_the_official_client_can_send() -> None:
    vision = VisionChat(image_sizes=["1024x1024"], images_per_request=2, prompt_tokens=6)
    request = vision.request(0)
    body = OpenAIProvider(base_url="http://x/v1", model=MODEL).body(request)
    (message,) = body["messages"]
    kinds = [part["type"] for part in message["content"]]
    assert kinds == ["text", "image_url", "image_url"]
    assert message["content"][1]["image_url"]["url"].startswith("data:image/png;base64,")
    assert "images" not in body and "prompt" not in body  # mapped, not sent as extras
    app = make_app(quick_fleet(0.0), api_key=KEY, model=MODEL)
    with serve(app) as served:
        client = openai.OpenAI(
            base_url=f"{served.url}/v1", api_key=KEY, _strict_response_validation=True
        )
        answer = client.chat.completions.create(**body)
        low = {**body, "messages": [{**message, "content": [
            {**p, "image_url": {**p["image_url"], "detail": "low"}} if "image_url" in p else p
            for p in message["content"]
        ]}]}  # fmt: skip
        cheap = client.chat.completions.create(**low)
        with pytest.raises(openai.BadRequestError, match="PNG pictures only"):
            client.chat.completions.create(
                model=MODEL,
                messages=[{"role": "user", "content": [
                    {"type": "image_url", "image_url": {"url": "data:image/jpeg;base64,/9j/"}}
                ]}],
            )  # fmt: skip
    assert answer.usage is not None and cheap.usage is not None
    words = len(request.payload["prompt"].split())
    assert answer.usage.prompt_tokens == words + 2 * 765
    assert cheap.usage.prompt_tokens == words + 2 * 85


def test_a_run_stores_the_servers_counts_by_picture_size(tmp_path: Path) -> None:
    app = make_app(quick_fleet(0.0), api_key=KEY, model=MODEL)  # 0.2 ms per prompt token
    vision = VisionChat(image_sizes=["512x512", "2048x2048"], max_tokens=4, seed=5)
    path = tmp_path / "v.sqlite"
    with serve(app) as served:
        target = OpenAIProvider(base_url=f"{served.url}/v1", model=MODEL, api_key=KEY)
        burst = [Burst(total=12, concurrency=2)]
        outcome = anyio.run(functools.partial(run, {"v": target}, vision, burst, store=path))
    with Store(path) as store:
        invocations = store.invocations(outcome.run_id)
    assert [(i.outcome, i.error) for i in invocations if i.outcome is not Outcome.OK] == []
    for inv in invocations:
        assert inv.detail is not None and inv.detail["input_tokens_from"] == "server"
        size = inv.detail["requested"]["image_size"]
        side = int(size.split("x")[0])
        words = len(vision.request(inv.seq).payload["prompt"].split())
        assert inv.input_units == words + image_tokens((side, side))
    small, large = metrics.by_image_size(invocations)
    assert (small.label, large.label) == ("512x512", "2048x2048")
    assert large.latency_p50_ms > small.latency_p50_ms + 50  # 510 more tokens at 0.2 ms


def test_pictures_need_the_chat_api() -> None:
    async def invoke(url: str) -> Any:
        async with OpenAIProvider(base_url=f"{url}/v1", model=MODEL, api="completions") as p:
            return await p.invoke(VisionChat().request(0))

    refused = pytest.raises(ProviderError, match="'chat' for a request with pictures")
    with serve(make_app(quick_fleet(0.0), model=MODEL)) as served, refused:
        anyio.run(invoke, served.url)


@pytest.mark.slow
def test_the_vision_example_runs_and_groups_by_picture_size(tmp_path: Path) -> None:
    e2e = CliEndToEnd(tmp_path)
    e2e.env["OPENAI_API_KEY"] = KEY
    try:
        url = e2e.emulator(
            "gpubench_openai.emulator", "--api-key-env", "OPENAI_API_KEY", "--max-workers", "2"
        )
        done = e2e.run(EXAMPLE, replace={"http://127.0.0.1:8000/v1": url})
        invs = done.measured(secret=KEY)
    finally:
        e2e.close()
    assert len(invs) == 24 and all(i.outcome is Outcome.OK for i in invs)
    assert "p50 latency by image size: 512x512" in done.stdout
