"""``OpenAIProvider``: any OpenAI-compatible server (vLLM, TGI, SGLang, RunPod's vLLM route,
Hugging Face's ``/v1`` route, hosted APIs), chat or completions, streamed or not."""

from __future__ import annotations

import json
from typing import Any, Literal

import httpx
from pydantic import Field, field_validator

import gpubench_sdk as sdk

from . import _protocol as oa


class OpenAIOptions(sdk.ProviderOptions):
    """Options of an OpenAI-compatible target. ``api_key`` (``api_key_env``) is sent as
    ``Authorization: Bearer``; servers without auth (a local vLLM) need none."""

    base_url: str = Field(
        description="the API base, ending in /v1: http://host:8000/v1, "
        "https://api.runpod.ai/v2/{endpoint_id}/openai/v1, https://{endpoint}/v1",
    )
    model: str = Field(min_length=1, description="the model name the server serves")
    api: Literal["chat", "completions", "embeddings", "transcriptions"] = Field(
        default="chat",
        description="/chat/completions (messages), /completions (prompt), /embeddings "
        "(input: the embeddings workload) or /audio/transcriptions (the audio workload)",
    )
    include_usage: bool = Field(
        default=True,
        description="ask for the final usage chunk (stream_options.include_usage); turn off "
        "for a server that rejects stream_options",
    )
    max_tokens_field: Literal["max_tokens", "max_completion_tokens"] = Field(
        default="max_tokens",
        description="OpenAI's newer models take max_completion_tokens; vLLM/TGI/SGLang "
        "take max_tokens",
    )
    extra_body: dict[str, Any] = Field(
        default_factory=dict,
        description="fields added to every request body (temperature, top_p, seed...)",
    )

    @field_validator("base_url")
    @classmethod
    def _http_url(cls, value: str) -> str:
        if not value.startswith(("http://", "https://")):
            raise ValueError(f"base_url must start with http:// or https://, got {value!r}")
        return value.rstrip("/")


