"""Running the local runtime as its own process, apart from the benchmark client's event loop."""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
from pathlib import Path
from typing import Self

from .._base._secrets import without_secrets
from ._config import API_KEY_ENV, LocalRuntimeConfig
from ._gateway import LISTENING_LINE

STOP_GRACE_S = 10.0
_PACKAGE_ROOT = Path(__file__).resolve().parents[2]


def _runtime_env(config: LocalRuntimeConfig) -> dict[str, str]:
    # Never a secret this process holds (the variable api_key_env names, a cloud key...): the
    # runtime's workers run user code. Its own key travels in API_KEY_ENV, popped on arrival.
    env = without_secrets(os.environ)
    env.pop(API_KEY_ENV, None)
    if config.api_key is not None:
        env[API_KEY_ENV] = config.api_key.get_secret_value()
    if _PACKAGE_ROOT.name not in ("site-packages", "dist-packages"):
        # A source checkout that is not installed: let ``-m gpubench_sdk._local`` find it from
        # any working directory. Never site-packages, which would shadow the standard library.
        paths = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
        env["PYTHONPATH"] = os.pathsep.join([*paths, str(_PACKAGE_ROOT)])
    return env


class RuntimeProcess:
    """A local runtime serving at ``url`` from a separate process. ``await stop()`` ends it.

    The process also ends by itself when its stdin closes, i.e. when the process that spawned
    it exits for any reason, so it cannot outlive its client.
    """

    def __init__(self, proc: asyncio.subprocess.Process, url: str) -> None:
        self.proc = proc
        self.url = url

    def __repr__(self) -> str:
        return f"<RuntimeProcess pid={self.pid} {self.url}>"

    @property
    def pid(self) -> int:
        return self.proc.pid

    async def stop(self, grace_s: float = STOP_GRACE_S) -> int:
        """SIGTERM the runtime (it stops its workers), SIGKILL it after ``grace_s``.

        Returns the process's exit code.
        """
        if self.proc.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                self.proc.terminate()
            try:
                await asyncio.wait_for(self.proc.wait(), grace_s)
            except TimeoutError:
                with contextlib.suppress(ProcessLookupError):
                    self.proc.kill()
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        return await self.proc.wait()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()


async def spawn_runtime(
    config: LocalRuntimeConfig | None = None, *, startup_timeout_s: float = 60.0
) -> RuntimeProcess:
    """Start ``python -m gpubench_sdk._local serve-json '<config>'`` and wait for its URL.

    The API key travels in the ``GPUBENCH_LOCAL_API_KEY`` environment variable, never on the
    command line. The runtime's logs and its workers' output go to this process's stderr.
    """
    config = config if config is not None else LocalRuntimeConfig()
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "gpubench_sdk._local",
        "serve-json",
        config.model_dump_json(),  # api_key is excluded from dumps
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        env=_runtime_env(config),
    )
    runtime = RuntimeProcess(proc, url="")
    assert proc.stdout is not None
    try:
        line = await asyncio.wait_for(proc.stdout.readline(), startup_timeout_s)
    except TimeoutError:
        await runtime.stop(grace_s=1.0)
        raise RuntimeError(
            f"the local runtime (pid {proc.pid}) did not say where it listens within"
            f" {startup_timeout_s:g} s; see its stderr (a hung import, or a port it cannot bind)"
        ) from None
    except BaseException:
        await runtime.stop(grace_s=1.0)
        raise
    text = line.decode("utf-8", "replace").strip()
    if not text.startswith(LISTENING_LINE):
        code = await runtime.stop(grace_s=1.0)
        raise RuntimeError(
            f"the local runtime did not start (exit code {code}, said {text!r}); see its stderr"
        )
    runtime.url = text.removeprefix(LISTENING_LINE)
    return runtime
