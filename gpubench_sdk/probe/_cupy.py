"""The CuPy backend: for containers with CuPy and no PyTorch.

APIs (https://docs.cupy.dev/en/stable/reference/cuda.html): ``cupy.cuda.Event`` with
``record()``/``synchronize()`` and ``cupy.cuda.get_elapsed_time(start, end)`` (milliseconds);
``cupy.cuda.alloc_pinned_memory`` for page-locked host buffers;
``cupy.cuda.runtime.getDeviceProperties`` for identity. CuPy has no bfloat16 or fp8 dtype,
and TF32 is chosen by the ``CUPY_TF32`` environment variable at import, so this backend
measures fp32 and fp16 matmuls (and tf32 when ``CUPY_TF32=1``).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

import numpy as np

from ._backend import Backend, wall_timer
from ._stats import Timer

_FIRST_OP = """
import json, time
t0 = time.perf_counter()
import cupy
t1 = time.perf_counter()
x = cupy.ones(1, dtype=cupy.float32)
float(x.sum())
cupy.cuda.Device().synchronize()
t2 = time.perf_counter()
print(json.dumps({"import_ms": (t1 - t0) * 1e3, "first_op_ms": (t2 - t1) * 1e3}))
"""


def _text(value: Any) -> str:
    return value.decode(errors="replace") if isinstance(value, bytes) else str(value)


class CupyBackend(Backend):
    name = "cupy"
    is_gpu = True

    def __init__(self, device: int = 0) -> None:
        import cupy

        self.cupy = cupy
        self.device = cupy.cuda.Device(device)
        self.device.use()
        self._triad = cupy.ElementwiseKernel(
            "T b, T c, T s", "T a", "a = b + s * c", "gpubench_probe_triad"
        )

    def _timer(self, run: Callable[[], object]) -> Timer:
        cuda = self.cupy.cuda

        def timer(k: int) -> float:
            start, end = cuda.Event(), cuda.Event()
            start.record()
            for _ in range(k):
                run()
            end.record()
            end.synchronize()
            return float(cuda.get_elapsed_time(start, end)) / 1e3

        return timer

    def _props(self) -> dict[str, Any]:
        props: dict[str, Any] = self.cupy.cuda.runtime.getDeviceProperties(self.device.id)
        return props

    def identity(self) -> dict[str, Any]:
        runtime = self.cupy.cuda.runtime
        props = self._props()
        version = runtime.runtimeGetVersion()
        raw_uuid = props.get("uuid")
        uuid = None
        if isinstance(raw_uuid, bytes) and len(raw_uuid) == 16:
            h = raw_uuid.hex()
            uuid = f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"
        return {
            "device_kind": "cuda",
            "backend_version": self.cupy.__version__,
            "cuda_runtime_version": f"{version // 1000}.{version % 1000 // 10}",
            "device_name": _text(props.get("name", "")),
            "device_uuid": uuid,
            "device_memory_total_gib": props["totalGlobalMem"] / 2**30,
            "compute_capability": f"{props['major']}.{props['minor']}",
            "sm_count": props.get("multiProcessorCount"),
            "visible_device_count": runtime.getDeviceCount(),
        }

    def nvml_uuid(self) -> str | None:
        uuid = self.identity().get("device_uuid")
        return f"GPU-{uuid}" if uuid else None

    def matmul_dtypes(self) -> list[str]:
        tf32 = os.environ.get("CUPY_TF32", "0") not in ("", "0")
        return ["tf32", "fp16"] if tf32 else ["fp32", "fp16"]

    def matmul_timer(self, dtype: str, n: int) -> Timer:
        cp = self.cupy
        kinds = {"fp32": cp.float32, "tf32": cp.float32, "fp16": cp.float16}
        if dtype not in kinds:
            raise ValueError(f"the cupy backend has no {dtype} matmul")
        rng = cp.random.default_rng(0)
        a = rng.standard_normal((n, n), dtype=cp.float32).astype(kinds[dtype])
        b = rng.standard_normal((n, n), dtype=cp.float32).astype(kinds[dtype])
        out = cp.empty((n, n), dtype=kinds[dtype])
        return self._timer(lambda: cp.matmul(a, b, out=out))

    def memory_timers(self, nbytes: int) -> dict[str, tuple[Timer, int]]:
        cp = self.cupy
        count = max(1, nbytes // 4)
        a = cp.ones(count, dtype=cp.float32)
        b = cp.full(count, 2.0, dtype=cp.float32)
        c = cp.full(count, 3.0, dtype=cp.float32)
        scalar = cp.float32(3.0)
        size = count * 4
        return {
            "copy": (self._timer(lambda: cp.copyto(b, a)), 2 * size),
            "triad": (self._timer(lambda: self._triad(b, c, scalar, a)), 3 * size),
        }

    def transfer_timers(self, nbytes: int) -> dict[str, tuple[Timer, int]]:
        cp = self.cupy
        device = cp.empty(nbytes, dtype=cp.uint8)
        pageable = np.ones(nbytes, dtype=np.uint8)
        memory = cp.cuda.alloc_pinned_memory(nbytes)
        pinned = np.frombuffer(memory, dtype=np.uint8, count=nbytes)
        pinned[:] = 1
        stream = cp.cuda.get_current_stream()
        return {
            "h2d_pinned": (self._timer(lambda: device.set(pinned, stream=stream)), nbytes),
            "h2d_pageable": (self._timer(lambda: device.set(pageable)), nbytes),
            "d2h_pinned": (self._timer(lambda: device.get(stream=stream, out=pinned)), nbytes),
            "d2h_pageable": (self._timer(lambda: device.get(out=pageable)), nbytes),
        }

    def launch_timers(self) -> dict[str, Timer]:
        x = self.cupy.zeros(1, dtype=self.cupy.float32)
        sync = self.device.synchronize

        def launch() -> None:
            self.cupy.add(x, 1, out=x)

        def launch_and_wait() -> None:
            launch()
            sync()

        return {"async": wall_timer(launch, sync), "sync": wall_timer(launch_and_wait)}

    def first_op_code(self) -> str:
        return _FIRST_OP

    def release(self) -> None:
        self.cupy.get_default_memory_pool().free_all_blocks()
        self.cupy.get_default_pinned_memory_pool().free_all_blocks()
