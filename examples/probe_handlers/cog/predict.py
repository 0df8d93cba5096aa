"""Cog predictor: the GPU probe as a Cog model (run it locally with ``cog predict`` or push it
to Replicate). Inputs are the probe's options; the output is the probe result as JSON.
Deploy: docs/gpu-probe.md#cog-and-replicate.
"""

from __future__ import annotations

from typing import Any

from cog import BasePredictor, Input

from gpubench_sdk.probe import handle


class Predictor(BasePredictor):
    def setup(self) -> None:
        """Nothing to load: the probe brings its own operands."""

    def predict(
        self,
        quick: bool = Input(default=True, description="smaller sizes, fewer repeats"),
        backend: str = Input(default="auto", choices=["auto", "torch", "cupy", "numpy"]),
        phases: str = Input(
            default="matmul,memory,transfer,launch,first_op",
            description="comma-separated phases to run",
        ),
        dtypes: str = Input(default="", description="comma-separated, empty: all supported"),
    ) -> Any:
        options: dict[str, Any] = {"quick": quick, "backend": backend, "phases": phases}
        if dtypes:
            options["dtypes"] = dtypes
        return handle(options)
