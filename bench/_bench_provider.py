"""The smallest provider and workload: GET a URL, accept any body. Used by the benchmarks."""

from __future__ import annotations

from typing import Any

from gpubench_sdk import PreparedCall, Provider, ProviderOptions, Request, Result, Workload


class GetOptions(ProviderOptions):
    url: str


class GetProvider(Provider):
    name = "bench-get"
    Options = GetOptions

    async def open(self) -> None:
        assert isinstance(self.options, GetOptions)
        self._call = PreparedCall(self.client, "GET", self.options.url)  # built once

    async def invoke(self, request: Request) -> Result:
        response = (await self._call.send()).raise_for_status()
        return Result(
            output=response.content,
            http_status=response.status_code,
            first_byte_ns=response.first_byte_ns,
        )


class AnyBody(Workload):
    name = "any"

    def request(self, seq: int) -> Request:
        return Request(seq=seq, payload={})

    def read(self, output: Any) -> tuple[int | None, int | None]:
        return (None, None)
