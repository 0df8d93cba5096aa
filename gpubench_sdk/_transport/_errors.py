"""The ``ProviderError`` an exception escaping a plugin's ``invoke`` stands for, and the
``Retry-After`` parser: the transport's error vocabulary, apart from the transport itself."""

from __future__ import annotations

import asyncio
import email.utils
import math
import time
from collections.abc import Mapping
from typing import Any, Protocol

import aiohttp
import httpx

from .._base._errors import (
    ClientHTTPError,
    HTTPStatusError,
    InvalidResponseError,
    ProviderError,
    RequestTimeoutError,
    ServerHTTPError,
    ThrottledError,
    TransportError,
)
from .._base._secrets import redact, scrub_url


def map_aiohttp_error(exc: BaseException) -> Exception:
    """Translate aiohttp's exceptions into httpx's, so plugins catch one family."""
    if isinstance(exc, httpx.HTTPError):
        return exc
    text = str(exc) or type(exc).__name__
    if isinstance(exc, asyncio.TimeoutError | aiohttp.ServerTimeoutError):
        if isinstance(exc, aiohttp.ConnectionTimeoutError):
            return httpx.ConnectTimeout(text)
        return httpx.ReadTimeout(text)
    if isinstance(exc, aiohttp.ClientConnectorError):
        return httpx.ConnectError(text)
    if isinstance(exc, aiohttp.ServerDisconnectedError | aiohttp.ClientPayloadError):
        return httpx.RemoteProtocolError(text)
    if isinstance(exc, aiohttp.ClientResponseError):
        return httpx.RemoteProtocolError(text)
    if isinstance(exc, aiohttp.ClientOSError | ConnectionError | OSError):
        return httpx.ReadError(text)
    if isinstance(exc, aiohttp.ClientError):
        return httpx.TransportError(text)
    return httpx.TransportError(f"{type(exc).__name__}: {text}")


_BODY_SHOWN = 300


def as_provider_error(
    exc: BaseException,
    *,
    provider: str,
    request_id: str | None = None,
    detail: str | None = None,
) -> ProviderError:
    """The ``ProviderError`` an exception escaping ``invoke`` stands for.

    ``Provider`` applies it to whatever its ``invoke`` raises, so ``raise_for_status()`` and a
    failed ``response.json()`` are enough in a plugin; the runner's ``classify`` and the testing
    kit see the same errors. An HTTP status error names the method, the URL (without
    credentials or query) and the status, and keeps the start of the server's body; a 429
    becomes ``ThrottledError`` with ``Retry-After``'s seconds. Parsing errors (and plugin bugs)
    become ``InvalidResponseError`` with the exception's type in the message. Secrets the
    process knows are masked (``ProviderError`` redacts every message).

    ``request_id`` (e.g. the job a failed poll was reading) is set on the error unless it
    already names one: ``raise as_provider_error(exc, provider=..., request_id=job) from exc``.
    ``detail`` is what the provider's documented error body says (OpenAI's ``error.message``,
    KServe's ``error``), read by the plugin: a status error shows it instead of the raw body.
    """
    error = _as_provider_error(exc, provider, detail)
    if error.request_id is None:
        error.request_id = request_id
    return error


def error_type(status: int) -> type[ProviderError]:
    """The error a status >= 400 stands for: 429 ``ThrottledError``, 5xx ``ServerHTTPError``,
    any other ``ClientHTTPError``. The one mapping: ``as_provider_error``, the local provider
    and the plugin kit's ``error_for_status`` (a cloud SDK's status) all read it."""
    if status == 429:
        return ThrottledError
    return ServerHTTPError if status >= 500 else ClientHTTPError


def _as_provider_error(exc: BaseException, provider: str, detail: str | None) -> ProviderError:
    if isinstance(exc, ProviderError):
        return exc
    where = ""
    request = getattr(exc, "_request", None)  # httpx.RequestError.request raises when unset
    if isinstance(request, httpx.Request):
        where = f"{request.method} {scrub_url(str(request.url)).split('?', 1)[0]}: "
    if isinstance(exc, httpx.HTTPStatusError):
        response = exc.response
        status = response.status_code
        text = f"{where}HTTP {status} {response.reason_phrase}".rstrip()
        body = _shown(detail) if detail else _body_text(response)
        if body:
            text += f": {body}"
        kw: dict[str, Any] = {"provider": provider, "status_code": status}
        if status < 400:
            return HTTPStatusError(text, **kw)  # an unfollowed 3xx: not an answer
        if status == 429:
            kw["retry_after_s"] = retry_after_s(response)
        return error_type(status)(text, **kw)
    detail = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
    if isinstance(exc, httpx.TimeoutException | TimeoutError):
        return RequestTimeoutError(where + detail, provider=provider)
    if isinstance(exc, httpx.TransportError | OSError):
        return TransportError(where + detail, provider=provider)
    return InvalidResponseError(where + detail, provider=provider)


def _body_text(response: httpx.Response) -> str:
    try:
        text = response.text
    except httpx.ResponseNotRead:  # a streamed body nobody read: say nothing rather than block
        return ""
    return _shown(text)


def _shown(text: str) -> str:
    text = " ".join(redact(text).split())
    return text if len(text) <= _BODY_SHOWN else text[: _BODY_SHOWN - 3] + "..."


class _Answer(Protocol):
    @property
    def headers(self) -> Mapping[str, str]: ...


def retry_after_s(answer: _Answer | str | None) -> float | None:
    """``Retry-After`` in seconds (RFC 9110 section 10.2.3: a number of seconds, or an HTTP
    date, a past one being 0), from a response (httpx's, a ``CallResponse``) or from the
    header's value as any other client gives it (``None`` when there is none). ``None`` when
    absent or unreadable. ``as_provider_error`` applies it to every 429; a plugin needs it only
    for a throttling signal of its own (another status, a header read through another client).
    """
    value = (
        answer if answer is None or isinstance(answer, str) else answer.headers.get("retry-after")
    )
    if not value:
        return None
    try:
        seconds = float(value)
    except ValueError:
        try:
            seconds = email.utils.parsedate_to_datetime(value).timestamp() - time.time()
        except (TypeError, ValueError):
            return None
    return max(0.0, seconds) if math.isfinite(seconds) else None
