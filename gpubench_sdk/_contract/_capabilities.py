"""Optional provider powers, declared as data so the runner can adapt without probing."""

from __future__ import annotations

from dataclasses import dataclass, field

from .._base._errors import ConfigError

# The billing model lives with the cost module that prices it; re-exported here (and from
# gpubench_sdk) because a provider declares it in its Capabilities.
from ._billing import BilledPhase, BillingModel

__all__ = ["SCALING_KNOBS", "BilledPhase", "BillingModel", "Capabilities"]

#: The scaling settings ``gpubench advise`` searches, by gpubench's names: the workers kept
#: warm, the workers cap, the idle time before a worker stops, requests served at once by one
#: worker. A platform calls them its own way (RunPod ``workersMin``, Cloud Run
#: ``min_instance_count``, Hugging Face ``scaleToZeroTimeout``...).
SCALING_KNOBS = frozenset({"min_workers", "max_workers", "scale_down_s", "concurrency"})


@dataclass(frozen=True, slots=True)
class Capabilities:
    """What a provider can do beyond ``invoke``. Each flag turns on a method of ``Provider``.

    - ``streaming``: ``invoke`` honours ``Request.stream`` and reports the first byte/token.
    - ``fleet_state``: ``state()`` reports workers ready/busy/starting and queue depth.
    - ``cold_start_control``: ``ensure_cold()`` can bring the target to zero workers and verify it.
    - ``scaling_settings``: ``get_scaling()`` / ``set_scaling()`` read and change min/max/idle.
    - ``server_timings``: which ``Result`` fields the server reports (e.g. ``queue_ms``).
    - ``billing``: the provider's billing rules, where known.
    - ``scaling_knobs``: which of ``SCALING_KNOBS`` the platform lets its user set (``None``:
      not declared). ``gpubench advise`` offers only those (a platform without a scale-down
      setting keeps its own delay); undeclared, it offers all and says so.
    """

    streaming: bool = False
    fleet_state: bool = False
    cold_start_control: bool = False
    scaling_settings: bool = False
    server_timings: frozenset[str] = field(default_factory=frozenset)
    billing: BillingModel | None = None
    scaling_knobs: frozenset[str] | None = None

    def __post_init__(self) -> None:
        unknown = set(self.scaling_knobs or ()) - SCALING_KNOBS
        if unknown:
            raise ConfigError(
                "capabilities.scaling_knobs",
                sorted(unknown),
                f"a subset of {sorted(SCALING_KNOBS)}",
            )

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
