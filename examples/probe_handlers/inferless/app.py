"""Inferless model: the GPU probe behind Inferless's ``InferlessPythonModel`` interface.

Inputs arrive as KServe v2 tensors, one per option (see input_schema.py); single-element
lists are unwrapped. The output ``result`` is the probe result as JSON text (a string tensor:
KServe v2 has no object type), which the gpu_probe workload parses back. Deploy:
docs/gpu-probe.md#inferless.
"""

from __future__ import annotations

import json
from typing import Any

from gpubench_sdk.probe import handle


def _scalar(value: Any) -> Any:
    return value[0] if isinstance(value, list) and len(value) == 1 else value


class InferlessPythonModel:
    def initialize(self) -> None:
        """Nothing to load: the probe brings its own operands."""

    def infer(self, inputs: dict[str, Any]) -> dict[str, Any]:
        options = {key: _scalar(value) for key, value in inputs.items() if value is not None}
        return {"result": json.dumps(handle(options))}

    def finalize(self) -> None:
        """Nothing to release."""
