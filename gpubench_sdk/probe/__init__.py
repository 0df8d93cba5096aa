"""gpubench GPU probe: what the accelerator inside a provider's container actually delivers.

Dense matmul TFLOP/s per dtype against the device's published peak, device memory bandwidth
(copy, triad), host<->device bandwidth (pinned, pageable), kernel launch overhead, CUDA start-up
in a fresh process, identity (GPU, UUID, driver, MIG; hostname and boot id) and TFLOP/s per
watt from NVML. Backends: PyTorch, CuPy, and numpy on the CPU so it runs anywhere.

Light on purpose: importing it needs the standard library and numpy only (torch, cupy and
pynvml are used when present), so it can run inside a serving container. The names that
read a results store (``probe_results``, ``print_probe_results``) and the ``GpuProbe``
workload import the rest of the SDK on first use. See docs/gpu-probe.md.
"""

from typing import TYPE_CHECKING as _TYPE_CHECKING

from .._base._lazy import lazy_getattr as _lazy_getattr
from ._fields import probe_fields
from ._handler import handle
from ._peaks import SPECS, GpuSpec, spec_for
from ._probe import PHASES, ProbeOptions, run_probe, select_backend

if _TYPE_CHECKING:
    from ._report import ProbeRow, print_probe_results, probe_results, usd_per_tflop_hour
    from ._workload import GpuProbe

_LAZY = {
    "GpuProbe": "._workload",
    "ProbeRow": "._report",
    "print_probe_results": "._report",
    "probe_results": "._report",
    "usd_per_tflop_hour": "._report",
}

__all__ = [
    "PHASES",
    "SPECS",
    "GpuProbe",
    "GpuSpec",
    "ProbeOptions",
    "ProbeRow",
    "handle",
    "print_probe_results",
    "probe_fields",
    "probe_results",
    "run_probe",
    "select_backend",
    "spec_for",
    "usd_per_tflop_hour",
]


__getattr__ = _lazy_getattr(__name__, _LAZY, globals())


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
