"""Who ran the probe: the host (hostname, boot id, CPU, memory) and what the container sees.

The boot id (``/proc/sys/kernel/random/boot_id``, a random UUID the Linux kernel draws at each
boot; see proc(5)) is the same for every container on one running host, so two probe
results with the same boot id ran on the same machine between two reboots: repeated runs
reveal host reuse even where hostnames are per-container.
"""

from __future__ import annotations

import os
import platform
import socket
import sys
from typing import Any

_BOOT_ID = "/proc/sys/kernel/random/boot_id"
# Set by the NVIDIA container runtime / the user; they say which GPUs (or MIG slices) are visible.
_VISIBLE_ENV = ("CUDA_VISIBLE_DEVICES", "NVIDIA_VISIBLE_DEVICES")


def _read(path: str) -> str | None:
    try:
        with open(path, encoding="utf-8") as fp:
            return fp.read().strip()
    except OSError:
        return None


def _cpu_model() -> str | None:
    text = _read("/proc/cpuinfo") or ""
    for line in text.splitlines():
        if line.lower().startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.processor() or None


def _memory_total_gib() -> float | None:
    for line in (_read("/proc/meminfo") or "").splitlines():
        if line.startswith("MemTotal:"):
            return int(line.split()[1]) * 1024 / 2**30
    return None


def _cpu_quota_cores() -> float | None:
    """The cgroup v2 CPU limit (``cpu.max``: quota and period in µs), where one is set."""
    text = _read("/sys/fs/cgroup/cpu.max")
    if not text or text.startswith("max"):
        return None
    quota, period = text.split()[:2]
    return int(quota) / int(period)


def host_identity() -> dict[str, Any]:
    usable = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return {
        "hostname": socket.gethostname(),
        "boot_id": _read(_BOOT_ID),
        "platform": platform.platform(),
        "python_version": platform.python_version(),
        "python_executable": sys.executable,
        "cpu_model": _cpu_model(),
        "cpu_count": os.cpu_count(),
        "cpu_usable_count": usable,
        "cpu_quota_cores": _cpu_quota_cores(),
        "memory_total_gib": _memory_total_gib(),
        "visible_devices": {k: os.environ[k] for k in _VISIBLE_ENV if k in os.environ},
    }
