"""The simulated fleet's billing meter: what each worker did, and what that would cost.

Serverless GPU platforms bill a worker's lifetime in phases (booting, executing, idling until
the scale-down timeout); which phases are paid and how they are rounded is the provider's
``BillingModel``. The meter records the truth so a cost model can be checked against it.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

from .._contract._capabilities import BilledPhase, BillingModel
from ..cost import WorkerInterval


@dataclass(slots=True)
class WorkerBill:
    """One worker's life in ``time.perf_counter()`` seconds; ``None`` for a phase not reached."""

    worker_id: str
    started_s: float
    boot_end_s: float | None = None
    stopped_s: float | None = None
    busy: list[tuple[float, float]] = field(default_factory=list)

    def phases_s(self, now_s: float) -> dict[BilledPhase, float]:
        """Seconds spent in each phase so far (a live worker counts up to ``now_s``)."""
        end_s = self.stopped_s if self.stopped_s is not None else now_s
        boot_end_s = self.boot_end_s if self.boot_end_s is not None else end_s
        boot_s = max(0.0, boot_end_s - self.started_s)
        execution_s = sum(min(e, end_s) - s for s, e in self.busy if s < end_s)
        idle_s = max(0.0, end_s - boot_end_s - execution_s)
        return {"cold_boot": boot_s, "execution": execution_s, "idle": idle_s, "queue": 0.0}


class BillingMeter:
    """Records worker lifetimes (the fleet writes, tests read, from any thread)."""

    def __init__(self, time_scale: float = 1.0) -> None:
        self._bills: list[WorkerBill] = []
        self._lock = threading.Lock()
        self._time_scale = time_scale

    # -- written by the fleet -----------------------------------------------------------------

    def started(self, worker_id: str, now_s: float) -> WorkerBill:
        bill = WorkerBill(worker_id, now_s)
        with self._lock:
            self._bills.append(bill)
        return bill

    # -- read by tests ----------------------------------------------------------------------

    @property
    def workers(self) -> list[WorkerBill]:
        with self._lock:
            return list(self._bills)

    def phase_totals_s(self, now_s: float, *, nominal: bool = False) -> dict[BilledPhase, float]:
        """Worker-seconds per phase over the whole fleet.

        ``nominal=True`` divides by the fleet's ``time_scale``: the figures the fleet's
        configuration describes, rather than the (scaled-down) seconds that really passed.
        """
        totals: dict[BilledPhase, float] = {"cold_boot": 0.0, "execution": 0.0, "idle": 0.0}
        for bill in self.workers:
            for phase, seconds in bill.phases_s(now_s).items():
                if phase != "queue":
                    totals[phase] += seconds
        if nominal:
            totals = {k: v / self._time_scale for k, v in totals.items()}
        return totals

    def worker_intervals(self, now_s: float, *, nominal: bool = False) -> list[WorkerInterval]:
        """Every worker's life as the cost module's intervals: boot, then busy and idle in turn
        (a live worker up to ``now_s``). Price them with ``gpubench_sdk.cost``."""
        scale = 1.0 / self._time_scale if nominal else 1.0
        out: list[WorkerInterval] = []
        for bill in self.workers:
            end_s = bill.stopped_s if bill.stopped_s is not None else now_s
            boot_end_s = min(bill.boot_end_s if bill.boot_end_s is not None else end_s, end_s)
            spans: list[tuple[BilledPhase, float, float]] = [
                ("cold_boot", bill.started_s, boot_end_s)
            ]
            cursor = boot_end_s
            for busy_start_s, busy_end_s in sorted(bill.busy):
                busy_end_s = min(busy_end_s, end_s)
                spans += [("idle", cursor, busy_start_s), ("execution", busy_start_s, busy_end_s)]
                cursor = busy_end_s
            spans.append(("idle", cursor, end_s))
            out += [
                WorkerInterval(bill.worker_id, phase, a * scale, b * scale)
                for phase, a, b in spans
                if b > a
            ]
        return out

    def billed_s(self, model: BillingModel, now_s: float, *, nominal: bool = False) -> float:
        """Billed worker-seconds under ``model``, priced by the cost module itself
        (``price_worker_intervals``): the figure a cost estimate should reproduce."""
        from ..cost import price_worker_intervals

        intervals = self.worker_intervals(now_s, nominal=nominal)
        return price_worker_intervals(intervals, model, 0.0).billed_s
