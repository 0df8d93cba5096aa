"""Built-in workloads: requests they build, outputs they accept or refuse, units they count."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpubench_sdk import (
    Burst,
    EchoProbe,
    ImageGeneration,
    InvalidResponseError,
    LLMCompletion,
    LocalProvider,
    Outcome,
    Store,
    run,
)


def test_probe_checks_the_echo() -> None:
    probe = EchoProbe(sleep_ms=3, payload_bytes=5)
    req = probe.request(7)
    assert req.seq == 7 and req.payload == {"sleep_ms": 3, "echo": "xxxxx"}
    assert probe.read({"echo": "xxxxx"}) == (None, None)
    for wrong in ({"echo": "xxxx"}, {}, "xxxxx", None):
        with pytest.raises(InvalidResponseError):
            probe.read(wrong)


def test_llm_prompt_and_token_counting() -> None:
    llm = LLMCompletion(prompt_tokens=50, max_tokens=20, seed=1)
    a, b = llm.request(0), llm.request(1)
    assert a.prompt_tokens == 50 and a.max_output_tokens == 20 and a.kind == "llm"
    assert len(str(a.payload["prompt"]).split()) == 51  # 50 words and the distinct [seq] tag
    assert a.payload["prompt"] != b.payload["prompt"]  # no flattering prefix-cache hits
    assert (
        LLMCompletion(prompt_tokens=50, seed=1).request(0).payload["prompt"] == a.payload["prompt"]
    )
    usage = {"usage": {"prompt_tokens": 52, "completion_tokens": 20}, "text": "ignored"}
    assert llm.read(usage) == (52, 20)
    assert llm.read({"choices": [{"message": {"content": "one two three"}}]}) == (None, 3)
    assert llm.read({"choices": [{"text": "one two"}]}) == (None, 2)
    assert llm.read("four words right here") == (None, 4)
    assert llm.read(["tok", "ens ", "here"]) == (None, 2)  # Cog token streams are joined
    with pytest.raises(InvalidResponseError):
        llm.read({"nothing": 1})


def test_image_counts_images() -> None:
    img = ImageGeneration(width=256, height=128, steps=4, num_images=2)
    req = img.request(3)
    assert req.payload["width"] == 256 and req.payload["num_inference_steps"] == 4
    assert req.payload["seed"] == 3
    assert img.read({"images": ["a", "b"]}) == (1, 2)
    assert img.read(["a"]) == (1, 1)
    assert img.read("data:image/png;base64,xx") == (1, 1)
    with pytest.raises(InvalidResponseError):
        img.read({"images": []})


@pytest.mark.anyio
async def test_llm_and_image_against_the_demo_model(tmp_path: Path) -> None:
    provider = LocalProvider(max_workers=1, idle_timeout_s=30)
    store = tmp_path / "w.sqlite"
    llm = await run(
        {"demo": provider},
        LLMCompletion(prompt_tokens=40, max_tokens=16),
        [Burst(6, 2)],
        store=store,
    )
    image = await run(
        {"demo": LocalProvider(max_workers=1, idle_timeout_s=30)},
        ImageGeneration(steps=3, num_images=2, width=64, height=64),
        [Burst(4, 2)],
        store=store,
    )
    with Store(store) as s:
        tokens = s.invocations(llm.run_id)
        images = s.invocations(image.run_id)
    assert all(i.outcome is Outcome.OK for i in tokens + images)
    assert {(i.input_units, i.output_units) for i in tokens} == {(41, 16)}  # prompt words + tag
    assert {(i.input_units, i.output_units) for i in images} == {(1, 2)}
