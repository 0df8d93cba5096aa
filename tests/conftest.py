"""Shared fixtures: a real HTTP server on loopback, run in its own thread and event loop; and
the Hypothesis profile every property test runs under.

The profile is derandomized: each property test draws the same examples on every machine and
every run (a seed from the test's own code, so editing a test re-draws it), so the README's
command and CI give one answer. Without it the suite once failed at random on an example
(``values=[5e-324]``) no other run had drawn, and Hypothesis's own ``ci`` profile, picked when
``CI`` is set, made CI draw differently from a laptop. A bug a property finds is pinned as an
``@example`` on its test, so it stays found after the search moves on.
``GPUBENCH_HYPOTHESIS=explore`` picks a randomized profile instead, to look for new failing
examples (docs/testing-kit.md, "Property tests in this repository").

It lives here, not in a conftest.py at the repository root: pytest loads this file at the start
of every run from the root (``tests`` is in pyproject's ``testpaths``), and a profile is
process-wide, so ``plugins/*/tests`` run under it too; a root conftest.py would make ruff's
isort count ``from conftest import ...`` (this file) as first-party in every test that does it.
"""

from __future__ import annotations

import asyncio
import json
import os
import threading
from collections.abc import Awaitable, Callable, Iterable, Iterator, Mapping
from typing import Any

import pytest
from aiohttp import web
from hypothesis import HealthCheck, settings

from gpubench_sdk import Provider, ProviderOptions, Request, Result, first_byte_ns

# No example database in the derandomized profile (derandomize=True implies database=None):
# the same examples are drawn every run, so there is nothing to replay, and a committed
# database would be a second, hidden list of examples; the ones that matter are `@example`s.
settings.register_profile(
    "deterministic",
    derandomize=True,
    deadline=None,  # two shared CI cores: timing is not what these tests check
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow],
)
# Exploring: a fresh seed every run, and the local database (.hypothesis/, not committed) so
# a failure found once is replayed first on the next run until it is fixed and pinned.
settings.register_profile("explore", derandomize=False, deadline=None, print_blob=True)

_PROFILE = os.environ.get("GPUBENCH_HYPOTHESIS") or "deterministic"
if _PROFILE not in ("deterministic", "explore"):
    raise ValueError(f"GPUBENCH_HYPOTHESIS={_PROFILE!r}: expected 'deterministic' or 'explore'")
settings.load_profile(_PROFILE)


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


class LoopbackServer:
    """An aiohttp app served on 127.0.0.1:<random> from a background thread."""

    def __init__(self, app: web.Application) -> None:
        self.app = app
        self.url = ""
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._runner: web.AppRunner | None = None

    def _serve(self) -> None:
        asyncio.set_event_loop(self._loop)
        self._loop.run_until_complete(self._start())
        self._ready.set()
        self._loop.run_forever()
        self._loop.run_until_complete(self._runner.cleanup() if self._runner else asyncio.sleep(0))

    async def _start(self) -> None:
        self._runner = web.AppRunner(self.app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        self.url = f"http://127.0.0.1:{port}"

    def __enter__(self) -> LoopbackServer:
        self._thread.start()
        self._ready.wait(10)
        return self

    def __exit__(self, *exc: Any) -> None:
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)


Reader, Writer = asyncio.StreamReader, asyncio.StreamWriter
Script = Callable[[Reader, Writer, "RawServer"], Awaitable[None]]


class RawServer:
    """A loopback TCP server in a thread of its own, for tests that need the exact bytes of an
    exchange: each connection runs ``script(reader, writer, server)``. It notes each
    connection's client port (``peers``) and each request ``read_request`` read
    (``requests``); a connection that drops ends its script quietly."""

    def __init__(self, script: Script) -> None:
        self.script = script
        self.peers: list[int] = []
        self.requests: list[tuple[bytes, bytes]] = []  # (head, body)
        self.url = ""
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)

    def _serve(self) -> None:
        asyncio.set_event_loop(self._loop)
        server = self._loop.run_until_complete(
            asyncio.start_server(self._connection, "127.0.0.1", 0)
        )
        self.url = f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}"
        self._ready.set()
        self._loop.run_forever()
        server.close()
        self._loop.close()

    async def _connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.peers.append(writer.get_extra_info("peername")[1])
        try:
            await self.script(reader, writer, self)
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            writer.close()

    async def read_request(self, reader: asyncio.StreamReader) -> tuple[bytes, bytes]:
        head = await reader.readuntil(b"\r\n\r\n")
        length = 0
        for line in head.split(b"\r\n"):
            if line.lower().startswith(b"content-length:"):
                length = int(line.split(b":", 1)[1])
        body = await reader.readexactly(length)
        self.requests.append((head, body))
        return head, body

    def __enter__(self) -> RawServer:
        self._thread.start()
        self._ready.wait(10)
        return self

    def __exit__(self, *exc: object) -> None:
        async def stop() -> None:
            tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            self._loop.stop()

        self._loop.call_soon_threadsafe(lambda: self._loop.create_task(stop()))
        self._thread.join(10)


