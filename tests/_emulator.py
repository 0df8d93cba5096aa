"""A provider's emulator (``python -m <plugin>.emulator``) as a real process on loopback."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from collections.abc import Iterator, Mapping

LOOPBACK = "http://127.0.0.1:"


@contextlib.contextmanager
def emulator(
    module: str, *args: str, env: Mapping[str, str] | None = None, expect: str | None = LOOPBACK
) -> Iterator[str]:
    """Start ``module`` on a free port with ``args`` (``env`` added to this process's) and yield
    the URL it prints; with ``expect``, the URL must start with it. Stopped on exit."""
    proc = subprocess.Popen(
        [sys.executable, "-m", module, "--port", "0", *args],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, **(env or {})},
    )
    assert proc.stdout is not None
    url = proc.stdout.readline().strip()
    try:
        if expect is not None:
            assert url.startswith(expect), url
        yield url
    finally:
        proc.terminate()
        proc.wait(10)
