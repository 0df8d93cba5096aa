"""The PyTorch backend: cuBLAS matmuls per dtype, fused copy/triad kernels, host<->device
copies from pinned and pageable memory, and launch overhead, timed with CUDA events.

APIs (https://pytorch.org/docs/stable/): ``torch.cuda.Event(enable_timing=True)`` and
``elapsed_time`` (milliseconds between two recorded events); ``torch.cuda.synchronize``;
``Tensor.pin_memory()`` (page-locked host memory, which DMA reads directly);
``torch.set_float32_matmul_precision("high")`` lets fp32 matmuls use TF32 tensor cores
("highest" forbids it, the default); ``torch._scaled_mm`` is the private fp8 GEMM (compute
capability 8.9+; needs a column-major second operand and float32 scales; some versions return
``(out, amax)``). On a CPU device (no CUDA) the same code runs with perf_counter timing, so
this path is testable anywhere PyTorch is installed.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any

from ._backend import Backend, wall_timer
from ._stats import Timer

_FIRST_OP = """
import json, time
t0 = time.perf_counter()
import torch
t1 = time.perf_counter()
x = torch.ones(1, device={device!r})
if x.is_cuda:
    torch.cuda.synchronize()
float(x.sum())
t2 = time.perf_counter()
print(json.dumps({{"import_ms": (t1 - t0) * 1e3, "first_op_ms": (t2 - t1) * 1e3}}))
"""


class TorchBackend(Backend):
    name = "torch"

    def __init__(self, device: str | None = None) -> None:
        import torch

        self.torch = torch
        if device is None:
            device = "cuda:0" if torch.cuda.is_available() else "cpu"
        self.device = torch.device(device)
        self.is_gpu = self.device.type == "cuda"
        if self.is_gpu:
            torch.cuda.set_device(self.device)
        self._gen = torch.Generator(device=self.device).manual_seed(0)

    # -- timing ---------------------------------------------------------------------------

    def _sync(self) -> None:
        if self.is_gpu:
            self.torch.cuda.synchronize(self.device)

    def _timer(self, run: Callable[[], object]) -> Timer:
        """CUDA events around ``k`` calls on the current stream; perf_counter on a CPU."""
        if not self.is_gpu:
            return wall_timer(run)
        torch = self.torch

        def timer(k: int) -> float:
            start = torch.cuda.Event(enable_timing=True)
            end = torch.cuda.Event(enable_timing=True)
            start.record()
            for _ in range(k):
                run()
            end.record()
            end.synchronize()
            return float(start.elapsed_time(end)) / 1e3

        return timer

    # -- identity -------------------------------------------------------------------------

    def identity(self) -> dict[str, Any]:
        torch = self.torch
        info: dict[str, Any] = {
            "device_kind": self.device.type,
            "backend_version": torch.__version__,
            "cuda_runtime_version": torch.version.cuda,
        }
        if not self.is_gpu:
            return {**info, "device_name": None}
        props = torch.cuda.get_device_properties(self.device)
        uuid = getattr(props, "uuid", None)
        return {
            **info,
            "device_name": props.name,
            "device_uuid": None if uuid is None else str(uuid),
            "device_memory_total_gib": props.total_memory / 2**30,
            "compute_capability": f"{props.major}.{props.minor}",
            "sm_count": props.multi_processor_count,
            "visible_device_count": torch.cuda.device_count(),
        }

    def nvml_uuid(self) -> str | None:
        if not self.is_gpu:
            return None
        uuid = getattr(self.torch.cuda.get_device_properties(self.device), "uuid", None)
        if uuid is None:
            return None
        text = str(uuid)
        return text if text.startswith(("GPU-", "MIG-")) else f"GPU-{text}"

    # -- matmul ---------------------------------------------------------------------------

    def _capability(self) -> tuple[int, int]:
        if not self.is_gpu:
            return (0, 0)
        major, minor = self.torch.cuda.get_device_capability(self.device)
        return (int(major), int(minor))

    def matmul_dtypes(self) -> list[str]:
        if not self.is_gpu:
            return ["fp32"]  # a CPU device: the code path, not a CPU benchmark (numpy's job)
        capability = self._capability()
        dtypes = ["fp32", "fp16"]
        if capability >= (8, 0):
            dtypes[1:1] = ["tf32"]
            dtypes.append("bf16")
        fp8 = hasattr(self.torch, "float8_e4m3fn") and hasattr(self.torch, "_scaled_mm")
        if fp8 and capability >= (8, 9):
            dtypes.append("fp8")
        return dtypes

    @contextlib.contextmanager
    def _fp32_precision(self, precision: str) -> Iterator[None]:
        previous = self.torch.get_float32_matmul_precision()
        self.torch.set_float32_matmul_precision(precision)
        try:
            yield
        finally:
            self.torch.set_float32_matmul_precision(previous)

    def _randn(self, n: int, dtype: Any) -> Any:
        return self.torch.randn(
            (n, n), generator=self._gen, device=self.device, dtype=self.torch.float32
        ).to(dtype)

    def matmul_timer(self, dtype: str, n: int) -> Timer:
        torch = self.torch
        if dtype == "fp8":
            return self._fp8_timer(n)
        kinds = {"fp32": torch.float32, "tf32": torch.float32, "fp16": torch.float16}
        kinds["bf16"] = torch.bfloat16
        if dtype not in kinds:
            raise ValueError(f"unknown dtype {dtype!r}")
        a, b = self._randn(n, kinds[dtype]), self._randn(n, kinds[dtype])
        out = torch.empty((n, n), device=self.device, dtype=kinds[dtype])
        inner = self._timer(lambda: torch.matmul(a, b, out=out))
        precision = "high" if dtype == "tf32" else "highest"

        def timer(k: int) -> float:
            with self._fp32_precision(precision):
                return inner(k)

        return timer

    def _fp8_timer(self, n: int) -> Timer:
        torch = self.torch
        a = self._randn(n, torch.float8_e4m3fn)
        b = self._randn(n, torch.float8_e4m3fn).t()  # column-major, as cuBLASLt fp8 requires
        scale = torch.tensor(1.0, device=self.device, dtype=torch.float32)

        def run() -> object:
            return torch._scaled_mm(a, b, scale_a=scale, scale_b=scale, out_dtype=torch.bfloat16)

        run()  # fails here, clearly, where this build or part has no fp8 GEMM
        return self._timer(run)

    # -- memory ---------------------------------------------------------------------------

    def memory_timers(self, nbytes: int) -> dict[str, tuple[Timer, int]]:
        torch = self.torch
        count = max(1, nbytes // 4)
        a = torch.ones(count, device=self.device, dtype=torch.float32)
        b = torch.full((count,), 2.0, device=self.device, dtype=torch.float32)
        c = torch.full((count,), 3.0, device=self.device, dtype=torch.float32)
        size = count * 4
        return {
            "copy": (self._timer(lambda: b.copy_(a)), 2 * size),
            # one fused kernel: a = b + 3 * c
            "triad": (self._timer(lambda: torch.add(b, c, alpha=3.0, out=a)), 3 * size),
        }

    def transfer_timers(self, nbytes: int) -> dict[str, tuple[Timer, int]]:
        if not self.is_gpu:
            return {}
        torch = self.torch
        device = torch.empty(nbytes, dtype=torch.uint8, device=self.device)
        pageable = torch.empty(nbytes, dtype=torch.uint8)
        pageable.fill_(1)  # touch every page: a first-touch fault is not a transfer
        pinned = torch.empty(nbytes, dtype=torch.uint8).pin_memory()
        return {
            "h2d_pinned": (self._timer(lambda: device.copy_(pinned, non_blocking=True)), nbytes),
            "h2d_pageable": (self._timer(lambda: device.copy_(pageable)), nbytes),
            "d2h_pinned": (self._timer(lambda: pinned.copy_(device, non_blocking=True)), nbytes),
            "d2h_pageable": (self._timer(lambda: pageable.copy_(device)), nbytes),
        }

    def launch_timers(self) -> dict[str, Timer]:
        x = self.torch.zeros(1, device=self.device)
        sync = self._sync

        def launch_and_wait() -> None:
            x.add_(1.0)
            sync()

        # host clock on purpose: launch overhead is CPU time the device timeline cannot show
        return {
            "async": wall_timer(lambda: x.add_(1.0), sync),
            "sync": wall_timer(launch_and_wait),
        }

    def first_op_code(self) -> str:
        return _FIRST_OP.format(device=str(self.device))

    def release(self) -> None:
        if self.is_gpu:
            self.torch.cuda.empty_cache()
