"""The pieces provider plugins kept writing for themselves: a checked send, JSON answers,
key headers, cold-start marks, scaling fields and the user's settings put back on close.

Each is small; what they share is that every plugin needs them the same way, so one copy
here keeps the plugins to their protocol. Nothing here knows a provider.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import math
import statistics
from collections import deque
from collections.abc import Awaitable, Callable, Iterator
from typing import Any, TypeVar

import httpx
from pydantic import Field

from .._base._errors import (
    ClientHTTPError,
    ConfigError,
    InvalidResponseError,
    ProviderError,
    ServerHTTPError,
)
from .._base._secrets import redact
from .._base._types import Result, ScalingSettings
from .._transport._call import CallResponse
from .._transport._client import as_provider_error, first_byte_ns
from .._transport._errors import error_type
from .._transport._responses import invalid_response
from ._jobs import Job, Polling, run_job
from ._provider import Provider, ProviderOptions

T = TypeVar("T")


class PollingOptions(ProviderOptions):
    """Options of a provider that polls (a queue-style API): the backoff ``run_job`` uses,
    as ``self.options.polling``."""

    poll_interval_s: float = Field(default=0.05, gt=0, description="first poll delay")
    poll_max_interval_s: float = Field(default=1.0, gt=0, description="backoff cap")
    poll_backoff: float = Field(default=1.5, ge=1.0, description="delay multiplier per poll")

    @property
    def polling(self) -> Polling:
        return Polling(self.poll_interval_s, self.poll_max_interval_s, self.poll_backoff)


async def run_polled(
    provider: Provider, job: Job[Any], *, timeout_s: float | None = None
) -> Result:
    """``run_job`` as a provider whose options are ``PollingOptions`` calls it: errors named
    for the provider, its options' ``timeout_s`` the deadline (unless ``timeout_s`` is given:
    one with room for the platform's own deadline) and their ``polling`` the backoff."""
    options = provider.options
    if not isinstance(options, PollingOptions):
        raise TypeError(f"{type(provider).__name__}'s options are no PollingOptions")
    deadline_s = options.timeout_s if timeout_s is None else timeout_s
    return await run_job(job, provider=provider.name, timeout_s=deadline_s, polling=options.polling)


def with_capabilities(provider: Provider, **changes: Any) -> None:
    """Declare what this instance can do where its options decide it (no management API,
    another route): the class's capabilities with ``changes``, for the runner to read."""
    vars(provider)["capabilities"] = dataclasses.replace(type(provider).capabilities, **changes)


def status_error(
    response: httpx.Response, *, provider: str, detail: str | None = None, **kw: Any
) -> ProviderError:
    """The core's error for ``response``'s status >= 400 (``as_provider_error``: the call
    named, a 429's ``Retry-After`` read), showing ``detail`` (the provider's documented error
    text) instead of the raw body; ``request_id`` may be given."""
    exc = httpx.HTTPStatusError("", request=response.request, response=response)
    return as_provider_error(exc, provider=provider, detail=detail, **kw)


def error_for_status(message: str, status: int, *, provider: str) -> ProviderError:
    """The error a status stands for where another client (a cloud SDK) reports it: 429
    ``ThrottledError``, 5xx ``ServerHTTPError``, any other ``ClientHTTPError``."""
    return error_type(status)(message, provider=provider, status_code=status)


ErrorOf = Callable[[httpx.Response], ProviderError]


async def send_checked(
    client: httpx.AsyncClient,
    method: str,
    url: httpx.URL | str,
    *,
    provider: str,
    headers: dict[str, str] | None = None,
    json: Any = None,
    error: ErrorOf | None = None,
) -> httpx.Response:
    """One request whose failure is the core's ``ProviderError`` at once, not only at
    ``invoke``'s boundary (a management call, a status poll): a timeout or broken connection
    through ``as_provider_error``, a status >= 400 through ``error`` (default
    ``status_error``: a provider with an error body of its own passes its reader)."""
    try:
        response = await client.request(method, url, json=json, headers=headers)
    except httpx.HTTPError as exc:  # timeout, reset, refused, truncated body
        raise as_provider_error(exc, provider=provider) from exc
    if response.status_code >= 400:
        raise error(response) if error else status_error(response, provider=provider)
    return response


async def raise_for_stream(response: httpx.Response, error: ErrorOf) -> None:
    """A streamed response's status >= 400: its body read (the error shows its start), then
    ``error(response)`` raised."""
    if response.status_code >= 400:
        await response.aread()
        raise error(response)


