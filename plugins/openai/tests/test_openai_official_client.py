"""The official ``openai`` client (strict response validation) against our OpenAI emulator.

Every call the plugin makes and every response field it reads, driven through the client
OpenAI ships: chat and completions, streamed (with ``stream_options.include_usage``) and not,
``models.list``, and errors (429 with ``Retry-After``, 4xx and 5xx JSON error objects, an error
inside a stream). ``_strict_response_validation=True`` makes the client validate each answer
and each chunk against its own pydantic schema (openai-python ``_base_client.py``,
``_process_response_data``), so a field our emulator leaves out fails here as it would fail a
user. Where client and emulator disagree, the client is right, except in the one place where
the client's schema disagrees with every real server too (see ``completion_chunk``).
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import openai  # the plugin's testing extra installs it: a missing client fails, not skips
import pytest
from gpubench_openai.emulator import make_app
from openai.types import Completion

from gpubench_sdk.testing import (
    Fault,
    ServedApp,
    SimulatedFleet,
    fleet_fixture,
    served_fixture,
)

KEY = "sk-official-client-5b0e7c1d"
MODEL = "m"
MESSAGES = [{"role": "user", "content": "say three words"}]


fleet = fleet_fixture(0.0, max_workers=2)
served = served_fixture(make_app, api_key=KEY, model=MODEL)


def client(served: ServedApp, *, key: str = KEY, retries: int = 0, strict: bool = True) -> Any:
    return openai.OpenAI(
        base_url=f"{served.url}/v1",
        api_key=key,
        max_retries=retries,
        _strict_response_validation=strict,
    )


def test_chat_completion(served: ServedApp) -> None:
    raw = client(served).chat.completions.with_raw_response.create(
        model=MODEL, messages=MESSAGES, max_tokens=3
    )
    answer = raw.parse()  # validated by the client's ChatCompletion schema
    # what the plugin reads: choices[0].message.content, finish_reason, usage, model, the id
    assert answer.object == "chat.completion" and answer.created > 0
    assert answer.choices[0].message.content.split() == ["tok0", "tok1", "tok2"]
    assert answer.choices[0].finish_reason == "length"
    assert (answer.usage.prompt_tokens, answer.usage.completion_tokens) == (3, 3)
    assert answer.model == MODEL
    assert raw.headers["x-request-id"] == answer.id == answer._request_id


def test_chat_completion_stream_with_usage(served: ServedApp) -> None:
    chunks = list(
        client(served).chat.completions.create(
            model=MODEL,
            messages=MESSAGES,
            max_tokens=3,
            stream=True,
            stream_options={"include_usage": True},
        )
    )
    assert all(c.object == "chat.completion.chunk" and c.created > 0 for c in chunks)
    assert len({c.id for c in chunks}) == 1  # one answer, one id
    assert chunks[0].choices[0].delta.role == "assistant"
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text.split() == ["tok0", "tok1", "tok2"]
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "length"
    usage = chunks[-1]  # the usage chunk comes last, with no choices
    assert usage.choices == [] and usage.usage.completion_tokens == 3


def test_chat_completion_stream_async(served: ServedApp) -> None:
    """The plugin is async: the same stream through ``AsyncOpenAI``."""

    async def go() -> list[Any]:
        async with openai.AsyncOpenAI(
            base_url=f"{served.url}/v1", api_key=KEY, max_retries=0,
            _strict_response_validation=True,
        ) as aclient:  # fmt: skip
            stream = await aclient.chat.completions.create(
                model=MODEL, messages=MESSAGES, max_tokens=2, stream=True,
                stream_options={"include_usage": True},
            )  # fmt: skip
            return [chunk async for chunk in stream]

    chunks = asyncio.run(go())
    assert chunks[-1].usage is not None and chunks[-1].usage.completion_tokens == 2


def test_completion(served: ServedApp) -> None:
    answer = client(served).completions.create(model=MODEL, prompt="one two", max_tokens=2)
    assert answer.object == "text_completion" and answer.created > 0
    assert answer.choices[0].text.split() == ["tok0", "tok1"]
    assert answer.choices[0].finish_reason == "length"
    assert (answer.usage.prompt_tokens, answer.usage.completion_tokens) == (2, 2)


def completion_chunk(data: dict[str, Any]) -> Completion:
    """openai-python types the completions stream with ``Completion``, whose
    ``finish_reason`` is not optional; but OpenAI's own stream and vLLM's
    (``CompletionResponseStreamChoice.finish_reason: str | None``) send ``null`` until the
    last chunk. That one field is exempt; everything else is validated as the client would."""
    fixed = {
        **data,
        "choices": [
            {**c, "finish_reason": c["finish_reason"] or "length"} for c in data["choices"]
        ],
    }
    return Completion.model_validate(fixed)


def test_completion_stream_with_usage(served: ServedApp) -> None:
    stream = client(served, strict=False).completions.create(
        model=MODEL, prompt="one two", max_tokens=2, stream=True,
        stream_options={"include_usage": True},
    )  # fmt: skip
    chunks = [completion_chunk(c.to_dict(mode="json")) for c in stream]
    assert all(c.object == "text_completion" and c.created > 0 for c in chunks)
    assert "".join(c.choices[0].text for c in chunks if c.choices).split() == ["tok0", "tok1"]
    assert chunks[-1].choices == [] and chunks[-1].usage.completion_tokens == 2


def test_models_list(served: ServedApp) -> None:
    models = list(client(served).models.list())
    assert [(m.id, m.object) for m in models] == [(MODEL, "model")]
    assert models[0].created > 0 and models[0].owned_by


def test_wrong_key_is_an_authentication_error(served: ServedApp) -> None:
    with pytest.raises(openai.AuthenticationError) as info:
        client(served, key="sk-wrong").models.list()
    assert info.value.status_code == 401 and info.value.code == "invalid_api_key"
    assert info.value.type == "invalid_request_error"


def test_unknown_model_is_not_found(served: ServedApp) -> None:
    with pytest.raises(openai.NotFoundError) as info:
        client(served).chat.completions.create(model="nope", messages=MESSAGES)
    assert info.value.code == "model_not_found" and "nope" in info.value.message


def test_missing_messages_is_a_bad_request(served: ServedApp) -> None:
    with pytest.raises(openai.BadRequestError) as info:
        client(served).post("/chat/completions", body={"model": MODEL}, cast_to=object)
    assert info.value.type == "invalid_request_error" and "messages" in info.value.message


def test_429_carries_retry_after_and_the_client_honours_it(
    served: ServedApp, fleet: SimulatedFleet
) -> None:
    fleet.faults.next(1, Fault.throttle(retry_after_s=0.3), on="submit")
    with pytest.raises(openai.RateLimitError) as info:
        client(served).chat.completions.create(model=MODEL, messages=MESSAGES, max_tokens=1)
    assert info.value.code == "rate_limit_exceeded"
    assert info.value.response.headers["retry-after"] == "0.3"
    # with one retry the client waits the server's Retry-After (its own backoff would be
    # at most 0.5 s), then succeeds
    fleet.faults.next(1, Fault.throttle(retry_after_s=1.2), on="submit")
    began = time.monotonic()
    answer = client(served, retries=1).chat.completions.create(
        model=MODEL, messages=MESSAGES, max_tokens=1
    )
    assert time.monotonic() - began >= 1.2 and answer.choices[0].message.content
    assert len(fleet.faults.injected) == 2


def test_5xx_is_a_json_error_object(served: ServedApp, fleet: SimulatedFleet) -> None:
    fleet.faults.next(1, Fault.server_error(503), on="submit")
    with pytest.raises(openai.InternalServerError) as info:
        client(served).completions.create(model=MODEL, prompt="x", max_tokens=1)
    assert info.value.status_code == 503 and info.value.type == "server_error"
    assert isinstance(info.value.body, dict) and info.value.body["message"]


def test_failed_model_is_a_500_or_an_error_event(served: ServedApp, fleet: SimulatedFleet) -> None:
    fleet.faults.next(1, Fault.job_failed("CUDA out of memory"))
    with pytest.raises(openai.InternalServerError, match="CUDA out of memory"):
        client(served).chat.completions.create(model=MODEL, messages=MESSAGES, max_tokens=1)
    fleet.faults.next(1, Fault.job_failed("CUDA out of memory"))
    stream = client(served).chat.completions.create(
        model=MODEL, messages=MESSAGES, max_tokens=2, stream=True
    )
    with pytest.raises(openai.APIError, match="CUDA out of memory"):
        list(stream)
