"""The simulated fleet's billing meter: what each worker did, and what that would cost.

Serverless GPU platforms bill a worker's lifetime in phases (booting, executing, idling until
the scale-down timeout); which phases are paid and how they are rounded is the provider's
``BillingModel``. The meter records the truth so a cost model can be checked against it.
"""

from __future__ import annotations

import math
import threading
from dataclasses import dataclass, field

from .._capabilities import BilledPhase, BillingModel


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

    def billed_s(self, model: BillingModel, now_s: float, *, nominal: bool = False) -> float:
        """Billed worker-seconds under ``model``: the billed phases of each worker's life,
        rounded up to ``granularity_s`` and at least ``min_billed_s``, per worker."""
        total_s = 0.0
        for bill in self.workers:
            phases = bill.phases_s(now_s)
            seconds = sum(phases[p] for p in model.billed_phases)
            if nominal:
                seconds /= self._time_scale
            if seconds <= 0:
                continue
            if model.granularity_s > 0:
                # a float hair above a whole increment must not bill one more increment
                seconds = math.ceil(round(seconds / model.granularity_s, 9)) * model.granularity_s
            total_s += max(seconds, model.min_billed_s)
        return total_s
