"""Pieces for plugins whose control plane goes through the provider's own SDK (boto3,
azure-mgmt, google-cloud): that SDK's exceptions as gpubench's errors, and the user's settings
as they were before the benchmark changed them, put back on close.

Like ``_kit``, nothing here knows a provider or imports an SDK: each plugin says what its
SDK's exception tells (the HTTP status, a timeout) and how its settings are written back.
"""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Callable, Iterator
from typing import Generic, TypeVar

from .._base._errors import ConfigError, ProviderError, RequestTimeoutError, TransportError
from .._base._secrets import redact
from ._kit import error_for_status

T = TypeVar("T")
ErrorMap = Callable[[Exception], "ProviderError | ConfigError"]


def sdk_error(
    exc: BaseException,
    *,
    provider: str,
    service: str,
    status: int | None = None,
    timed_out: bool = False,
    hint: str | None = None,
) -> ProviderError:
    """The ``ProviderError`` for an exception a cloud SDK raised, saying
    ``service: Type: message`` (secrets masked) and ``hint`` after it in parentheses (the
    role a refused caller needs). With the HTTP ``status`` the SDK read, the error that
    status stands for (``error_for_status``); without one (no answer came), a
    ``RequestTimeoutError`` when ``timed_out``, else a ``TransportError``."""
    message = redact(f"{service}: {type(exc).__name__}: {exc}")
    if hint:
        message += f" ({hint})"
    if status is not None:
        return error_for_status(message, status, provider=provider)
    error = RequestTimeoutError if timed_out else TransportError
    return error(message, provider=provider)


@contextlib.contextmanager
def sdk_errors(error: ErrorMap) -> Iterator[None]:
    """Around calls into a cloud SDK: an exception leaves as ``error(exc)`` (raised from it),
    unless it is gpubench's own already (a ``ProviderError``, a ``ConfigError``)."""
    try:
        yield
    except (ProviderError, ConfigError):
        raise
    except Exception as exc:
        raise error(exc) from exc


class SavedSettings(Generic[T]):
    """The user's settings, of any shape (a copy count, a scale block, a template's labels),
    as they were before the benchmark first changed them: ``keep(value)`` before each change
    remembers the first value only, and ``restore()`` (from ``close()``) writes it back once
    with ``write``. ``SavedScaling`` is the same for ``ScalingSettings``."""

    def __init__(self, write: Callable[[T], Awaitable[object]]) -> None:
        self._write = write
        self.value: T | None = None

    def keep(self, value: T) -> None:
        if self.value is None:
            self.value = value

    async def restore(self) -> None:
        value, self.value = self.value, None
        if value is not None:  # leave the target as the user configured it
            await self._write(value)
