"""Probe results of a stored run: per target, what was measured against what is advertised,
and what a delivered TFLOP-hour cost at the target's price.

Cost per delivered TFLOP-hour = price per second x 3600 / measured TFLOP/s: what an hour of
one TFLOP/s of sustained dense matmul costs on that target, at the dtype's measured rate
(not the datasheet's). The price is the target's plan entry (``price_per_s_usd``, else
``price_sku`` looked up in ``gpubench_sdk.cost.load_catalog()`` under ``billing`` or the
provider's name), as ``gpubench cost run`` prices it.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from rich.console import Console
from rich.table import Table

from .._store._store import RunInfo, Store
from ..cost import PriceCatalog, load_catalog
from ._backend import DTYPES


def usd_per_tflop_hour(tflop_per_s: float | None, usd_per_s: float | None) -> float | None:
    """What one TFLOP/s sustained for an hour costs: ``usd_per_s * 3600 / tflop_per_s``."""
    if not tflop_per_s or tflop_per_s <= 0 or usd_per_s is None:
        return None
    return usd_per_s * 3600.0 / tflop_per_s


@dataclass(frozen=True, slots=True)
class ProbeRow:
    """One target's probes: medians over its successful probe requests."""

    target: str
    provider: str
    probes: int
    backend: str | None
    device_name: str | None
    spec_model: str | None
    distinct_hosts: int  # distinct boot ids: > 1 means the probes landed on several machines
    distinct_devices: int  # distinct GPU UUIDs
    tflop_per_s: dict[str, float] = field(default_factory=dict)
    peak_tflop_per_s: dict[str, float | None] = field(default_factory=dict)
    fraction_of_peak: dict[str, float | None] = field(default_factory=dict)
    tflop_per_s_per_w: dict[str, float | None] = field(default_factory=dict)
    memory_copy_gb_per_s: float | None = None
    memory_triad_gb_per_s: float | None = None
    memory_copy_fraction_of_peak: float | None = None
    h2d_pinned_gb_per_s: float | None = None
    d2h_pinned_gb_per_s: float | None = None
    h2d_pageable_gb_per_s: float | None = None
    launch_async_us: float | None = None
    first_op_ms: float | None = None
    usd_per_s: float | None = None
    usd_per_tflop_hour: dict[str, float | None] = field(default_factory=dict)

    @property
    def best_dtype(self) -> str | None:
        """The dtype with the highest measured TFLOP/s."""
        if not self.tflop_per_s:
            return None
        return max(self.tflop_per_s, key=lambda d: self.tflop_per_s[d])


def _median(details: Sequence[Mapping[str, Any]], key: str) -> float | None:
    values = [float(d[key]) for d in details if isinstance(d.get(key), int | float)]
    return statistics.median(values) if values else None


def _first(details: Sequence[Mapping[str, Any]], key: str) -> Any:
    return next((d[key] for d in details if d.get(key) is not None), None)


def _price(plan: Mapping[str, Any], provider: str, catalog: PriceCatalog) -> float | None:
    explicit = plan.get("price_per_s_usd")
    if isinstance(explicit, int | float):
        return float(explicit)
    sku = plan.get("price_sku")
    if not sku:
        return None
    return catalog.rate_usd_per_s(str(plan.get("billing") or provider), str(sku))


