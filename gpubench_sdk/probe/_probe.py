"""The probe: pick a backend, run each phase with warm-up and repeated synchronised timing,
and return one JSON-able dict whose every figure carries its unit in its key."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from .._base._errors import ConfigError
from ._backend import Backend, NumpyBackend
from ._host import host_identity
from ._nvml import EnergyWindow, Nvml
from ._peaks import sm_fraction, spec_for
from ._stats import Plan, Timer, rate_summary, sample, summary

PROBE_VERSION = 1
PHASES = ("matmul", "memory", "transfer", "launch", "first_op")
BACKENDS = ("auto", "torch", "cupy", "numpy")


@dataclass(frozen=True, slots=True)
class Sizes:
    matmul_n: int
    memory_bytes: int
    transfer_bytes: int
    matmul: Plan
    other: Plan


# GPU sizes: an 8192^3 matmul is 1.1 TFLOP (about 1.4 ms on an H200 in bf16, 20 ms in fp32),
# large enough for cuBLAS to reach its plateau; 1 GiB arrays are far beyond any L2 cache.
# The whole full probe takes ~10-20 s on a large GPU, most of it PyTorch's import in the
# fresh-process phase. CPU sizes keep a quick probe to a few seconds on 2 shared cores.
_MIB = 2**20
_SIZES = {  # (is_gpu, quick)
    (True, False): Sizes(8192, 1024 * _MIB, 256 * _MIB, Plan(3, 10, 0.05, 2), Plan(2, 10, 0.02, 1)),
    (True, True): Sizes(4096, 256 * _MIB, 64 * _MIB, Plan(2, 5, 0.02, 0.5), Plan(1, 5, 0.01, 0.3)),
    (False, False): Sizes(2048, 256 * _MIB, 0, Plan(1, 7, 0.2, 4), Plan(1, 7, 0.1, 2)),
    (False, True): Sizes(1024, 64 * _MIB, 0, Plan(1, 5, 0.05, 1), Plan(1, 5, 0.03, 0.5)),
}  # fmt: skip


@dataclass(frozen=True, slots=True)
class ProbeOptions:
    """What to measure. ``quick`` shrinks sizes and repeats (a few seconds on a CPU)."""

    quick: bool = False
    backend: str = "auto"
    phases: tuple[str, ...] = PHASES
    matmul_n: int | None = None  # overrides the size's default
    dtypes: tuple[str, ...] = field(default=())  # empty: every dtype the device supports

    def __post_init__(self) -> None:
        if self.backend not in BACKENDS:
            raise ConfigError("backend", self.backend, f"one of {', '.join(BACKENDS)}")
        unknown = [p for p in self.phases if p not in PHASES]
        if unknown:
            raise ConfigError("phases", unknown, f"a list drawn from {', '.join(PHASES)}")
        if self.matmul_n is not None and not 16 <= self.matmul_n <= 65536:
            raise ConfigError("matmul_n", self.matmul_n, "a matrix side from 16 to 65536")

    @classmethod
    def from_payload(cls, payload: Mapping[str, Any] | None) -> ProbeOptions:
        """Options from a request body: ``{"quick": true, "backend": "torch", "phases":
        "matmul,memory", "dtypes": "bf16,fp8", "matmul_n": 4096}``, every key optional.

        Lists may be JSON lists or comma-separated strings: strings pass unchanged through
        every platform's input schema (Cog inputs, KServe v2 tensors, RunPod ``input``)."""
        data = dict(payload or {})
        known = {"quick", "backend", "phases", "matmul_n", "dtypes"}
        extra = sorted(set(data) - known)
        if extra:
            raise ConfigError("probe payload", extra, f"only the keys {sorted(known)}")
        for key in ("phases", "dtypes"):
            if key in data:
                data[key] = _names(key, data[key])
        if "quick" in data and not isinstance(data["quick"], bool):
            raise ConfigError("quick", data["quick"], "true or false")
        side = data.get("matmul_n")
        if side is not None and (isinstance(side, bool) or not isinstance(side, int)):
            raise ConfigError("matmul_n", side, "an integer matrix side")
        return cls(**data)


def _names(key: str, value: Any) -> tuple[str, ...]:
    if isinstance(value, str):
        return tuple(v.strip() for v in value.split(",") if v.strip())
    if isinstance(value, list | tuple) and all(isinstance(v, str) for v in value):
        return tuple(value)
    raise ConfigError(key, value, "a list of names or a comma-separated string")


