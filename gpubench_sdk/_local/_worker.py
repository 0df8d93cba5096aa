"""One worker process of the local runtime, and the frame codec it shares with the gateway.

The gateway starts it with ``python -c BOOTSTRAP _worker.py '<spec>'`` (see ``_pool``), which
loads this file by path: ``python -m gpubench_sdk._local._worker`` works too, but first imports
the whole ``gpubench_sdk`` package, which no handler needs and every cold start would pay for.
So this module imports nothing but the standard library, and nothing relative.

The worker imports the handler, runs its load step, says ``ready``, then serves one job at a
time. It exits when stdin closes, so a gateway that dies, even by SIGKILL, leaves no worker
behind once the current job is done.

Frames are a 4-byte big-endian length, then UTF-8 JSON. Gateway to worker:
``{"type": "job", "id", "payload"}``. Worker to gateway: ``{"type": "ready", "pid",
"startup_ms", "import_ms", "load_ms"}`` once, then per job ``{"type": "result", "id",
"execution_ms", "output"}`` or ``{"type": "error", "id", "execution_ms", "error",
"traceback"}``; or, instead of ``ready``, ``{"type": "load_error", "error", "traceback"}``,
after which the worker exits.
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import json
import os
import signal
import struct
import sys
import time
import traceback
from collections.abc import Callable
from typing import IO, Any

HEADER = struct.Struct(">I")
# A bound on one frame, so a corrupted length cannot make the reader allocate gigabytes.
MAX_FRAME_BYTES = 1 << 30


class FrameError(ValueError):
    """The peer sent something that is not a frame."""


def encode(message: dict[str, Any]) -> bytes:
    """One frame holding ``message``."""
    data = json.dumps(message, separators=(",", ":")).encode("utf-8")
    return HEADER.pack(len(data)) + data


def decode(data: bytes) -> dict[str, Any]:
    """The message in a frame's body."""
    try:
        message = json.loads(data)
    except ValueError as exc:
        raise FrameError(f"frame is not JSON: {exc}") from exc
    if not isinstance(message, dict) or not isinstance(message.get("type"), str):
        raise FrameError("frame is not a JSON object with a 'type'")
    return message


def frame_length(header: bytes) -> int:
    """The body length a frame header announces."""
    (length,) = HEADER.unpack(header)
    if length > MAX_FRAME_BYTES:
        raise FrameError(f"frame of {length} bytes exceeds the {MAX_FRAME_BYTES}-byte bound")
    return int(length)


def read_frame_sync(stream: IO[bytes]) -> dict[str, Any] | None:
    """The next frame from a blocking stream, or ``None`` at end of stream."""
    header = stream.read(HEADER.size)
    if len(header) < HEADER.size:
        return None
    length = frame_length(header)
    data = stream.read(length)
    if len(data) < length:
        return None
    return decode(data)


_DEMO = "gpubench_sdk.demo"
_DEMO_PATH = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "demo.py")


def _import(module_name: str) -> Any:
    """Import a module; the demo handlers (``gpubench_sdk.demo``) by path, like this file.

    The demo stands in for a user's handler, and a deployed handler does not import gpubench.
    """
    if module_name != _DEMO or module_name in sys.modules or not os.path.exists(_DEMO_PATH):
        return importlib.import_module(module_name)
    spec = importlib.util.spec_from_file_location(module_name, _DEMO_PATH)
    assert spec is not None and spec.loader is not None
    module = sys.modules[module_name] = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def resolve(spec: str) -> Callable[..., Any]:
    """The callable named by ``module:attribute`` (the attribute may be dotted)."""
    module_name, _, attribute = spec.partition(":")
    target: Any = _import(module_name)
    for part in attribute.split("."):
        target = getattr(target, part)
    if not callable(target):
        raise TypeError(f"{spec} is not callable")
    return target  # type: ignore[no-any-return]