def json_body(
    response: httpx.Response, *, provider: str, problem: str = "response is not JSON"
) -> Any:
    """The answer's body as JSON of any type (an object, a list, a string: ``json_object``
    wants an object); ``invalid_response`` saying ``problem`` when it is not JSON."""
    try:
        return response.json()
    except ValueError as exc:
        raise invalid_response(response, problem, provider=provider) from exc


def http_result(response: httpx.Response | CallResponse, **fields: Any) -> Result:
    """The ``Result`` of an HTTP answer (an httpx response, or a ``PreparedCall``'s): its
    status and its first byte (when its headers came; a ``first_byte_ns`` in ``fields``, such
    as a stream's first piece, stands instead), and ``fields`` the rest (``output``,
    ``request_id``, ``cold``...)."""
    if "first_byte_ns" not in fields:
        fields["first_byte_ns"] = first_byte_ns(response)
    return Result(http_status=response.status_code, **fields)


def json_result(
    response: httpx.Response,
    *,
    provider: str,
    problem: str = "response is not JSON",
    **fields: Any,
) -> Result:
    """The ``Result`` of a plain JSON answer: its body as ``output`` (``json_body``: an
    ``invalid_response`` saying ``problem`` when it is not JSON), its status and first byte
    (``http_result``); ``fields`` add the rest (``request_id``, ``cold``...)."""
    return http_result(
        response, output=json_body(response, provider=provider, problem=problem), **fields
    )


def json_event(data: str, *, provider: str, what: str = "a stream event") -> dict[str, Any]:
    """A stream event's (or a status's) data as a JSON object; ``InvalidResponseError``
    saying ``what`` is not JSON, or not an object."""
    try:
        value = json.loads(data)
    except ValueError as exc:
        raise InvalidResponseError(f"{what} is not JSON", provider=provider) from exc
    if not isinstance(value, dict):
        raise InvalidResponseError(f"{what} is not a JSON object", provider=provider)
    return value


def stream_error(detail: Any, *, provider: str, status_code: int | None = None) -> ServerHTTPError:
    """The error an ``error`` event inside a streamed answer reports: the server failed after
    it had begun answering, so a ``ServerHTTPError`` saying ``stream error: `` and the start of
    ``detail`` (200 characters), secrets masked."""
    message = redact(f"stream error: {str(detail)[:200]}")
    return ServerHTTPError(message, provider=provider, status_code=status_code)


def json_or_text(text: str) -> Any:
    """A streamed piece's data: JSON where it parses (objects, numbers), else the text."""
    try:
        return json.loads(text)
    except ValueError:
        return text


def finite_number(value: Any) -> float | None:
    """A JSON number that is finite (not a bool, NaN or infinity) as a float, else None."""
    if isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value):
        return float(value)
    return None


def reported_time(value: Any) -> float | None:
    """A time a server reported, a JSON number or a header's text (``"12.5"``), as a finite
    float >= 0; None for anything else (a missing or garbled timing fails no request)."""
    if isinstance(value, bool):
        return None
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) and number >= 0 else None


def required(value: T | None, field: str, expected: str) -> T:
    """``value``, which the options (or what was read with them) must give for the call at
    hand; ``None`` is the ``ConfigError`` naming ``field`` and ``expected``, what it must be
    (``required(self._admin, "app", "the app's resource id, to control it")``)."""
    if value is None:
        raise ConfigError(field, None, expected)
    return value


@contextlib.contextmanager
def refused_as_config(field: str, value: Any, platform: str) -> Iterator[None]:
    """Around a call that writes settings (``set_scaling``'s ``PATCH``): the platform
    refusing them with a 4xx (``ClientHTTPError``) leaves as the ``ConfigError`` that names
    ``field`` and ``value`` and asks for ``values <platform> accepts (<its refusal>)``; any
    other error leaves as it is."""
    try:
        yield
    except ClientHTTPError as exc:
        raise ConfigError(field, value, f"values {platform} accepts ({exc})") from exc


def describe_error(exc: BaseException) -> str:
    """``Type: message`` of an exception, secrets masked, for an error's text."""
    return redact(f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__)


