"""RunPod serverless handler: the GPU probe as a RunPod job.

A job's ``input`` holds the probe options (``{"quick": true, "phases": "matmul,memory"}``);
the job's output is the probe result. Deploy: docs/gpu-probe.md#runpod.
"""

from __future__ import annotations

from typing import Any

from gpubench_sdk.probe import handle


def handler(job: dict[str, Any]) -> dict[str, Any]:
    """RunPod calls this with ``{"id": ..., "input": {...}}``."""
    return handle(job.get("input") or {})


if __name__ == "__main__":
    import runpod  # only in the worker image: tests import this file without it

    runpod.serverless.start({"handler": handler})
