"""The probe result flattened to the fields a run stores and a report compares.

One level, every key with its unit: what ``GpuProbe.detail`` stores on each invocation
(``Invocation.detail``) and what ``probe_results`` reads back.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from .._base._errors import InvalidResponseError
from ._backend import DTYPES

Fields = dict[str, str | float | int | bool | None]


def _median(section: Any, key: str) -> float | None:
    if not isinstance(section, Mapping):
        return None
    value = section.get(key)
    if isinstance(value, Mapping):
        value = value.get("median")
    return float(value) if isinstance(value, int | float) else None


def check_result(output: Any) -> Mapping[str, Any]:
    """``output`` if it is a probe result, else ``InvalidResponseError`` saying what is wrong.

    Also accepts the result as JSON text, alone or as a one-element list: what platforms with
    tensor-typed outputs (KServe v2 ``BYTES``, as on Inferless) return for a JSON object."""
    if isinstance(output, list) and len(output) == 1:
        output = output[0]
    if isinstance(output, str | bytes) and output.lstrip()[:1] in ("{", b"{"):
        try:
            output = json.loads(output)
        except ValueError as exc:
            raise InvalidResponseError(f"probe output is not valid JSON: {exc}") from None
    if not isinstance(output, Mapping):
        raise InvalidResponseError(f"probe output is {type(output).__name__}, not a JSON object")
    if not isinstance(output.get("probe_version"), int) or "backend" not in output:
        raise InvalidResponseError(
            "probe output lacks probe_version/backend: is the endpoint running the gpubench probe"
            " handler (gpubench_sdk.probe.handle)?"
        )
    return output


def probe_fields(output: Any) -> Fields:
    """The flat, unit-named fields of a probe result (``run_probe`` / ``handle`` output)."""
    result = check_result(output)
    device = result.get("device") or {}
    host = result.get("host") or {}
    spec = result.get("spec") or {}
    first_op = result.get("first_op") or {}
    fields: Fields = {
        "probe_version": result["probe_version"],
        "backend": str(result["backend"]),
        "quick": bool(result.get("quick")),
        "device_name": device.get("device_name") or host.get("cpu_model"),
        "device_uuid": device.get("device_uuid") or device.get("nvml_uuid"),
        "device_memory_total_gib": device.get("device_memory_total_gib"),
        "driver_version": device.get("driver_version"),
        "cuda_runtime_version": device.get("cuda_runtime_version"),
        "mig_mode_enabled": device.get("mig_mode_enabled"),
        "hostname": host.get("hostname"),
        "boot_id": host.get("boot_id"),
        "spec_model": spec.get("model"),
        "spec_sm_fraction": spec.get("sm_fraction"),
        "first_op_ms": first_op.get("first_op_ms"),
        "import_ms": first_op.get("import_ms"),
        "probe_elapsed_s": result.get("elapsed_s"),
        "errors": len(result.get("errors") or {}),
    }
    matmul = result.get("matmul") or {}
    for dtype in DTYPES:
        entry = matmul.get(dtype)
        if not isinstance(entry, Mapping):
            continue
        fields[f"matmul_{dtype}_tflop_per_s"] = _median(entry, "throughput_tflop_per_s")
        fields[f"matmul_{dtype}_peak_tflop_per_s"] = entry.get("peak_tflop_per_s")
        fields[f"matmul_{dtype}_fraction_of_peak"] = entry.get("fraction_of_peak")
        fields[f"matmul_{dtype}_tflop_per_s_per_w"] = entry.get("tflop_per_s_per_w")
        fields[f"matmul_{dtype}_mean_power_w"] = (entry.get("energy") or {}).get("mean_power_w")
    for section in ("memory", "transfer"):
        for name, entry in (result.get(section) or {}).items():
            fields[f"{section}_{name}_gb_per_s"] = _median(entry, "bandwidth_gb_per_s")
    memory = result.get("memory") or {}
    if isinstance(memory.get("copy"), Mapping):
        fields["memory_copy_fraction_of_peak"] = memory["copy"].get("fraction_of_peak")
    launch = result.get("launch") or {}
    fields["launch_async_us"] = _median(launch, "async_us")
    fields["launch_sync_us"] = _median(launch, "sync_us")
    return fields
