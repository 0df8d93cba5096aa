"""Starting and stopping worker processes: the operating-system side of the pool."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
from pathlib import Path

from .._base._secrets import remember, without_secrets
from ._config import API_KEY_ENV, LocalRuntimeConfig

# How long a worker gets to exit after its stdin closes, then after SIGTERM, before SIGKILL.
STOP_GRACE_S = 2.0
_WORKER_FILE = str(Path(__file__).with_name("_worker.py"))
# Loads _worker.py by path. ``-m gpubench_sdk._local._worker`` would import the gpubench_sdk
# package first (httpx, aiohttp, pydantic...: 0.8 s measured), which no handler needs and every
# cold start would pay for. Like ``-m``, ``-c`` puts the working directory first on sys.path.
BOOTSTRAP = (
    "import importlib.util, sys\n"
    "spec = importlib.util.spec_from_file_location('_gpubench_worker', sys.argv[1])\n"
    "module = sys.modules[spec.name] = importlib.util.module_from_spec(spec)\n"
    "spec.loader.exec_module(module)\n"
    "module.run(sys.argv[2:])\n"
)


def worker_env(config: LocalRuntimeConfig) -> dict[str, str]:
    """The environment of every worker: ours plus ``config.env``, never the API key nor any
    variable holding it or another secret this process knows (``_secrets.without_secrets``);
    ``config.env`` is given to workers explicitly, so it is kept as it is."""
    if config.api_key is not None:
        remember(config.api_key.get_secret_value())
    env = {**without_secrets(os.environ), **config.env}
    env.pop(API_KEY_ENV, None)  # a worker runs user code: it never needs the gateway's key
    return env


async def start_worker(
    config: LocalRuntimeConfig, env: dict[str, str], spawned_ns: int
) -> asyncio.subprocess.Process:
    """Start one worker process; frames travel over its stdin and stdout."""
    spec = {"handler": config.handler, "load": config.load, "spawned_ns": spawned_ns}
    # stderr is inherited: a handler's prints and tracebacks reach the operator as they are.
    return await asyncio.create_subprocess_exec(
        config.python,
        "-c",
        BOOTSTRAP,
        _WORKER_FILE,
        json.dumps(spec),
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        env=env,
    )


def _signal(proc: asyncio.subprocess.Process, kill: bool) -> None:
    with contextlib.suppress(ProcessLookupError):  # it exited meanwhile: the goal is met
        if kill:
            proc.kill()
        else:
            proc.terminate()


async def stop_worker(proc: asyncio.subprocess.Process, *, graceful: bool) -> None:
    """End a worker: close its stdin (it exits at end of input) or SIGTERM it; then SIGTERM and
    SIGKILL after a grace period each. Returns once the process is reaped."""
    if proc.returncode is not None:
        return
    if graceful and proc.stdin is not None:
        proc.stdin.close()
    else:
        _signal(proc, kill=False)
    for kill in (False, True):
        try:
            await asyncio.wait_for(proc.wait(), STOP_GRACE_S)
            return
        except TimeoutError:
            _signal(proc, kill)
    await proc.wait()
