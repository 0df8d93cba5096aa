"""NVML (``pynvml``, from the ``nvidia-ml-py`` package): identity, power and energy of one GPU.

Optional: without the package or a driver every function here answers ``None`` and the probe
reports the field as unavailable. API: https://docs.nvidia.com/deploy/nvml-api/ —
``nvmlDeviceGetTotalEnergyConsumption`` is millijoules since the driver loaded (Volta and
newer), ``nvmlDeviceGetPowerUsage`` milliwatts (the board's power, averaged by the driver
over about a second on recent parts), ``nvmlSystemGetCudaDriverVersion`` an integer such as
12040 for CUDA 12.4. Under MIG the counters are the whole board's, not the slice's.
"""

from __future__ import annotations

import threading
import time
from types import TracebackType
from typing import Any

_POWER_POLL_S = 0.02


def _pynvml() -> Any | None:
    try:
        import pynvml

        pynvml.nvmlInit()
    except Exception:  # no package, no driver, no device: all mean "no NVML here"
        return None
    return pynvml


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


class Nvml:
    """One GPU through NVML, found by UUID (so CUDA_VISIBLE_DEVICES reordering cannot mislead)."""

    def __init__(self, uuid: str | None, index: int = 0) -> None:
        self._nv = _pynvml()
        self.handle: Any = None
        self.error: str | None = None if self._nv else "NVML unavailable (pip install nvidia-ml-py)"
        if self._nv is None:
            return
        try:
            if uuid:
                self.handle = self._nv.nvmlDeviceGetHandleByUUID(uuid)
            else:
                self.handle = self._nv.nvmlDeviceGetHandleByIndex(index)
        except Exception as exc:
            try:  # a MIG UUID may not resolve on older drivers: fall back to the index
                self.handle = self._nv.nvmlDeviceGetHandleByIndex(index)
            except Exception:
                self.error = f"NVML could not find the device: {exc}"

    @property
    def available(self) -> bool:
        return self.handle is not None

    def _call(self, name: str, *args: Any) -> Any:
        if self._nv is None:
            return None
        try:
            return getattr(self._nv, name)(*args)
        except Exception:  # not supported on this part / driver / MIG slice
            return None

    def identity(self) -> dict[str, Any]:
        """Driver, CUDA driver version, MIG mode and power limit, where NVML tells."""
        if self.handle is None:
            return {"nvml_error": self.error}
        cuda = self._call("nvmlSystemGetCudaDriverVersion_v2") or self._call(
            "nvmlSystemGetCudaDriverVersion"
        )
        mig = self._call("nvmlDeviceGetMigMode", self.handle)
        limit_mw = self._call("nvmlDeviceGetEnforcedPowerLimit", self.handle)
        return {
            "driver_version": _text(d) if (d := self._call("nvmlSystemGetDriverVersion")) else None,
            "cuda_driver_version": f"{cuda // 1000}.{cuda % 1000 // 10}" if cuda else None,
            "nvml_device_name": _text(n)
            if (n := self._call("nvmlDeviceGetName", self.handle))
            else None,
            "nvml_uuid": _text(u) if (u := self._call("nvmlDeviceGetUUID", self.handle)) else None,
            "mig_mode_enabled": None if mig is None else bool(mig[0]),
            "power_limit_w": None if limit_mw is None else limit_mw / 1e3,
            "max_sm_clock_mhz": self._call("nvmlDeviceGetMaxClockInfo", self.handle, 1),
        }

    def energy_mj(self) -> int | None:
        if self.handle is None:
            return None
        value = self._call("nvmlDeviceGetTotalEnergyConsumption", self.handle)
        return None if value is None else int(value)

    def power_w(self) -> float | None:
        if self.handle is None:
            return None
        value = self._call("nvmlDeviceGetPowerUsage", self.handle)
        return None if value is None else value / 1e3


class EnergyWindow:
    """Energy and power over a ``with`` block: the energy counter's difference where the GPU
    has one, and power sampled every 20 ms on a thread (mean and max) in any case."""

    def __init__(self, nvml: Nvml | None) -> None:
        self._nvml = nvml if nvml is not None and nvml.available else None
        self._samples: list[float] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._t0 = self._t1 = 0.0
        self._e0: int | None = None
        self._e1: int | None = None

    def __enter__(self) -> EnergyWindow:
        if self._nvml is not None:
            self._thread = threading.Thread(target=self._poll, name="probe-power", daemon=True)
            self._thread.start()
            self._e0 = self._nvml.energy_mj()
        self._t0 = time.perf_counter()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._t1 = time.perf_counter()
        if self._nvml is not None:
            self._e1 = self._nvml.energy_mj()
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=1.0)

    def _poll(self) -> None:
        assert self._nvml is not None
        while not self._stop.is_set():
            watts = self._nvml.power_w()
            if watts is not None:
                self._samples.append(watts)
            self._stop.wait(_POWER_POLL_S)

    @property
    def seconds(self) -> float:
        return self._t1 - self._t0

    def energy_j(self) -> float | None:
        """Joules over the window: the counter where it moved, else mean power x time."""
        if self._e0 is not None and self._e1 is not None and self._e1 > self._e0:
            return (self._e1 - self._e0) / 1e3
        if self._samples:
            return sum(self._samples) / len(self._samples) * self.seconds
        return None

    def report(self) -> dict[str, Any]:
        energy = self.energy_j()
        counter = self._e0 is not None and self._e1 is not None and self._e1 > self._e0
        return {
            "window_s": self.seconds,
            "energy_j": energy,
            "mean_power_w": None if energy is None or not self.seconds else energy / self.seconds,
            "max_power_w": max(self._samples) if self._samples else None,
            "power_samples": len(self._samples),
            "energy_source": "nvml_energy_counter"
            if counter
            else ("nvml_power_samples" if self._samples else None),
        }
