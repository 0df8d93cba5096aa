"""Sending one fal request, mapping what went wrong into ``ProviderError``, reading SSE.

Every error names the method, the URL (credentials scrubbed) and the status; fal's error body
is ``{"detail": ...}`` (``fal_client.client._raise_for_status`` reads ``detail`` and
``error_type``).
"""

from __future__ import annotations

import json
import math
from collections.abc import AsyncIterator
from typing import Any

import httpx

from gpubench_sdk import (
    ClientHTTPError,
    InvalidResponseError,
    ProviderError,
    RequestTimeoutError,
    ServerHTTPError,
    ThrottledError,
    TransportError,
    redact,
    scrub_url,
)

PROVIDER = "fal"


async def send(
    client: httpx.AsyncClient,
    method: str,
    url: httpx.URL | str,
    headers: dict[str, str],
    body: Any = None,
) -> httpx.Response:
    """One request; a status >= 400, a timeout or a broken connection raises ``ProviderError``."""
    try:
        response = await client.request(method, url, json=body, headers=headers)
    except httpx.TimeoutException as exc:
        raise RequestTimeoutError(
            f"{where(method, url)}: {describe(exc)}", provider=PROVIDER
        ) from exc
    except httpx.HTTPError as exc:  # reset, refused, truncated body
        raise TransportError(f"{where(method, url)}: {describe(exc)}", provider=PROVIDER) from exc
    if response.status_code >= 400:
        raise http_error(response)
    return response


def where(method: str, url: httpx.URL | str) -> str:
    return f"{method} {scrub_url(str(url))}"


def http_error(response: httpx.Response, body: bytes | None = None) -> ProviderError:
    status = response.status_code
    detail: Any = None
    try:
        data = json.loads(body if body is not None else response.content)
        if isinstance(data, dict):
            detail = data.get("detail") or data.get("error") or data.get("status")
    except ValueError:
        pass
    text = str(detail) if detail else (body or response.content)[:200].decode(errors="replace")
    request = response.request
    message = redact(f"{where(request.method, request.url)}: HTTP {status}: {text}")
    kw: dict[str, Any] = {"provider": PROVIDER, "status_code": status}
    kw["request_id"] = response.headers.get("x-fal-request-id")
    if status == 429:
        return ThrottledError(message, retry_after_s=retry_after_s(response), **kw)
    if status == 504 and response.headers.get("x-fal-request-timeout-type"):
        return RequestTimeoutError(message, **kw)  # the caller's X-Fal-Request-Timeout ran out
    if status >= 500:
        return ServerHTTPError(message, **kw)
    return ClientHTTPError(message or response.reason_phrase, **kw)


def json_object(response: httpx.Response) -> dict[str, Any]:
    try:
        data = response.json()
    except ValueError as exc:
        raise invalid("response is not JSON", response) from exc
    if not isinstance(data, dict):
        raise invalid("response is not a JSON object", response)
    return data


def invalid(message: str, response: httpx.Response) -> InvalidResponseError:
    request = response.request
    return InvalidResponseError(
        f"{where(request.method, request.url)}: {message}",
        provider=PROVIDER,
        status_code=response.status_code,
    )


def number(value: Any) -> float | None:
    if isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value):
        return float(value)
    return None


def retry_after_s(response: httpx.Response) -> float | None:
    value = response.headers.get("Retry-After")
    try:
        return float(value) if value is not None else None
    except ValueError:
        return None  # an HTTP date: not sent by fal's queue, so not parsed


def describe(exc: BaseException) -> str:
    return redact(f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__)


async def sse_events(response: httpx.Response) -> AsyncIterator[tuple[str, str]]:
    """``(event, data)`` for each server-sent event of ``response``; comment lines (fal's
    keep-alive every 15 s) are skipped. Raises ``InvalidResponseError`` if the stream stops
    in the middle of an event."""
    event, pending = "message", ""
    data: list[str] = []
    async for text in response.aiter_text():
        pending += text
        *lines, pending = pending.split("\n")
        for raw in lines:
            line = raw.rstrip("\r")
            if not line:
                if data:
                    yield event, "\n".join(data)
                event, data = "message", []
            elif line.startswith(":"):
                continue
            else:
                field, _, value = line.partition(":")
                value = value.removeprefix(" ")
                if field == "data":
                    data.append(value)
                elif field == "event":
                    event = value
    if data or pending.strip():
        raise invalid("the event stream ended in the middle of an event", response)
