"""Cog's own HTTP server (PyPI ``cog`` 0.23: ``python -m cog.server.http`` starts the Rust
``coglet`` server) on a predictor written by a test, on a free loopback port: no Docker."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@contextlib.contextmanager
def cog_server(folder: Path, predictor: str) -> Iterator[tuple[str, dict[str, Any]]]:
    """Serve ``predictor`` (a ``predict.py``'s source defining ``Runner``) from ``folder``;
    yields its URL and its first ``/health-check`` answer (``STARTING`` while ``setup()``
    runs), and stops the server and its worker when the block ends. Its log is
    ``folder/cog.log``."""
    (folder / "predict.py").write_text(predictor)
    port = free_port()
    env = {
        **os.environ,
        "PORT": str(port),
        "COG_PREDICT_TYPE_STUB": "predict.py:Runner",
        # coglet starts its worker as `python`: this interpreter's, so it finds coglet
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
    }
    log = (folder / "cog.log").open("w")
    server = subprocess.Popen(
        [sys.executable, "-m", "cog.server.http", "--host", "127.0.0.1"],
        cwd=folder,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,  # its worker subprocess goes with it
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            assert server.poll() is None, (folder / "cog.log").read_text()
            try:
                health = httpx.get(f"{url}/health-check", timeout=1).json()
                break
            except httpx.TransportError:
                assert time.monotonic() < deadline, "the Cog server never listened"
                time.sleep(0.02)
        yield url, health
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        try:
            server.wait(10)
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, signal.SIGKILL)
            server.wait(5)
        log.close()


def wait_ready(url: str, timeout_s: float = 60) -> None:
    """Until the server's ``/health-check`` says ``READY`` (its ``setup()`` finished)."""
    deadline = time.monotonic() + timeout_s
    while httpx.get(f"{url}/health-check", timeout=5).json()["status"] != "READY":
        assert time.monotonic() < deadline, "the Cog model never became ready"
        time.sleep(0.05)
