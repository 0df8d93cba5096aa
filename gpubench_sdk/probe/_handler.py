"""The one function every platform wrapper calls: a request body in, a probe result out."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ._probe import ProbeOptions, run_probe


def handle(payload: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Run the probe with the options in ``payload`` and return its result.

    ``payload`` keys (all optional): ``quick`` (bool), ``backend`` (auto, torch, cupy, numpy),
    ``phases`` (list drawn from matmul, memory, transfer, launch, first_op), ``dtypes``,
    ``matmul_n``; or the same nested under ``gpubench_probe`` (the ``gpu_probe`` workload's
    request). It is also the local runtime's handler: ``handler = "gpubench_sdk.probe:handle"``.
    """
    return run_probe(ProbeOptions.from_payload(payload))
