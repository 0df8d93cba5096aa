"""A toy synchronous protocol, its emulator and its provider: the conformance suite's subject.

``POST /invoke`` with the payload runs it on the fleet and answers
``{"id", "output", "queue_ms", "execution_ms", "cold"}``; errors are ``{"error": ...}``.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any

import httpx
from starlette.applications import Starlette
from starlette.requests import Request as HTTPRequest
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from gpubench_sdk import (
    Capabilities,
    ClientHTTPError,
    InvalidResponseError,
    Provider,
    ProviderOptions,
    Request,
    Result,
    ServerHTTPError,
    ThrottledError,
    TransportError,
    first_byte_ns,
    redact,
    retry_after_s,
)
from gpubench_sdk.testing import ASGIApp, FaultInjector, JobStatus, SimulatedFleet


def toy_emulator(fleet: SimulatedFleet, api_key: str) -> ASGIApp:
    async def invoke(request: HTTPRequest) -> Response:
        if request.headers.get("authorization") != f"Bearer {api_key}":
            return JSONResponse({"error": "unauthorized"}, status_code=401)
        job = fleet.submit(await request.json())
        await job.done.wait()
        if job.status is not JobStatus.COMPLETED:
            return JSONResponse({"error": job.error}, status_code=500)
        body = {
            "id": job.id,
            "output": job.output,
            "queue_ms": job.queue_ms,
            "execution_ms": job.execution_ms,
            "cold": job.cold,
        }
        return JSONResponse(body)

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        async with fleet:
            yield

    app = Starlette(routes=[Route("/invoke", invoke, methods=["POST"])], lifespan=lifespan)
    return FaultInjector(app, fleet, lambda scope: "submit")


class ToyOptions(ProviderOptions):
    url: str


class ToyProvider(Provider):
    name = "toy"
    Options = ToyOptions
    capabilities = Capabilities(server_timings=frozenset({"queue_ms", "execution_ms"}))

    async def invoke(self, request: Request) -> Result:
        assert isinstance(self.options, ToyOptions)
        try:
            r = await self.client.post(
                f"{self.options.url}/invoke",
                json=dict(request.payload),
                headers=self.auth_headers(),
            )
            body: Any = r.json() if r.status_code < 500 or r.content else {}
        except httpx.HTTPError as exc:
            raise TransportError(str(exc), provider=self.name) from exc
        except ValueError as exc:
            raise InvalidResponseError("not JSON", provider=self.name) from exc
        kw: dict[str, Any] = {"provider": self.name, "status_code": r.status_code}
        if r.status_code == 429:
            raise self.throttled(self.retry_after(r), kw)
        if r.status_code >= 500:
            # redact: a server may echo the request's credentials in its error body
            raise ServerHTTPError(redact(f"HTTP {r.status_code}: {body.get('error')}"), **kw)
        if r.status_code >= 400:
            raise ClientHTTPError(f"HTTP {r.status_code}", **kw)
        return Result(
            output=body["output"],
            http_status=r.status_code,
            request_id=body["id"],
            first_byte_ns=first_byte_ns(r),
            queue_ms=body["queue_ms"],
            execution_ms=body["execution_ms"],
            cold=body["cold"],
        )

    def throttled(self, retry_after_s: float | None, kw: dict[str, Any]) -> Exception:
        return ThrottledError("throttled", retry_after_s=retry_after_s, **kw)

    def retry_after(self, response: httpx.Response) -> float | None:
        return retry_after_s(response)  # seconds or an HTTP date