class OpenAIProvider(sdk.Provider):
    """Sends the ``llm`` workload's requests as OpenAI chat or completion calls.

    Streamed requests (``stream = true``) are read as Server-Sent Events: the arrival of every
    chunk that carries generated text is recorded (``Result.token_times_ns``), so the store
    holds TTFT and every inter-token gap. Token counts come from ``usage`` (requested with
    ``stream_options.include_usage``); a server that sends none gets its chunks counted
    instead, marked in ``Result.detail`` as ``{"output_tokens_from": "chunks"}``. Prompt
    tokens served from the server's prefix cache (``usage.prompt_tokens_details``) are stored
    as ``{"cached_tokens": n}``.
    """

    name = "openai"
    # OpenAI-compatible servers report no queue or execution time and have no control plane;
    # the bill depends on who hosts the server (priced by the cost module, not here).
    capabilities = sdk.Capabilities(streaming=True)
    options: OpenAIOptions

    @property
    def endpoint(self) -> str:
        return f"{self.options.base_url}/{self._path}"

    @property
    def _path(self) -> str:
        return oa.PATHS[self.options.api]

    async def open(self) -> None:
        o = self.options
        self._url = httpx.URL(self.endpoint)  # parsed once, not per request
        # a multipart upload (transcriptions) gets its Content-Type, with its boundary, from
        # the client: the JSON one is only for the JSON bodies
        self._upload_headers = {**o.headers, **self.auth_headers()}
        self._headers = {**self._upload_headers, "Content-Type": _JSON}
        stream_headers = {**self._headers, "Accept": "text/event-stream"}
        # the streamed call prepared once: no httpx request is built per stream
        self._stream_call = sdk.PreparedCall(self.client, "POST", self._url, headers=stream_headers)

    # ----- the request ----------------------------------------------------------------------

    def body(self, request: sdk.Request) -> dict[str, Any]:
        """The JSON body for ``request``: the workload's prompt and limits, the options'
        ``extra_body``, and any payload key the mapping does not use (vLLM-style extras)."""
        o, payload = self.options, request.payload
        body: dict[str, Any] = {"model": o.model, **o.extra_body}
        if o.api == "embeddings":  # the workload's body as it is; a prompt becomes the input
            body.update(payload)
            if "input" not in body and "prompt" in payload:
                body["input"] = body.pop("prompt")
            return body
        body.update((k, v) for k, v in payload.items() if k not in oa.MAPPED_KEYS)
        prompt = payload.get("prompt", "")
        images = payload.get("images")
        if images and o.api != "chat":
            raise sdk.ConfigError("api", o.api, "'chat' for a request with pictures")
        if o.api == "chat":
            messages = payload.get("messages")
            if not messages and isinstance(images, list):  # the vision workload's pictures
                content = oa.user_content(prompt, images, payload.get("image_detail"))
                messages = [{"role": "user", "content": content}]
            body["messages"] = messages or [{"role": "user", "content": prompt}]
        else:
            body["prompt"] = prompt
        max_tokens = request.max_output_tokens or payload.get("max_tokens")
        if max_tokens:
            body[o.max_tokens_field] = max_tokens
        if request.stream:
            body["stream"] = True
            if o.include_usage:
                body["stream_options"] = {"include_usage": True}
        return body

    async def invoke(self, request: sdk.Request) -> sdk.Result:
        if self.options.api == "transcriptions":
            return await self._transcribe(request.payload)
        body = json.dumps(self.body(request)).encode()
        # A timeout, reset, refused connection or cut body leaves through invoke's boundary as
        # the core's ProviderError (as_provider_error), naming the call.
        if request.stream and self.options.api != "embeddings":  # embeddings never stream
            return await self._streamed(body)
        response = await self.client.post(self._url, content=body, headers=self._headers)
        if response.status_code >= 400:
            raise self._http_error(response)
        data = sdk.json_object(response, provider=self.name)
        if self.options.api == "embeddings":
            return self._embedded(response, data, request.payload)
        return self._complete(response, data)

    def _embedded(self, response: httpx.Response, data: dict[str, Any], payload: Any) -> sdk.Result:
        """An embeddings answer: one vector per input sent, counted; the vectors themselves
        are not kept (a batch of them is megabytes, and no metric reads them)."""
        sent = payload.get("input", payload.get("prompt"))
        texts = sent if isinstance(sent, list) and not _token_ids(sent) else [sent]
        vectors = data.get("data")
        if not isinstance(vectors, list) or len(vectors) != len(texts):
            got = len(vectors) if isinstance(vectors, list) else "no data list"
            raise self._invalid(response, f"asked for {len(texts)} embeddings, got {got}")
        dims = oa.embedding_dimensions(vectors)
        if dims is None:
            raise self._invalid(response, "data[0].embedding is neither floats nor base64")
        usage = data.get("usage") if isinstance(data.get("usage"), dict) else None
        output = {"embeddings": len(vectors), "dimensions": dims}
        return sdk.http_result(
            response,
            output={**output, "usage": usage, "model": data.get("model")},
            request_id=response.headers.get("x-request-id") or oa.as_text(data.get("id")),
            # without usage the core counts what was sent (the workload's tokenizer, or words)
            input_units=_count(usage, "prompt_tokens"),
            output_units=len(vectors),
            detail={"dimensions": dims},
        )

    async def _transcribe(self, payload: Any) -> sdk.Result:
        """The audio workload's clip (a ``data:`` URL) as OpenAI's multipart upload."""
        audio = payload.get("audio") if isinstance(payload, dict) else None
        try:
            data, mime = sdk.from_data_url(audio if isinstance(audio, str) else "")
        except ValueError as exc:
            raise sdk.ConfigError(
                "workload", "(payload)", "the audio workload's {'audio': 'data:...'}"
            ) from exc
        form = {"model": self.options.model, **self.options.extra_body}
        form.update((k, payload[k]) for k in oa.TRANSCRIPTION_FIELDS if k in payload)
        name = f"audio.{oa.AUDIO_EXTENSIONS.get(mime, 'wav')}"
        response = await self.client.post(
            self._url,
            data={k: str(v) for k, v in form.items()},
            files={"file": (name, data, mime)},
            headers=self._upload_headers,
        )
        if response.status_code >= 400:
            raise self._http_error(response)
        if not response.headers.get("content-type", "").startswith(_JSON):
            text = response.text  # response_format = "text" (or srt, vtt): the text itself
            answer: dict[str, Any] = {"text": text}
        else:
            answer = sdk.json_object(response, provider=self.name)
            if not isinstance(answer.get("text"), str):
                raise self._invalid(response, "no text in the transcription")
        usage = answer.get("usage") if isinstance(answer.get("usage"), dict) else None
        output = {"text": answer["text"], "usage": usage}
        return sdk.http_result(
            response, output=output, request_id=response.headers.get("x-request-id")
        )

    def _complete(self, response: httpx.Response, data: dict[str, Any]) -> sdk.Result:
        """A non-streamed answer (or a server that ignored ``stream: true``)."""
        choices = data.get("choices")
        if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
            raise self._invalid(response, "no choices in the response")
        usage = data.get("usage") if isinstance(data.get("usage"), dict) else None
        output = {
            "text": oa.message_text(choices[0]),
            "usage": usage,
            "finish_reason": choices[0].get("finish_reason"),
            "model": data.get("model"),
        }
        return sdk.http_result(
            response,
            output=output,
            request_id=response.headers.get("x-request-id") or oa.as_text(data.get("id")),
            input_units=_count(usage, "prompt_tokens"),
            output_units=_count(usage, "completion_tokens"),
            detail=_cached(usage),
        )

    async def _streamed(self, body: bytes) -> sdk.Result:
        async with self._stream_call.stream(body) as resp:
            await sdk.raise_for_stream(resp, self._http_error)
            if "text/event-stream" not in resp.headers.get("content-type", ""):
                # the server ignored stream: true (or a proxy answered): read it as a whole
                await resp.aread()
                return self._complete(resp, sdk.json_object(resp, provider=self.name))
            parser = sdk.SSEParser()
            times: list[int] = []
            parts: list[str] = []
            usage: dict[str, Any] | None = None
            finish = chunk_id = model = None
            done = False
            arrived_ns = sdk.arrived_ns
            loads = json.loads
            async for raw in resp.aiter_raw():
                # when the socket read that brought these bytes happened (its events arrived
                # together), not when this task got to them: a busy loop's wait is not latency
                arrived = arrived_ns(resp)
                for event in parser.feed(raw):
                    if event == oa.DONE:
                        done = True
                        break
                    try:
                        # SSE is UTF-8: decoded here, json.loads skips guessing the encoding
                        obj = loads(event.decode("utf-8", "surrogatepass"))
                    except ValueError as exc:  # UnicodeDecodeError is one
                        raise self._invalid(resp, f"an SSE event is not JSON: {exc}") from exc
                    if not isinstance(obj, dict):
                        raise self._invalid(resp, "an SSE event is not a JSON object")
                    if obj.get("error") or obj.get("object") == "error":
                        raise self._stream_error(obj, resp.status_code)
                    choices = obj.get("choices")
                    if choices:
                        choice = choices[0]
                        text, generated = oa.delta_text(choice)
                        if generated:
                            times.append(arrived)
                        if text:
                            parts.append(text)
                        finish = choice.get("finish_reason") or finish
                    if obj.get("usage"):
                        usage = obj["usage"]
                    chunk_id = chunk_id or obj.get("id")
                    model = model or obj.get("model")
                if done:
                    break
            if not done:
                where = "mid-event" if parser.pending else "without data: [DONE]"
                raise self._invalid(resp, f"the stream ended {where}")
            if finish is None:
                # OpenAI, vLLM, TGI, SGLang and llama.cpp all give the last choice chunk a
                # finish_reason; llama-cpp-python (0.3) sends [DONE] without one when it cuts
                # a stream short for the next request: a partial answer, not a success
                raise self._invalid(
                    resp,
                    "the stream ended (data: [DONE]) but no chunk had a finish_reason: "
                    "the server cut the answer short",
                )
        output_units = _count(usage, "completion_tokens")
        detail: dict[str, Any] | None = _cached(usage)
        if output_units is None:  # no usage chunk: count what streamed, and say so
            output_units = len(times)
            detail = {"output_tokens_from": "chunks"}
        return sdk.http_result(
            resp,
            output={
                "text": "".join(parts),
                "usage": usage,
                "finish_reason": finish,
                "model": model,
            },
            request_id=resp.headers.get("x-request-id") or oa.as_text(chunk_id),
            input_units=_count(usage, "prompt_tokens"),
            output_units=output_units,
            token_times_ns=times,
            detail=detail,
        )

    # ----- errors ---------------------------------------------------------------------------

    def _http_error(self, response: httpx.Response) -> sdk.ProviderError:
        """The core's error for a status >= 400, its body read (as_provider_error: the call
        named, a 429's ``Retry-After`` in seconds or as an HTTP date), showing the error
        body's ``message`` and ``type`` (OpenAI's, vLLM's, TGI's shapes: ``oa.error_message``)."""
        message, kind = oa.error_message(sdk.json_or_text(response.text))
        detail = f"{message} ({kind})" if message and kind else message
        return sdk.status_error(response, provider=self.name, detail=detail)

    def _stream_error(self, obj: dict[str, Any], status: int) -> sdk.ProviderError:
        """An error event inside a 200 stream (vLLM: ``data: {"error": {...}}``): the server
        failed after it had started answering, so it is a server error."""
        message, kind = oa.error_message(obj)
        err = obj.get("error")
        code = err.get("code") if isinstance(err, dict) else obj.get("code")
        text = f"error inside the stream: {message or obj}" + (f" ({kind})" if kind else "")
        if code == 429 or kind in ("rate_limit_exceeded", "rate_limit_error"):
            return sdk.ThrottledError(text, provider=self.name, status_code=429)
        return sdk.ServerHTTPError(text, provider=self.name, status_code=status)

    def _invalid(self, response: httpx.Response, problem: str) -> sdk.InvalidResponseError:
        return sdk.invalid_response(response, problem, provider=self.name)


_JSON = "application/json"


def _count(usage: dict[str, Any] | None, key: str) -> int | None:
    return sdk.whole_number(None if usage is None else usage.get(key))


def _cached(usage: dict[str, Any] | None) -> dict[str, int] | None:
    """``{"cached_tokens": n}`` where ``usage.prompt_tokens_details`` says how many prompt
    tokens the server's prefix cache served (OpenAI, vLLM with --enable-prompt-tokens-details,
    llama.cpp's server); None where it does not say."""
    details = None if usage is None else usage.get("prompt_tokens_details")
    cached = _count(details, "cached_tokens") if isinstance(details, dict) else None
    return None if cached is None else {"cached_tokens": cached}


def _token_ids(value: list[Any]) -> bool:
    """Whether an ``input`` list is one text's token ids rather than several texts."""
    return bool(value) and all(isinstance(t, int) for t in value)
