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
PATHS = {"chat": CHAT_PATH, "completions": COMPLETIONS_PATH, "embeddings": EMBEDDINGS_PATH}
DONE = b"[DONE]"
#: Request payload keys the mapping consumes; any other key is sent as an extra body field.
MAPPED_KEYS = frozenset({"prompt", "messages", "max_tokens", "stream"})


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


def message_text(choice: Mapping[str, Any]) -> str | None:
    """The answer's text of one non-streamed choice (chat or completions)."""
    message = choice.get("message")
    if isinstance(message, Mapping):
        content = message.get("content")
        return content if isinstance(content, str) else None
    text = choice.get("text")
    return text if isinstance(text, str) else None
