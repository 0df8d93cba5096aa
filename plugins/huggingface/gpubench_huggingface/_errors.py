"""HTTP answers mapped into gpubench's error taxonomy, by the protocol that sent them."""

from __future__ import annotations

from typing import Any

import httpx

from gpubench_sdk import ClientHTTPError, ProviderError, ServerHTTPError, ThrottledError, redact


class HandlerError(ServerHTTPError):
    """The model failed on a well-formed request: TGI's 424 generation error, or the toolkit's
    400 ``{"error"}`` (it answers every handler exception so). ``status_code`` is kept."""


def http_error(response: httpx.Response, provider: str, toolkit: bool) -> ProviderError:
    """The error for a 4xx/5xx answer; ``toolkit``: it came from the toolkit's ``POST /``."""
    status = response.status_code
    detail = error_type = None
    try:
        data = response.json()
        if isinstance(data, dict):
            detail, error_type = data.get("error"), data.get("error_type")
    except ValueError:
        pass
    text = detail or response.text[:200] or response.reason_phrase
    message = redact(f"HTTP {status}: {text}")
    kw: dict[str, Any] = {"provider": provider, "status_code": status}
    if status == 429:
        return ThrottledError(message, retry_after_s=retry_after_s(response), **kw)
    if status >= 500:
        return ServerHTTPError(message, **kw)
    if status == 424 or error_type == "generation" or (status == 400 and toolkit and detail):
        return HandlerError(message, **kw)
    return ClientHTTPError(message, **kw)


def retry_after_s(response: httpx.Response) -> float | None:
    value = response.headers.get("Retry-After")
    try:
        return float(value) if value is not None else None
    except ValueError:
        return None  # an HTTP date: no HF service is known to send one


def describe(exc: BaseException) -> str:
    return redact(f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__)
