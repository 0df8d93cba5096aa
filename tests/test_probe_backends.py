"""The probe's PyTorch and CuPy paths: on a CPU device where only PyTorch is installed (so the
code path is not dead), and on a real GPU where there is one. Skipped otherwise."""

from __future__ import annotations

import importlib.util
import time
from typing import Any

import pytest

from gpubench_sdk.probe import probe_fields, run_probe

HAS_TORCH = importlib.util.find_spec("torch") is not None
HAS_CUPY = importlib.util.find_spec("cupy") is not None


def _cuda() -> bool:
    if not HAS_TORCH:
        return False
    import torch

    return bool(torch.cuda.is_available())


needs_torch = pytest.mark.skipif(not HAS_TORCH, reason="PyTorch is not installed")
needs_cuda = pytest.mark.skipif(not _cuda(), reason="no CUDA device")


@needs_torch
def test_torch_backend_on_the_cpu_device() -> None:
    import torch

    from gpubench_sdk.probe._torch import TorchBackend

    backend = TorchBackend("cpu")
    assert not backend.is_gpu and backend.matmul_dtypes() == ["fp32"]
    assert backend.transfer_timers(1024) == {}  # no device memory to copy to
    n = 256
    a, b = torch.randn(n, n), torch.randn(n, n)
    a @ b
    best = min(_timed(lambda: a @ b) for _ in range(10))
    timer = backend.matmul_timer("fp32", n)
    probe_best = min(timer(4) / 4 for _ in range(5))
    assert best / 3 < probe_best < best * 3
    with pytest.raises(ValueError, match="unknown dtype"):
        backend.matmul_timer("int4", n)


def _timed(run: Any) -> float:
    start = time.perf_counter()
    run()
    return time.perf_counter() - start


@needs_torch
def test_torch_probe_result_on_cpu() -> None:
    result = run_probe(
        quick=True, backend="torch", phases=("matmul", "memory", "launch"), matmul_n=256
    )
    assert result["backend"] == "torch" and result["device"]["device_kind"] == "cpu"
    assert result["matmul"]["fp32"]["throughput_tflop_per_s"]["median"] > 0
    assert result["memory"]["triad"]["bandwidth_gb_per_s"]["median"] > 0
    assert 0 < result["launch"]["async_us"]["median"] < 10_000
    assert 0 < result["launch"]["sync_us"]["median"] < 10_000
    assert "transfer" not in result and result["errors"] == {}
    assert probe_fields(result)["launch_async_us"] == result["launch"]["async_us"]["median"]


@needs_cuda
def test_torch_probe_on_a_gpu() -> None:
    result = run_probe(quick=True, backend="torch")
    device = result["device"]
    assert device["device_kind"] == "cuda" and device["device_name"]
    for dtype, entry in result["matmul"].items():
        peak = entry["peak_tflop_per_s"]
        if peak:  # measured within reason of the datasheet: never far above it
            assert 0.05 < entry["fraction_of_peak"] < 1.2, (dtype, entry)
    assert set(result["transfer"]) == {"h2d_pinned", "h2d_pageable", "d2h_pinned", "d2h_pageable"}
    pinned = result["transfer"]["h2d_pinned"]["bandwidth_gb_per_s"]["median"]
    assert pinned > 1.0
    copy = result["memory"]["copy"]
    if "fraction_of_peak" in copy:
        assert 0.2 < copy["fraction_of_peak"] < 1.1
    assert result["first_op"]["first_op_ms"] > 0
    if device.get("driver_version"):  # NVML present: power over the matmul phase
        energies = [e["energy"] for e in result["matmul"].values()]
        assert any(e and e["mean_power_w"] for e in energies)


@pytest.mark.skipif(not HAS_CUPY, reason="CuPy is not installed")
def test_cupy_probe_on_a_gpu() -> None:
    import cupy

    try:
        count = cupy.cuda.runtime.getDeviceCount()
    except Exception:
        count = 0
    if not count:
        pytest.skip("CuPy has no CUDA device")
    result = run_probe(quick=True, backend="cupy")
    assert result["backend"] == "cupy" and result["errors"] == {}
    assert result["matmul"]["fp16"]["throughput_tflop_per_s"]["median"] > 0
    assert result["memory"]["triad"]["bandwidth_gb_per_s"]["median"] > 0