def module_server(make_app: Callable[[], web.Application | web.RouteTableDef]) -> Any:
    """A module-scoped ``server`` fixture: ``make_app()`` (an app, or the routes of one) served
    on loopback for the module's tests (``server = module_server(_app)`` in a test module)."""

    @pytest.fixture(scope="module")
    def server() -> Iterator[LoopbackServer]:
        made = make_app()
        if isinstance(made, web.RouteTableDef):
            app = web.Application()
            app.add_routes(made)
        else:
            app = made
        with LoopbackServer(app) as srv:
            yield srv

    return server


async def stream_parts(
    request: web.Request,
    parts: Iterable[bytes],
    gap_s: float,
    headers: Mapping[str, str] | None = None,
    *,
    chunked: bool = False,
) -> web.StreamResponse:
    """Answer ``request`` with ``parts`` written one at a time, ``gap_s`` after each, then end."""
    response = web.StreamResponse(headers=headers)
    if chunked:
        response.enable_chunked_encoding()
    await response.prepare(request)
    for part in parts:
        await response.write(part)
        await asyncio.sleep(gap_s)
    await response.write_eof()
    return response


def echo_app() -> web.Application:
    """Answers like a tiny serverless endpoint, with knobs to misbehave on demand."""

    async def invoke(request: web.Request) -> web.StreamResponse:
        body = await request.json()
        mode = request.query.get("mode", "ok")
        delay_ms = float(request.query.get("delay_ms", body.get("sleep_ms", 0)))
        if delay_ms:
            await asyncio.sleep(delay_ms / 1000)
        if mode == "429":
            return web.json_response(
                {"detail": "throttled"}, status=429, headers={"Retry-After": "1"}
            )
        if mode.isdigit():
            return web.json_response({"error": "failure"}, status=int(mode))
        if mode == "garbage":
            return web.Response(text="<html>not json", content_type="text/html")
        if mode == "reset":
            assert request.transport is not None
            request.transport.close()
            return web.Response()
        return web.json_response(
            {
                "output": {"echo": body.get("echo")},
                "id": "req-1",
                "execution_ms": 1.5,
                "queue_ms": 0.5,
            }
        )

    app = web.Application()
    app.router.add_post("/invoke", invoke)
    return app


@pytest.fixture
def echo_server() -> Iterator[LoopbackServer]:
    with LoopbackServer(echo_app()) as server:
        yield server


class EchoOptions(ProviderOptions):
    url: str
    mode: str = "ok"


class EchoProvider(Provider):
    """A minimal provider, written the way the plugin guide tells authors to."""

    name = "echo-test"
    Options = EchoOptions

    async def invoke(self, request: Request) -> Result:
        opts = self.options
        assert isinstance(opts, EchoOptions)
        response = await self.client.post(
            f"{opts.url}/invoke?mode={opts.mode}",
            json=dict(request.payload),
            headers=self.auth_headers(),
        )
        response.raise_for_status()
        body = json.loads(response.content)
        return Result(
            output=body["output"],
            http_status=response.status_code,
            request_id=body["id"],
            first_byte_ns=first_byte_ns(response),
            queue_ms=body["queue_ms"],
            execution_ms=body["execution_ms"],
        )


@pytest.fixture
def external_server() -> Iterator[str]:
    """The echo app in its own process, so it does not share this process's CPU or GIL."""
    import subprocess
    import sys
    from pathlib import Path

    proc = subprocess.Popen(
        [sys.executable, str(Path(__file__).parent / "_echo_server.py")],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    url = proc.stdout.readline().strip()
    try:
        yield url
    finally:
        proc.terminate()
        proc.wait(10)
