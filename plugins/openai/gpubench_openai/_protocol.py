"""The OpenAI-compatible wire format: request bodies, response fields, error bodies.

Sources (read 2026-11):

* OpenAI API reference, "Create chat completion" and "Create completion"
  (platform.openai.com/docs/api-reference/chat/create, .../completions/create): ``stream``,
  ``stream_options.include_usage`` ("an additional chunk will be streamed before the
  ``data: [DONE]`` message. The ``usage`` field on this chunk shows the token usage statistics
  for the entire request, and the ``choices`` field will always be an empty array"; "if the
  stream is interrupted, you may not receive the final usage chunk"), chunk objects
  ``chat.completion.chunk`` with ``choices[].delta.content`` and ``text_completion`` with
  ``choices[].text``; the response header ``x-request-id``.
* OpenAI API reference, "Error codes": error bodies ``{"error": {"message", "type", "param",
  "code"}}``; 429 for rate limits (with ``retry-after`` on some responses).
* vLLM ``vllm/entrypoints/openai/protocol.py`` and ``serving_chat.py``: the same routes under
  ``/v1``; the usage chunk may carry ``"choices": []`` or none; errors inside a stream are a
  ``data: {"error": {...}}`` event; older versions answer errors as ``{"object": "error",
  "message", "type", "code"}`` at the top level; reasoning models stream
  ``delta.reasoning_content``. Extra sampling parameters (``top_k``...) are accepted in the body.
* OpenAI API reference, "Create embeddings" (platform.openai.com/docs/api-reference/embeddings/
  create, read 2026-12): body ``model``, ``input`` (a string or an array of strings or token
  arrays), ``encoding_format`` (``float`` or ``base64``), ``dimensions``; the answer
  ``{"object": "list", "data": [{"object": "embedding", "index", "embedding"}], "model",
  "usage": {"prompt_tokens", "total_tokens"}}``, one item per input; base64 is the float32
  array's little-endian bytes (what the official client decodes with ``np.frombuffer``).
* OpenAI API reference, "Create transcription" (platform.openai.com/docs/api-reference/audio/
  createTranscription, read 2026-12) and the official client's types (openai-python 3.63,
  ``types/audio/transcription.py``): ``POST /audio/transcriptions`` as ``multipart/form-data``
  with ``file`` (flac, mp3, mp4, mpeg, mpga, m4a, ogg, wav or webm; "an extension-bearing
  filename"), ``model``, optional ``language`` (ISO-639-1), ``prompt``, ``response_format``
  (``json`` by default, ``verbose_json``, ``text``...), ``temperature``; the ``json`` answer
  ``{"text", "usage"}`` where ``usage`` is ``{"type": "duration", "seconds"}`` (``whisper-1``,
  billed by audio duration) or ``{"type": "tokens", "input_tokens", "output_tokens",
  "total_tokens"}`` (the ``gpt-4o-*-transcribe`` models). vLLM serves the same route for Whisper
  models (docs.vllm.ai, "OpenAI-Compatible Server", Transcriptions API).
* OpenAI's vision guide (platform.openai.com/docs/guides/images-vision, "Calculating costs",
  read 2026-12) and vLLM's multimodal inputs (docs.vllm.ai, "Multimodal Inputs", OpenAI Vision
  API): a user message's ``content`` is a list of parts, ``{"type": "text", "text"}`` and
  ``{"type": "image_url", "image_url": {"url", "detail"}}`` where ``url`` may be a base64
  ``data:`` URL and ``detail`` is ``low``, ``high`` or ``auto``. GPT-4o-class models count a
  ``low`` picture as 85 tokens and a ``high`` one as 85 + 170 per 512-pixel tile after fitting
  it in 2048x2048 and its shorter side in 768 (the guide's worked example: 1024x1024 is 765).
* TGI's Messages API (huggingface.co/docs/text-generation-inference/messages_api) and SGLang
  (docs.sglang.ai, "OpenAI APIs"): the same chunk format, ending with ``data: [DONE]``.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping
from typing import Any

CHAT_PATH = "chat/completions"
COMPLETIONS_PATH = "completions"
EMBEDDINGS_PATH = "embeddings"
TRANSCRIPTIONS_PATH = "audio/transcriptions"
PATHS = {
    "chat": CHAT_PATH,
    "completions": COMPLETIONS_PATH,
    "embeddings": EMBEDDINGS_PATH,
    "transcriptions": TRANSCRIPTIONS_PATH,
}
#: A transcription's multipart form fields the plugin sends from the payload (never the audio).
TRANSCRIPTION_FIELDS = ("language", "prompt", "temperature", "response_format")
#: File name extensions by MIME type: the upload names its format, as the API asks.
AUDIO_EXTENSIONS = {
    "audio/wav": "wav",
    "audio/x-wav": "wav",
    "audio/mpeg": "mp3",
    "audio/flac": "flac",
    "audio/ogg": "ogg",
    "audio/mp4": "m4a",
    "audio/webm": "webm",
}
DONE = b"[DONE]"
#: Request payload keys the mapping consumes; any other key is sent as an extra body field.
MAPPED_KEYS = frozenset({"prompt", "messages", "max_tokens", "stream", "images", "image_detail"})


def error_message(body: Any) -> tuple[str | None, str | None]:
    """(message, type/code) from an OpenAI, vLLM or TGI error body; (None, None) if none."""
    if not isinstance(body, Mapping):
        return None, None
    err = body.get("error")
    if isinstance(err, Mapping):  # OpenAI, newer vLLM, SGLang
        # OpenAI's string code is the specific one ("rate_limit_exceeded" under the type
        # "requests", "invalid_api_key" under "invalid_request_error"); vLLM's code is the
        # HTTP status again, so its type says more
        code = err.get("code")
        kind = code if isinstance(code, str) and code else err.get("type") or code
        return as_text(err.get("message")), None if kind is None else str(kind)
    if isinstance(err, str):  # TGI: {"error": "...", "error_type": "..."}
        kind = body.get("error_type")
        return err, None if kind is None else str(kind)
    if body.get("object") == "error":  # older vLLM
        kind = body.get("type") or body.get("code")
        return as_text(body.get("message")), None if kind is None else str(kind)
    return None, None


def as_text(value: Any) -> str | None:
    """A JSON value (a message, an id) as text; None stays None."""
    return None if value is None else str(value)


def delta_text(choice: Mapping[str, Any]) -> tuple[str | None, bool]:
    """(visible text, whether the chunk carried any generated token) of one streamed choice.

    A reasoning model's ``reasoning_content`` (vLLM, SGLang) or ``reasoning`` is generated
    output too: it counts for token timing, but it is not part of the answer's text.
    """
    delta = choice.get("delta")
    if type(delta) is dict or isinstance(delta, Mapping):  # dict first: per token, ABCs cost
        content = delta.get("content")
        reasoning = delta.get("reasoning_content") or delta.get("reasoning")
        return (content if isinstance(content, str) else None), bool(content or reasoning)
    text = choice.get("text")  # /v1/completions chunks
    return (text if isinstance(text, str) else None), bool(text)


def embedding_dimensions(data: Any) -> int | None:
    """The vectors' length in an embeddings answer's ``data`` (a float list, or base64 float32
    bytes); None when ``data`` holds no readable first vector."""
    first = data[0].get("embedding") if isinstance(data, list) and data else None
    if isinstance(first, list):
        return len(first)
    if isinstance(first, str):
        try:
            return len(base64.b64decode(first, validate=True)) // 4
        except ValueError:
            return None
    return None


def user_content(prompt: str, images: list[str], detail: str | None) -> list[dict[str, Any]]:
    """A user message's content parts: the text, then an ``image_url`` part per picture."""
    shown = {} if detail is None else {"detail": detail}
    pictures = [{"type": "image_url", "image_url": {"url": url, **shown}} for url in images]
    return [{"type": "text", "text": prompt}, *pictures]


def message_text(choice: Mapping[str, Any]) -> str | None:
    """The answer's text of one non-streamed choice (chat or completions)."""
    message = choice.get("message")
    text = message.get("content") if isinstance(message, Mapping) else choice.get("text")
    return text if isinstance(text, str) else None
