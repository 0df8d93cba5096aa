"""Optional provider powers, declared as data so the runner can adapt without probing."""

from __future__ import annotations

from dataclasses import dataclass, field

# The billing model lives with the cost module that prices it; re-exported here (and from
# gpubench_sdk) because a provider declares it in its Capabilities.
from ._billing import BilledPhase, BillingModel

__all__ = ["BilledPhase", "BillingModel", "Capabilities"]


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
