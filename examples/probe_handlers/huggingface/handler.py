"""Hugging Face Inference Endpoints custom handler: the GPU probe as an endpoint.

The request body is ``{"inputs": {...options}}`` or ``{"parameters": {...options}}`` (either is
accepted; ``inputs`` may also be a plain string, ignored). Deploy: docs/gpu-probe.md#hugging-face.
"""

from __future__ import annotations

from typing import Any

from gpubench_sdk.probe import handle


class EndpointHandler:
    def __init__(self, path: str = "") -> None:
        self.path = path  # the repository checkout; the probe needs no weights from it

    def __call__(self, data: dict[str, Any]) -> dict[str, Any]:
        options = data.get("parameters")
        inputs = data.get("inputs")
        if options is None and isinstance(inputs, dict):
            options = inputs
        return handle(options or {})
