"""The one function every platform wrapper calls: a request body in, a probe result out."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ._probe import ProbeOptions, run_probe


def handle(payload: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Run the probe with the options in ``payload`` and return its result.

    ``payload`` keys (all optional): ``quick`` (bool), ``backend`` (auto, torch, cupy, numpy),
    ``phases`` (drawn from matmul, memory, transfer, launch, first_op), ``dtypes`` (fp32,
    tf32, fp16, bf16, fp8), ``matmul_n``; lists as JSON lists or comma-separated strings. It
    is also the local runtime's handler: ``handler = "gpubench_sdk.probe:handle"``, ``load =
    ""``.
    """
    return run_probe(ProbeOptions.from_payload(payload))
