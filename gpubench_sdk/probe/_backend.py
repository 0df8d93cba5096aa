"""What every probe backend provides, and the numpy CPU fallback that runs anywhere.

A backend hands out *timers* (``_stats.Timer``: run an operation ``k`` times, wait for the
device, return seconds); the probe decides how often to call them and what the figures mean.
Traffic is counted as STREAM counts it (McCalpin, https://www.cs.virginia.edu/stream/ref.html):
copy moves 2 arrays per call (read one, write one), triad ``a = b + s*c`` moves 3.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import numpy as np

from ._stats import Timer

DTYPES = ("fp32", "tf32", "fp16", "bf16", "fp8")


class Backend:
    """The interface; ``None``/empty where a backend has no such operation."""

    name = ""
    is_gpu = False

    def identity(self) -> dict[str, Any]:
        raise NotImplementedError

    def matmul_dtypes(self) -> list[str]:
        raise NotImplementedError

    def matmul_timer(self, dtype: str, n: int) -> Timer:
        """A timer of ``C = A @ B`` with ``n x n`` operands of ``dtype`` (2 n^3 FLOP per call)."""
        raise NotImplementedError

    def memory_timers(self, nbytes: int) -> dict[str, tuple[Timer, int]]:
        """``copy`` and ``triad`` over arrays of ``nbytes`` each: (timer, bytes moved per call)."""
        raise NotImplementedError

    def transfer_timers(self, nbytes: int) -> dict[str, tuple[Timer, int]]:
        """Host<->device copies of ``nbytes``: ``h2d_pinned``, ``h2d_pageable``, ``d2h_...``."""
        return {}

    def launch_timers(self) -> dict[str, Timer]:
        """Timers of one tiny kernel: back-to-back (``async``) and launch+sync (``sync``)."""
        return {}

    def first_op_code(self) -> str:
        """Python source for a fresh interpreter: prints JSON ``{"import_ms", "first_op_ms"}``."""
        raise NotImplementedError

    def nvml_uuid(self) -> str | None:
        return None

    def release(self) -> None:
        """Give cached device memory back between phases."""


def wall_timer(run: Callable[[], object], sync: Callable[[], object] | None = None) -> Timer:
    """A perf_counter timer of ``run``, waiting on ``sync`` (if any) before stopping the clock."""

    def timer(k: int) -> float:
        if sync is not None:
            sync()
        start = time.perf_counter()
        for _ in range(k):
            run()
        if sync is not None:
            sync()
        return time.perf_counter() - start

    return timer


_FIRST_OP_NUMPY = """
import json, time
t0 = time.perf_counter()
import numpy as np
t1 = time.perf_counter()
a = np.ones((64, 64), dtype=np.float32)
float((a @ a)[0, 0])
t2 = time.perf_counter()
print(json.dumps({"import_ms": (t1 - t0) * 1e3, "first_op_ms": (t2 - t1) * 1e3}))
"""


class NumpyBackend(Backend):
    """The CPU fallback: numpy's BLAS for matmul (fp32 only: numpy has no fast fp16/bf16 path),
    ``np.copyto`` for copy, and a triad in two passes (numpy cannot fuse ``b + s*c``), so its
    triad figure, counted as STREAM counts it, understates the machine a little."""

    name = "numpy"

    def __init__(self) -> None:
        self._rng = np.random.default_rng(0)

    def identity(self) -> dict[str, Any]:
        blas: str | None = None
        try:
            config = np.show_config(mode="dicts")  # numpy >= 1.25
            blas = str(config.get("Build Dependencies", {}).get("blas", {}).get("name"))
        except Exception:
            blas = None
        return {
            "device_kind": "cpu",
            "device_name": None,
            "backend_version": np.__version__,
            "blas": blas,
        }

    def matmul_dtypes(self) -> list[str]:
        return ["fp32"]

    def matmul_timer(self, dtype: str, n: int) -> Timer:
        if dtype != "fp32":
            raise ValueError(f"the numpy backend measures fp32 only, not {dtype}")
        a = self._rng.standard_normal((n, n), dtype=np.float32)
        b = self._rng.standard_normal((n, n), dtype=np.float32)
        out = np.empty((n, n), dtype=np.float32)
        return wall_timer(lambda: np.matmul(a, b, out=out))

    def memory_timers(self, nbytes: int) -> dict[str, tuple[Timer, int]]:
        count = max(1, nbytes // 4)
        a = np.ones(count, dtype=np.float32)
        b = np.full(count, 2.0, dtype=np.float32)
        c = np.full(count, 3.0, dtype=np.float32)
        scalar = np.float32(3.0)
        size = count * 4

        def triad() -> None:
            np.multiply(c, scalar, out=a)
            np.add(a, b, out=a)

        return {
            "copy": (wall_timer(lambda: np.copyto(b, a)), 2 * size),
            "triad": (wall_timer(triad), 3 * size),
        }

    def first_op_code(self) -> str:
        return _FIRST_OP_NUMPY
