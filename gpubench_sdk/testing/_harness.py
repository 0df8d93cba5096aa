"""Serve an ASGI app on a random loopback port, in a background thread, for one test.

uvicorn runs the app on its own event loop in a daemon thread, on a socket bound before the
thread starts (so the port is known at once and never raced for). Leaving the context stops the
server and waits for the thread; the app's lifespan (e.g. a simulated fleet) ends with it.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import threading
import time
from collections.abc import Coroutine, Iterator
from dataclasses import dataclass, field
from typing import Any, TypeVar

from ._faults import ASGIApp

T = TypeVar("T")

INSTALL_HINT = "the testing kit needs uvicorn and starlette: pip install 'gpubench-sdk[testing]'"
START_TIMEOUT_S = 10.0
STOP_TIMEOUT_S = 10.0


def require(module: str, what: str | None = None) -> Any:
    """Import an optional dependency of the testing kit, or fail with the install hint (said
    of ``what`` needs it, e.g. "the RunPod emulator")."""
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError as exc:
        hint = f"{what}: {INSTALL_HINT}" if what else INSTALL_HINT
        raise ImportError(f"{hint} ({exc})") from exc


@dataclass
class ServedApp:
    """A running server: ``url`` is ``http(s)://127.0.0.1:<port>``; ``loop`` is the app's loop."""

    url: str
    host: str
    port: int
    loop: asyncio.AbstractEventLoop
    _server: Any = field(repr=False)
    _thread: threading.Thread = field(repr=False)

    def call(self, coro: Coroutine[Any, Any, T], timeout_s: float = 30.0) -> T:
        """Run ``coro`` on the app's event loop and return its result (from the test thread)."""
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout_s)

    def stop(self) -> None:
        """Stop serving (idempotent): ends open connections and the app's lifespan."""
        if not self._thread.is_alive():
            return
        self._server.should_exit = True
        self._thread.join(STOP_TIMEOUT_S)
        if self._thread.is_alive():  # a connection that never closes: stop waiting for it
            self._server.force_exit = True
            self._thread.join(STOP_TIMEOUT_S)


def _tcp_socket(host: str, port: int) -> socket.socket:
    # proto=IPPROTO_TCP, not 0: asyncio sets TCP_NODELAY only on sockets that say they are TCP,
    # and without it every response waits ~40 ms for the client's delayed ACK (Nagle).
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    return sock


def serve_forever(
    app: ASGIApp,
    *,
    host: str = "127.0.0.1",
    port: int = 0,
    path: str = "",
    tls: tuple[str, str] | None = None,
) -> None:
    """Serve ``app`` in this process until interrupted: an emulator's command line.

    The first line printed is the URL to use (``http://host:port`` + ``path``), printed once
    the socket listens, so a parent process may connect the moment it reads it; ``port=0``
    picks a free port. ``tls`` (certificate file, key file) serves HTTPS instead.
    """
    uvicorn = require("uvicorn")
    sock = _tcp_socket(host, port)
    sock.listen(2048)
    bound_host, bound_port = sock.getsockname()[:2]
    print(f"{'https' if tls else 'http'}://{bound_host}:{bound_port}{path}", flush=True)
    config = uvicorn.Config(
        app, log_level="warning", access_log=False, server_header=False, **_tls_options(tls)
    )
    uvicorn.Server(config).run(sockets=[sock])


def _tls_options(tls: tuple[str, str] | None) -> dict[str, Any]:
    return {} if tls is None else {"ssl_certfile": tls[0], "ssl_keyfile": tls[1]}


@contextlib.contextmanager
def serve(
    app: ASGIApp,
    *,
    host: str = "127.0.0.1",
    log_level: str = "warning",
    tls: tuple[str, str] | None = None,
) -> Iterator[ServedApp]:
    """Serve ``app`` on ``host``:<random port> with uvicorn until the block ends; ``tls``
    (certificate file, key file) serves HTTPS (``url`` then starts ``https://``), for clients
    that refuse plain HTTP (the Azure SDK sends no bearer token over it)."""
    uvicorn = require("uvicorn")
    sock = _tcp_socket(host, 0)
    port = sock.getsockname()[1]
    config = uvicorn.Config(
        app,
        lifespan="on",
        log_level=log_level,
        access_log=False,
        proxy_headers=False,
        server_header=False,
        timeout_graceful_shutdown=2,
        **_tls_options(tls),
    )
    server = uvicorn.Server(config)
    loop = asyncio.new_event_loop()
    failure: list[BaseException] = []

    def run() -> None:
        asyncio.set_event_loop(loop)
        try:
            loop.run_until_complete(server.serve(sockets=[sock]))
        except BaseException as exc:  # reported to the caller waiting for start-up
            failure.append(exc)
        finally:
            loop.run_until_complete(loop.shutdown_asyncgens())
            loop.close()

    thread = threading.Thread(target=run, name=f"gpubench-serve-{port}", daemon=True)
    scheme = "https" if tls else "http"
    served = ServedApp(f"{scheme}://{host}:{port}", host, port, loop, server, thread)
    thread.start()
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        while not server.started:
            if failure or not thread.is_alive() or time.monotonic() > deadline:
                cause = failure[0] if failure else None
                why = "" if cause or not thread.is_alive() else f" within {START_TIMEOUT_S:g} s"
                raise RuntimeError(f"the app did not start serving on port {port}{why}") from cause
            thread.join(0.01)
        yield served
    finally:
        served.stop()
        sock.close()
