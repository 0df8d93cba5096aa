"""Optional provider powers, declared as data so the runner can adapt without probing."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

BilledPhase = Literal["cold_boot", "queue", "execution", "idle"]


@dataclass(frozen=True, slots=True)
class BillingModel:
    """How a provider turns worker time into money. The cost module prices it.

    ``granularity_s`` is the billed increment (rounded up per billed interval),
    ``min_billed_s`` the smallest charge per interval, ``billed_phases`` which parts of a
    worker's life are paid for, and ``min_idle_timeout_s`` the shortest scale-down delay the
    platform allows (time a worker stays billed after its last request).
    """

    granularity_s: float = 1.0
    min_billed_s: float = 0.0
    billed_phases: frozenset[BilledPhase] = frozenset({"cold_boot", "execution", "idle"})
    min_idle_timeout_s: float = 0.0
    default_idle_timeout_s: float | None = None
    source: str = ""


@dataclass(frozen=True, slots=True)
class Capabilities:
    """What a provider can do beyond ``invoke``. Each flag turns on a method of ``Provider``.

    - ``streaming``: ``invoke`` honours ``Request.stream`` and reports the first byte/token.
    - ``fleet_state``: ``state()`` reports workers ready/busy/starting and queue depth.
    - ``cold_start_control``: ``ensure_cold()`` can bring the target to zero workers and verify it.
    - ``scaling_settings``: ``get_scaling()`` / ``set_scaling()`` read and change min/max/idle.
    - ``server_timings``: which ``Result`` fields the server reports (e.g. ``queue_ms``).
    - ``billing``: the provider's billing rules, where known.
    """

    streaming: bool = False
    fleet_state: bool = False
    cold_start_control: bool = False
    scaling_settings: bool = False
    server_timings: frozenset[str] = field(default_factory=frozenset)
    billing: BillingModel | None = None

    def names(self) -> list[str]:
        """The capability names that are on, for listings."""
        on = [
            name
            for name in ("streaming", "fleet_state", "cold_start_control", "scaling_settings")
            if getattr(self, name)
        ]
        if self.server_timings:
            on.append("server_timings(" + ",".join(sorted(self.server_timings)) + ")")
        if self.billing is not None:
            on.append("billing")
        return on
