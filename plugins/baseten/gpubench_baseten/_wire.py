"""Sending one Baseten request and mapping what went wrong into ``ProviderError``.

Every error names the method, the URL (credentials scrubbed) and the status; Baseten's error
body is ``{"error", "error_code", "detail"}`` (the SDK's ``ErrorResponse``).
"""

from __future__ import annotations

import json
import math
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

PROVIDER = "baseten"


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
            parts = [data.get(k) for k in ("error_code", "error", "detail")]
            detail = ": ".join(str(p) for p in parts if p)
    except ValueError:
        pass
    text = str(detail) if detail else (body or response.content)[:200].decode(errors="replace")
    request = response.request
    message = redact(f"{where(request.method, request.url)}: HTTP {status}: {text}")
    kw: dict[str, Any] = {"provider": PROVIDER, "status_code": status}
    if status == 429:
        return ThrottledError(message, retry_after_s=retry_after_s(response), **kw)
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
        return None  # an HTTP date: Baseten documents no Retry-After, so not parsed


def describe(exc: BaseException) -> str:
    return redact(f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__)