def probe_results(
    store: Store, run: RunInfo | int | str, *, catalog: PriceCatalog | None = None
) -> list[ProbeRow]:
    """A row per target of ``run`` that stored probe results (``Invocation.detail`` written by
    the ``gpu_probe`` workload), in the run's target order. Warm-up requests are left out."""
    info = run if isinstance(run, RunInfo) else store.run(run)
    by_target: dict[str, list[Mapping[str, Any]]] = {t.name: [] for t in info.targets}
    for inv in store.invocations(info.id):
        detail = getattr(inv, "detail", None)
        measured = inv.ok and inv.phase.value == "measure"
        if measured and isinstance(detail, Mapping) and "probe_version" in detail:
            by_target[inv.target].append(detail)
    plans = {t.get("name"): t for t in info.config.get("targets", []) if isinstance(t, dict)}
    rows = []
    for target in info.targets:
        details = by_target[target.name]
        if not details:
            continue
        rate = _price(plans.get(target.name, {}), target.provider, catalog or load_catalog())
        tflops: dict[str, float] = {}
        for dtype in DTYPES:
            value = _median(details, f"matmul_{dtype}_tflop_per_s")
            if value is not None:
                tflops[dtype] = value

        def per_dtype(key: str, values: Mapping[str, float]) -> dict[str, float | None]:
            return {d: _median(details, f"matmul_{d}_{key}") for d in values}  # noqa: B023

        uuids = {d.get("device_uuid") for d in details if d.get("device_uuid")}
        rows.append(
            ProbeRow(
                target=target.name,
                provider=target.provider,
                probes=len(details),
                backend=_first(details, "backend"),
                device_name=_first(details, "device_name"),
                spec_model=_first(details, "spec_model"),
                distinct_hosts=len({d.get("boot_id") for d in details if d.get("boot_id")}),
                distinct_devices=len(uuids),
                tflop_per_s=tflops,
                peak_tflop_per_s=per_dtype("peak_tflop_per_s", tflops),
                fraction_of_peak=per_dtype("fraction_of_peak", tflops),
                tflop_per_s_per_w=per_dtype("tflop_per_s_per_w", tflops),
                memory_copy_gb_per_s=_median(details, "memory_copy_gb_per_s"),
                memory_triad_gb_per_s=_median(details, "memory_triad_gb_per_s"),
                memory_copy_fraction_of_peak=_median(details, "memory_copy_fraction_of_peak"),
                h2d_pinned_gb_per_s=_median(details, "transfer_h2d_pinned_gb_per_s"),
                d2h_pinned_gb_per_s=_median(details, "transfer_d2h_pinned_gb_per_s"),
                h2d_pageable_gb_per_s=_median(details, "transfer_h2d_pageable_gb_per_s"),
                launch_async_us=_median(details, "launch_async_us"),
                first_op_ms=_median(details, "first_op_ms"),
                usd_per_s=rate,
                usd_per_tflop_hour={d: usd_per_tflop_hour(v, rate) for d, v in tflops.items()},
            )
        )  # fmt: skip
    return rows


def _num(value: float | None, digits: int = 1, suffix: str = "") -> str:
    return "-" if value is None else f"{value:,.{digits}f}{suffix}"


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{value:.0%}"


def probe_tables(rows: Sequence[ProbeRow]) -> list[Table]:
    """Two rich tables: matmul per target and dtype, then memory, transfers and start-up."""
    compute = Table(title="GPU probe: dense matmul", title_justify="left")
    for name in ("target", "device", "dtype", "TFLOP/s", "of peak", "TFLOP/s/W", "$/TFLOP-h"):
        compute.add_column(
            name, justify="left" if name in ("target", "device", "dtype") else "right"
        )
    system = Table(
        title="GPU probe: memory, pinned host<->device copies, launch, first op in a fresh process",
        title_justify="left",
        caption="hosts: distinct boot ids / probes (more than one: the probes ran on several"
        " machines)",
    )
    for name in ("target", "backend", "copy GB/s", "triad GB/s", "of peak", "H2D GB/s",
                 "D2H GB/s", "launch µs", "init ms", "hosts"):  # fmt: skip
        system.add_column(name, justify="left" if name in ("target", "backend") else "right")
    for row in rows:
        device = row.device_name or "?"
        if row.spec_model and row.spec_model not in device:
            device += f" ({row.spec_model})"
        for i, (dtype, tflops) in enumerate(row.tflop_per_s.items()):
            cost = row.usd_per_tflop_hour.get(dtype)
            compute.add_row(
                row.target if i == 0 else "",
                device if i == 0 else "",
                dtype,
                _num(tflops, 3 if tflops < 10 else 1),
                _pct(row.fraction_of_peak.get(dtype)),
                _num(row.tflop_per_s_per_w.get(dtype), 3),
                "-" if cost is None else f"{cost:.4g}",
            )
        system.add_row(
            row.target,
            row.backend or "?",
            _num(row.memory_copy_gb_per_s),
            _num(row.memory_triad_gb_per_s),
            _pct(row.memory_copy_fraction_of_peak),
            _num(row.h2d_pinned_gb_per_s),
            _num(row.d2h_pinned_gb_per_s),
            _num(row.launch_async_us),
            _num(row.first_op_ms),
            f"{row.distinct_hosts}/{row.probes}",
        )
    return [compute, system]


def print_probe_results(
    store: Store, run: RunInfo | int | str, *, console: Console | None = None
) -> list[ProbeRow]:
    """Print the run's probe table (nothing when it stored no probe results); return the rows."""
    rows = probe_results(store, run)
    out = console or Console()
    for table in probe_tables(rows) if rows else ():
        out.print(table)
    return rows