class WarmBaseline:
    """The running median of warm waits (the last ``window``): a wait is an inferred cold
    start when it is at least ``threshold_ms`` and ``factor`` times that median."""

    def __init__(self, threshold_ms: float, factor: float, window: int = 50) -> None:
        self.threshold_ms, self.factor = threshold_ms, factor
        self._warm_ms: deque[float] = deque(maxlen=window)

    @property
    def median_ms(self) -> float | None:
        return statistics.median(self._warm_ms) if self._warm_ms else None

    def cold(self, waited_ms: float) -> bool:
        """Whether ``waited_ms`` was a cold start; a warm one joins the baseline."""
        cold = self.is_cold(waited_ms)
        if not cold:
            self.add(waited_ms)
        return cold

    def is_cold(self, waited_ms: float) -> bool:
        """The rule alone, the baseline left as it is (for a caller that knows better in some
        cases, such as a server's own timing, and ``add``s the warm waits itself)."""
        baseline_ms = self.median_ms or 0.0
        return waited_ms >= self.threshold_ms and waited_ms >= self.factor * baseline_ms

    def add(self, waited_ms: float) -> None:
        """A wait known to be warm joins the baseline."""
        self._warm_ms.append(waited_ms)


class ColdMark:
    """Whether a request met a cold target, for a provider without a per-request signal:
    after ``expect()`` (``ensure_cold`` saw no worker) the next request is cold as a fact (or,
    ``expect(confirmed=False)``, as a procedure's inference); else, with ``threshold_ms``, a
    first byte that slow is inferred cold; else unknown."""

    def __init__(self, threshold_ms: float | None = None) -> None:
        self.threshold_ms = threshold_ms
        self._next: bool | None = None

    def expect(self, confirmed: bool = True) -> None:
        self._next = confirmed

    def take(self) -> bool | None:
        """Whether ``expect`` was called since the last request (confirmed or not), and
        forget it: None when not."""
        confirmed, self._next = self._next, None
        return confirmed

    def judge(self, sent_ns: int, arrived_ns: int | None) -> tuple[bool | None, bool]:
        """``(cold, cold_confirmed)`` for a request sent at ``sent_ns`` whose first byte
        came at ``arrived_ns``."""
        confirmed = self.take()
        if confirmed is not None:
            return True, confirmed
        if self.threshold_ms is None or arrived_ns is None:
            return None, False
        return (arrived_ns - sent_ns) / 1e6 >= self.threshold_ms, False


def scaling_fields(
    settings: ScalingSettings,
    min_key: str,
    max_key: str,
    idle_key: str | None = None,
    *,
    idle_unit_s: float = 1.0,
    idle_range: tuple[float | None, float | None] = (None, None),
    round_up: bool = False,
    expected: str = "whole seconds",
) -> dict[str, int]:
    """The provider's fields for the knobs ``settings`` gives: ``min_workers`` as
    ``min_key``, ``max_workers`` as ``max_key``, ``idle_timeout_s`` as ``idle_key`` in units
    of ``idle_unit_s`` seconds (rounded up with ``round_up``; else a fraction, or a number
    outside ``idle_range`` (low, high: None is unbounded), is a ``ConfigError`` saying
    ``expected``)."""
    fields: dict[str, int] = {}
    if settings.min_workers is not None:
        fields[min_key] = settings.min_workers
    if settings.max_workers is not None:
        fields[max_key] = settings.max_workers
    if settings.idle_timeout_s is not None and idle_key is not None:
        units = settings.idle_timeout_s / idle_unit_s
        if round_up:
            units = math.ceil(units)
        elif units != round(units) or not _within(units, *idle_range):
            raise ConfigError("scaling.idle_timeout_s", settings.idle_timeout_s, expected)
        fields[idle_key] = round(units)
    return fields


class SavedScaling:
    """The user's scaling, read before the benchmark first changes it and put back by
    ``restore()`` (from ``close()``): ``read`` gets the settings, ``write`` applies them."""

    def __init__(
        self,
        read: Callable[[], Awaitable[ScalingSettings]],
        write: Callable[[ScalingSettings], Awaitable[None]],
    ) -> None:
        self._read, self._write = read, write
        self.original: ScalingSettings | None = None

    async def change(self, settings: ScalingSettings) -> None:
        if self.original is None:
            self.original = await self._read()
        await self._write(settings)

    async def restore(self) -> None:
        original, self.original = self.original, None
        if original is not None:  # leave the target as the user configured it
            await self._write(original)


def _within(value: float, low: float | None, high: float | None) -> bool:
    return (low is None or value >= low) and (high is None or value <= high)
