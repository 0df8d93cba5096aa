"""Sending one fal request and reading server-sent events.

HTTP statuses, timeouts and broken connections become the core's ``ProviderError``s
(``as_provider_error``: method, URL without credentials, status, the start of fal's
``{"detail": ...}`` body, ``Retry-After`` in seconds or as an HTTP date); this module adds only
what is fal's own: the request id header and the 504 fal marks as the caller's timeout.
"""

from __future__ import annotations

import math
from collections.abc import AsyncIterator
from typing import Any

import httpx

from gpubench_sdk import (
    InvalidResponseError,
    ProviderError,
    RequestTimeoutError,
    as_provider_error,
    invalid_response,
)

from . import _protocol as fal

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
    except httpx.HTTPError as exc:  # timeout, reset, refused, truncated body
        raise as_provider_error(exc, provider=PROVIDER) from exc
    if response.is_error:
        raise http_error(response)
    return response


def http_error(response: httpx.Response) -> ProviderError:
    """The core's error for a status >= 400 (its body read), with fal's request id; a 504
    marked ``X-Fal-Request-Timeout-Type`` is the caller's ``X-Fal-Request-Timeout`` running out
    before a runner took the request, so a timeout rather than a server error."""
    status_error = httpx.HTTPStatusError(
        f"HTTP {response.status_code}", request=response.request, response=response
    )
    request_id = response.headers.get(fal.REQUEST_ID_HEADER)
    error = as_provider_error(status_error, provider=PROVIDER, request_id=request_id)
    if response.status_code == 504 and response.headers.get(fal.REQUEST_TIMEOUT_TYPE_HEADER):
        text = str(error).removeprefix(f"[{PROVIDER}] ")
        return RequestTimeoutError(text, provider=PROVIDER, status_code=504, request_id=request_id)
    return error


def invalid(message: str, response: httpx.Response) -> InvalidResponseError:
    return invalid_response(response, message, provider=PROVIDER)


def number(value: Any) -> float | None:
    if isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value):
        return float(value)
    return None


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