def select_backend(name: str = "auto") -> Backend:
    """The backend called ``name``; ``auto`` prefers PyTorch with CUDA, then CuPy, then numpy."""
    if name == "numpy":
        return NumpyBackend()
    if name in ("torch", "auto"):
        try:
            import torch

            if name == "torch" or torch.cuda.is_available():
                from ._torch import TorchBackend

                return TorchBackend()
        except ImportError:
            if name == "torch":
                raise ConfigError(
                    "backend", name, "PyTorch installed (pip install torch)"
                ) from None
    if name in ("cupy", "auto"):
        try:
            import cupy

            if name == "cupy" or cupy.cuda.runtime.getDeviceCount() > 0:
                from ._cupy import CupyBackend

                return CupyBackend()
        except Exception as exc:  # no package, or CuPy without a driver
            if name == "cupy":
                raise ConfigError("backend", name, f"CuPy with a CUDA device ({exc})") from None
    return NumpyBackend()


class _Counted:
    """A timer that counts its calls, so a power window knows how much work it covered."""

    def __init__(self, timer: Timer) -> None:
        self.timer = timer
        self.calls = 0

    def __call__(self, k: int) -> float:
        self.calls += k
        return self.timer(k)


def _error(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"[:500]


def run_probe(options: ProbeOptions | None = None, **fields: Any) -> dict[str, Any]:
    """Measure this machine's accelerator (or CPU) and return the result as a JSON-able dict.

    ``run_probe(quick=True)`` is the same as ``run_probe(ProbeOptions(quick=True))``. A phase
    that fails (an fp8 GEMM this build lacks, an out-of-memory) leaves its reason in
    ``errors`` and the other phases still run.
    """
    opts = options if options is not None else ProbeOptions(**fields)
    started = time.perf_counter()
    wall = time.time()
    backend = select_backend(opts.backend)
    sizes = _SIZES[(backend.is_gpu, opts.quick)]
    errors: dict[str, str] = {}
    device = backend.identity()
    nvml = Nvml(backend.nvml_uuid()) if backend.is_gpu else None
    if nvml is not None:
        device.update(nvml.identity())
    spec = None
    if backend.is_gpu and device.get("device_name"):
        memory = device.get("device_memory_total_gib")
        spec = spec_for(str(device["device_name"]), None if memory is None else int(memory * 2**30))
    fraction = sm_fraction(spec, device.get("sm_count")) if spec else 1.0
    result: dict[str, Any] = {
        "probe_version": PROBE_VERSION,
        "backend": backend.name,
        "quick": opts.quick,
        "started_wall_s": wall,
        "host": host_identity(),
        "device": device,
        "spec": None if spec is None else {
            "model": spec.model,
            "peak_tflop_per_s": dict(spec.peak_tflop_per_s),
            "memory_bandwidth_gb_per_s": spec.memory_bandwidth_gb_per_s,
            "memory_gib": spec.memory_gib,
            "sm_fraction": fraction,  # < 1 on a MIG slice: peaks below are scaled by it
            "source": spec.source,
            "note": spec.note,
        },
    }  # fmt: skip
    peaks = {
        k: None if v is None else v * fraction
        for k, v in (spec.peak_tflop_per_s if spec else {}).items()
    }
    if "matmul" in opts.phases:
        result["matmul"] = _matmul(backend, opts, sizes, peaks, nvml, errors)
        backend.release()
    if "memory" in opts.phases:
        peak_bw = spec.memory_bandwidth_gb_per_s * fraction if spec else None
        result["memory"] = _bandwidth(
            backend.memory_timers, sizes.memory_bytes, sizes.other, "memory", errors, peak_bw
        )
        backend.release()
    if "transfer" in opts.phases and backend.is_gpu:
        result["transfer"] = _bandwidth(
            backend.transfer_timers, sizes.transfer_bytes, sizes.other, "transfer", errors, None
        )
        backend.release()
    if "launch" in opts.phases:
        result["launch"] = _launch(backend, sizes.other, errors)
    if "first_op" in opts.phases:
        result["first_op"] = _first_op(backend, errors)
    result["errors"] = errors
    result["elapsed_s"] = time.perf_counter() - started
    return result


def _matmul(
    backend: Backend,
    opts: ProbeOptions,
    sizes: Sizes,
    peaks: Mapping[str, float | None],
    nvml: Nvml | None,
    errors: dict[str, str],
) -> dict[str, Any]:
    n = opts.matmul_n or sizes.matmul_n
    flop = 2.0 * n**3  # n^2 outputs, each n multiply-adds
    supported = backend.matmul_dtypes()
    wanted: Sequence[str] = [d for d in opts.dtypes if d in supported] if opts.dtypes else supported
    out: dict[str, Any] = {}
    for dtype in wanted:
        try:
            timer = _Counted(backend.matmul_timer(dtype, n))
            with EnergyWindow(nvml) as window:
                per_call_s, calls = sample(timer, sizes.matmul)
        except Exception as exc:
            errors[f"matmul.{dtype}"] = _error(exc)
            backend.release()
            continue
        throughput = rate_summary(per_call_s, flop, 1e12)
        peak = peaks.get(dtype)
        energy = window.report() if nvml is not None else None
        energy_j = None if energy is None else energy["energy_j"]
        out[dtype] = {
            "n": n,
            "flop_per_call": flop,
            "calls_per_sample": calls,
            "throughput_tflop_per_s": throughput,
            "time_per_call_ms": summary([s * 1e3 for s in per_call_s]),
            "peak_tflop_per_s": peak,
            "fraction_of_peak": None if not peak else throughput["median"] / peak,
            "energy": energy,
            # TFLOP per joule over the whole window (warm-up included) = TFLOP/s per watt
            "tflop_per_s_per_w": None if not energy_j else timer.calls * flop / 1e12 / energy_j,
        }
        backend.release()
    skipped = [d for d in opts.dtypes if d not in supported]
    for dtype in skipped:
        errors[f"matmul.{dtype}"] = f"not supported by the {backend.name} backend on this device"
    return out


def _bandwidth(
    timers_for: Any,
    nbytes: int,
    plan: Plan,
    phase: str,
    errors: dict[str, str],
    peak_gb_per_s: float | None,
) -> dict[str, Any]:
    out: dict[str, Any] = {}
    try:
        timers: dict[str, tuple[Timer, int]] = timers_for(nbytes)
    except Exception as exc:
        errors[phase] = _error(exc)
        return out
    for name, (timer, moved) in timers.items():
        try:
            per_call_s, calls = sample(timer, plan)
        except Exception as exc:
            errors[f"{phase}.{name}"] = _error(exc)
            continue
        bandwidth = rate_summary(per_call_s, moved, 1e9)
        out[name] = {
            "array_bytes": nbytes,
            "bytes_per_call": moved,
            "calls_per_sample": calls,
            "bandwidth_gb_per_s": bandwidth,
        }
        if peak_gb_per_s:
            out[name]["peak_gb_per_s"] = peak_gb_per_s
            out[name]["fraction_of_peak"] = bandwidth["median"] / peak_gb_per_s
    return out


def _launch(backend: Backend, plan: Plan, errors: dict[str, str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    try:
        timers = backend.launch_timers()
        for name, timer in timers.items():
            per_call_s, _ = sample(timer, plan)
            out[f"{name}_us"] = summary([s * 1e6 for s in per_call_s])
    except Exception as exc:
        errors["launch"] = _error(exc)
    return out


def _first_op(backend: Backend, errors: dict[str, str]) -> dict[str, Any]:
    """Import plus first device operation in a fresh interpreter: on a GPU, CUDA context
    creation, which every cold start pays before a model can load."""
    started = time.perf_counter()
    try:
        done = subprocess.run(
            [sys.executable, "-c", backend.first_op_code()],
            capture_output=True,
            text=True,
            timeout=180,
            env=os.environ.copy(),
            check=False,
        )
        total_ms = (time.perf_counter() - started) * 1e3
        if done.returncode != 0:
            raise RuntimeError(done.stderr.strip().splitlines()[-1] if done.stderr else "failed")
        line = done.stdout.strip().splitlines()[-1]
        measured = json.loads(line)
    except Exception as exc:
        errors["first_op"] = _error(exc)
        return {}
    return {
        "import_ms": float(measured["import_ms"]),
        "first_op_ms": float(measured["first_op_ms"]),
        "process_total_ms": total_ms,
    }
