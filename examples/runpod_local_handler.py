"""A RunPod serverless handler, served by the ``runpod`` package's own local API server.

    pip install runpod
    python examples/runpod_local_handler.py --rp_serve_api --rp_api_host 127.0.0.1 \
        --rp_api_port 8000

serves ``POST /run``, ``/runsync``, ``/status/{id}`` and ``/stream/{id}`` at the server's root
(runpod 1.12.0, ``serverless/modules/rp_fastapi.py``); ``examples/runpod_local.toml`` benchmarks
it. The handler sleeps the job's ``sleep_ms`` and echoes ``echo``, like gpubench's probe
workload, and says how long it really slept: the local server reports no timings of its own.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any


async def handler(job: dict[str, Any]) -> dict[str, Any]:
    """RunPod calls this with ``{"id": ..., "input": {...}}``. Async, so that the server runs
    concurrent jobs side by side (a blocking handler would hold its one event loop)."""
    payload = job.get("input") or {}
    began = time.perf_counter()
    await asyncio.sleep(float(payload.get("sleep_ms", 0)) / 1000)
    slept_ms = (time.perf_counter() - began) * 1000
    return {"echo": payload.get("echo"), "slept_ms": round(slept_ms, 3)}


if __name__ == "__main__":
    import runpod

    runpod.serverless.start({"handler": handler})
