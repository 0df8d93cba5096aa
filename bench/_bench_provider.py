"""The smallest provider and workload: GET a URL, accept any body. Used by the benchmarks."""

from __future__ import annotations

from typing import Any

import httpx

from gpubench_sdk import Provider, ProviderOptions, Request, Result, Workload, first_byte_ns


class GetOptions(ProviderOptions):
    url: str


class GetProvider(Provider):
    name = "bench-get"
    Options = GetOptions

    async def open(self) -> None:
        assert isinstance(self.options, GetOptions)
        self._url = httpx.URL(self.options.url)  # parsed once, not per request

    async def invoke(self, request: Request) -> Result:
        response = await self.client.get(self._url)
        response.raise_for_status()
        return Result(
            output=response.content,
            http_status=response.status_code,
            first_byte_ns=first_byte_ns(response),
        )


class AnyBody(Workload):
    name = "any"

    def request(self, seq: int) -> Request:
        return Request(seq=seq, payload={})

    def read(self, output: Any) -> tuple[int | None, int | None]:
        return (None, None)
