"""``Sender``: ``send_checked`` and ``raise_for_stream`` bound to what a provider passes on every
call of its API (its client, its name, its headers with the key, its reader of error bodies).

Each plugin that speaks a JSON API over several calls (a submit, status polls, a cancel, a
management call) wrapped ``send_checked`` in a ``_send`` method of its own, always the same
seven arguments; one ``Sender`` made in ``open()`` is that method (``Sender.of(self)`` binds
the provider's client, name, options' headers and ``auth_headers()``)::

    async def open(self) -> None:
        self._send = Sender.of(self, error=acme_error)

    async def invoke(self, request: Request) -> Result:
        response = await self._send("POST", self._url, dict(request.payload))
        ...
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from typing import Any

import httpx

from .._base._errors import ProviderError
from .._transport._responses import json_object
from ._kit import ErrorOf, raise_for_stream, send_checked, status_error
from ._provider import Provider


@dataclass(frozen=True, slots=True)
class Sender:
    """Sends a provider's requests: ``send_checked`` through ``client`` with ``headers``,
    errors named for ``provider`` and a status >= 400 read by ``error`` (default
    ``status_error``). Call it for one request, ``json`` for one whose answer is a JSON object,
    ``stream`` for one read as it arrives."""

    client: httpx.AsyncClient
    provider: str
    headers: Mapping[str, str]
    error: ErrorOf | None = None

    @classmethod
    def of(cls, provider: Provider, error: ErrorOf | None = None) -> Sender:
        """The sender of ``provider``'s calls: its client and name, and its options' headers
        with its ``auth_headers()`` (call it in ``open()``, where the client exists)."""
        headers = {**provider.options.headers, **provider.auth_headers()}
        return cls(provider.client, provider.name, headers, error)

    def _headers(self, extra: Mapping[str, str] | None) -> dict[str, str]:
        return {**self.headers, **(extra or {})}

    async def __call__(
        self,
        method: str,
        url: httpx.URL | str,
        body: Any = None,
        headers: Mapping[str, str] | None = None,
    ) -> httpx.Response:
        """One request, ``body`` sent as JSON and ``headers`` added to the bound ones: its
        response, or the core's ``ProviderError`` at once (``send_checked``)."""
        return await send_checked(
            self.client,
            method,
            url,
            provider=self.provider,
            headers=self._headers(headers),
            json=body,
            error=self.error,
        )

    async def json(
        self,
        method: str,
        url: httpx.URL | str,
        body: Any = None,
        headers: Mapping[str, str] | None = None,
    ) -> dict[str, Any]:
        """One request as for a call, its answer read as a JSON object (``json_object``: an
        ``InvalidResponseError`` naming the call when it is not one)."""
        return json_object(await self(method, url, body, headers), provider=self.provider)

    def status_error(self, response: httpx.Response) -> ProviderError:
        """The error for ``response``'s status >= 400: ``error``'s, else ``status_error``'s."""
        if self.error is not None:
            return self.error(response)
        return status_error(response, provider=self.provider)

    @contextlib.asynccontextmanager
    async def stream(
        self,
        method: str,
        url: httpx.URL | str,
        body: Any = None,
        headers: Mapping[str, str] | None = None,
    ) -> AsyncIterator[httpx.Response]:
        """A streamed request (``client.stream``), its status >= 400 raised with its body read
        (``raise_for_stream``) before the caller reads a byte. A timeout or a broken connection
        escapes as ``httpx`` raises it: a stream's reader decides what that means."""
        async with self.client.stream(
            method, url, json=body, headers=self._headers(headers)
        ) as response:
            await raise_for_stream(response, self.status_error)
            yield response
