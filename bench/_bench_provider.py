"""The smallest provider and workload: GET a URL, accept any body. Used by the benchmarks.

The GET goes through ``PreparedCall``, the lean path the built-in HTTP plugin uses. An older
``gpubench_sdk`` without it (``hotpath_bench.py --base``) is measured on its httpx path.
"""

from __future__ import annotations

from typing import Any

import httpx

import gpubench_sdk
from gpubench_sdk import Provider, ProviderOptions, Request, Result, Workload, first_byte_ns


class GetOptions(ProviderOptions):
    url: str


class GetProvider(Provider):
    name = "bench-get"
    Options = GetOptions

    async def open(self) -> None:
        assert isinstance(self.options, GetOptions)
        self._call: Any = None
        self._url = httpx.URL(self.options.url)
        if hasattr(gpubench_sdk, "PreparedCall"):
            self._call = gpubench_sdk.PreparedCall(self.client, "GET", self._url)  # built once

    async def invoke(self, request: Request) -> Result:
        if self._call is None:  # a gpubench_sdk from before PreparedCall
            response = await self.client.get(self._url)
            response.raise_for_status()
            return Result(
                output=response.content,
                http_status=response.status_code,
                first_byte_ns=first_byte_ns(response),
            )
        answer = (await self._call.send()).raise_for_status()
        return Result(
            output=answer.content,
            http_status=answer.status_code,
            first_byte_ns=answer.first_byte_ns,
        )


class AnyBody(Workload):
    name = "any"

    def request(self, seq: int) -> Request:
        return Request(seq=seq, payload={})

    def read(self, output: Any) -> tuple[int | None, int | None]:
        return (None, None)
