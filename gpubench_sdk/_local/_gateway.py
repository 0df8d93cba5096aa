"""The HTTP gateway in front of the worker pool, and the ways to run it.

Routes (all JSON; every one needs ``Authorization: Bearer <key>`` when an API key is set):
``POST /invoke``, ``GET /health``, ``POST /admin/scale-to-zero``, ``GET|PATCH /admin/scaling``.
See ``docs/local-runtime.md`` for the full protocol.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import json
import logging
import os
import signal
import threading
import time
from collections.abc import Awaitable, Callable
from typing import Any, Self

from aiohttp import web

from ._config import LocalRuntimeConfig, ScalingError, parse_scaling_update
from ._pool import Reply, WorkerPool

logger = logging.getLogger("gpubench.local")

LISTENING_LINE = "gpubench local runtime listening on "
# The probe workload allows echoes up to 10 MB; aiohttp's default body limit is 1 MiB.
MAX_BODY_BYTES = 64 * 1024 * 1024

_Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def _json(status: int, body: dict[str, Any], headers: dict[str, str] | None = None) -> web.Response:
    return web.Response(
        status=status,
        body=json.dumps(body).encode("utf-8"),
        content_type="application/json",
        headers=headers,
    )


def _auth_middleware(api_key: str) -> Any:
    expected = f"Bearer {api_key}".encode()

    @web.middleware
    async def require_key(request: web.Request, handler: _Handler) -> web.StreamResponse:
        given = request.headers.get("Authorization", "").encode("utf-8", "replace")
        if not hmac.compare_digest(given, expected):  # constant time: no hint from timing
            message = "missing or invalid API key: send 'Authorization: Bearer <key>'"
            return _json(401, {"error": message}, {"WWW-Authenticate": "Bearer"})
        return await handler(request)

    return require_key


class _Routes:
    def __init__(self, pool: WorkerPool) -> None:
        self.pool = pool

    async def invoke(self, request: web.Request) -> web.Response:
        arrived_ns = time.monotonic_ns()
        body = await request.read()
        try:
            payload = json.loads(body.decode("utf-8"))
        except ValueError:  # bad UTF-8 too: UnicodeDecodeError is a ValueError
            return _json(400, {"error": "the body must be a JSON object (UTF-8)"})
        if not isinstance(payload, dict):
            kind = type(payload).__name__
            return _json(400, {"error": f"the body must be a JSON object, not {kind}"})
        reply: Reply = await self.pool.submit(body, arrived_ns)
        return _json(reply.status, reply.body, reply.headers)

    async def health(self, request: web.Request) -> web.Response:
        return _json(200, self.pool.health())

    async def scale_to_zero(self, request: web.Request) -> web.Response:
        self.pool.scale_to_zero()
        return _json(200, self.pool.health())

    async def get_scaling(self, request: web.Request) -> web.Response:
        return _json(200, self.pool.scaling())

    async def patch_scaling(self, request: web.Request) -> web.Response:
        try:
            settings = parse_scaling_update(await request.read(), self.pool.scaling())
        except ScalingError as exc:
            return _json(400, {"error": str(exc), "field": exc.field})
        self.pool.set_scaling(settings)
        logger.info("scaling set to %s", settings)
        return _json(200, self.pool.scaling())


def make_app(pool: WorkerPool, api_key: str | None) -> web.Application:
    """The aiohttp application serving ``pool``."""
    middlewares = [_auth_middleware(api_key)] if api_key else []
    app = web.Application(middlewares=middlewares, client_max_size=MAX_BODY_BYTES)
    routes = _Routes(pool)
    app.router.add_post("/invoke", routes.invoke)
    app.router.add_get("/health", routes.health)
    app.router.add_post("/admin/scale-to-zero", routes.scale_to_zero)
    app.router.add_get("/admin/scaling", routes.get_scaling)
    app.router.add_patch("/admin/scaling", routes.patch_scaling)
    return app


class LocalRuntime:
    """A serverless runtime on this machine: an HTTP gateway plus on-demand worker processes.

    ``async with LocalRuntime(config) as rt:`` serves on the current event loop at ``rt.url``;
    leaving the block stops every worker process. Each worker is a Python process running
    ``config.handler`` (see ``_worker``); ``rt.pool`` holds them.
    """

    def __init__(self, config: LocalRuntimeConfig | None = None, **fields: Any) -> None:
        if config is None:
            config = LocalRuntimeConfig(**fields)
        elif fields:
            config = config.model_copy(update=fields)
        self.config = config
        self.pool = WorkerPool(config)
        self._runner: web.AppRunner | None = None
        self._url: str | None = None

    def __repr__(self) -> str:
        return f"<LocalRuntime {self._url or 'stopped'} handler={self.config.handler!r}>"

    @property
    def url(self) -> str:
        """``http://HOST:PORT`` of the gateway, once started."""
        if self._url is None:
            raise RuntimeError("the local runtime is not started: use 'async with LocalRuntime()'")
        return self._url

    async def start(self) -> None:
        key = self.config.api_key.get_secret_value() if self.config.api_key else None
        # No access log: it costs time per request, and request headers carry the API key.
        runner = web.AppRunner(
            make_app(self.pool, key), access_log=None, handle_signals=False, shutdown_timeout=5.0
        )
        await runner.setup()
        try:
            site = web.TCPSite(runner, self.config.host, self.config.port)
            await site.start()
        except BaseException:
            await runner.cleanup()
            raise
        self._runner = runner
        host, port = runner.addresses[0][:2]
        self._url = f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"
        self.pool.start()
        logger.info("local runtime listening on %s (handler %s)", self._url, self.config.handler)

    async def stop(self) -> None:
        # Workers first: their waiting requests are answered 503, so the server drains at once.
        await self.pool.close()
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()


async def serve_async(config: LocalRuntimeConfig, *, stop_on_stdin_eof: bool = False) -> None:
    """Serve until SIGINT or SIGTERM (or, optionally, until stdin closes), then shut down."""
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for signum in (signal.SIGINT, signal.SIGTERM):
        # Not on Windows, nor outside the main thread: KeyboardInterrupt is the fallback there.
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.add_signal_handler(signum, stop.set)
    if stop_on_stdin_eof:
        # A parent that dies, even by SIGKILL, closes our stdin: we must not outlive it.
        def watch_stdin() -> None:
            # os.read, not sys.stdin: a daemon thread blocked inside a buffered reader's lock
            # aborts the interpreter at exit.
            while os.read(0, 65536):
                pass
            with contextlib.suppress(RuntimeError):  # the loop closed first: already stopping
                loop.call_soon_threadsafe(stop.set)

        threading.Thread(target=watch_stdin, name="stdin-watch", daemon=True).start()
    async with LocalRuntime(config) as runtime:
        print(LISTENING_LINE + runtime.url, flush=True)
        await stop.wait()


def serve(config: LocalRuntimeConfig) -> None:
    """Run the local runtime in the foreground until SIGINT or SIGTERM (``gpubench local serve``).

    Prints one line, ``gpubench local runtime listening on http://HOST:PORT``, to stdout.
    """
    with contextlib.suppress(KeyboardInterrupt):  # where no signal handler could be installed
        asyncio.run(serve_async(config))