def _claim_stdio() -> tuple[IO[bytes], IO[bytes]]:
    """Keep the real stdin/stdout for frames; give the handler stderr and /dev/null instead.

    The file descriptors are moved too, not just ``sys.stdout``, so that output from C
    extensions or child processes cannot corrupt the frame stream.
    """
    frames_in = os.fdopen(os.dup(0), "rb")
    frames_out = os.fdopen(os.dup(1), "wb")
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.close(devnull)
    os.dup2(2, 1)
    sys.stdin = open(os.devnull, encoding="utf-8")  # noqa: SIM115 - lives as long as the process
    sys.stdout = sys.stderr
    return frames_in, frames_out


def _describe(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"


class _Handler:
    """The user's predict function, with its model, called the way its signature asks."""

    def __init__(self, predict: Callable[..., Any], model: Any, with_model: bool) -> None:
        self._predict = predict
        self._model = model
        self._with_model = with_model
        self._loop: Any = None

    def __call__(self, payload: Any) -> Any:
        result = self._predict(payload, self._model) if self._with_model else self._predict(payload)
        if inspect.isawaitable(result):
            if self._loop is None:
                import asyncio  # only for async handlers: most never pay for the import

                self._loop = asyncio.new_event_loop()
            result = self._loop.run_until_complete(result)
        return result


def _error_frame(job_id: Any, execution_ms: float, error: str, trace: str) -> bytes:
    return encode(
        {
            "type": "error",
            "id": job_id,
            "execution_ms": execution_ms,
            "error": error,
            "traceback": trace,
        }
    )


def _run_job(handler: _Handler, job: dict[str, Any]) -> bytes:
    """The answer frame to one job frame."""
    job_id = job.get("id")
    started = time.perf_counter()
    try:
        output = handler(job.get("payload"))
    except Exception as exc:
        execution_ms = (time.perf_counter() - started) * 1e3
        return _error_frame(job_id, execution_ms, _describe(exc), traceback.format_exc())
    execution_ms = (time.perf_counter() - started) * 1e3
    try:
        return encode(
            {"type": "result", "id": job_id, "execution_ms": execution_ms, "output": output}
        )
    except (TypeError, ValueError) as exc:  # a return value json cannot encode
        error = f"handler returned a value that is not JSON ({_describe(exc)})"
        return _error_frame(job_id, execution_ms, error, "")


def main(argv: list[str]) -> int:
    entered_ns = time.monotonic_ns()
    spec = json.loads(argv[0])
    frames_in, frames_out = _claim_stdio()
    # Ctrl-C in a terminal reaches the whole process group; the gateway decides when we stop.
    signal.signal(signal.SIGINT, signal.SIG_IGN)

    def send(frame: bytes) -> None:
        frames_out.write(frame)
        frames_out.flush()

    try:
        predict = resolve(spec["handler"])
        load = resolve(spec["load"]) if spec.get("load") else None
        imported_ns = time.monotonic_ns()
        model = load() if load is not None else None
        loaded_ns = time.monotonic_ns()
    except Exception as exc:
        send(
            encode(
                {"type": "load_error", "error": _describe(exc), "traceback": traceback.format_exc()}
            )
        )
        return 1
    send(
        encode(
            {
                "type": "ready",
                "pid": os.getpid(),
                # CLOCK_MONOTONIC is system-wide, so the gateway's spawn time is comparable.
                "startup_ms": (entered_ns - int(spec["spawned_ns"])) / 1e6,
                "import_ms": (imported_ns - entered_ns) / 1e6,
                "load_ms": (loaded_ns - imported_ns) / 1e6,
            }
        )
    )
    handler = _Handler(predict, model, with_model=load is not None)
    while (job := read_frame_sync(frames_in)) is not None:
        if job["type"] == "job":
            send(_run_job(handler, job))
    return 0


def run(argv: list[str]) -> None:
    """Run the worker and exit the process with its status."""
    try:
        code = main(argv)
    except BrokenPipeError:  # the gateway went away while we answered: nothing left to do
        os._exit(0)
    sys.exit(code)


if __name__ == "__main__":
    run(sys.argv[1:])
