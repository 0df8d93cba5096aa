"""gpubench provider plugins for Replicate and for self-hosted Cog containers.

One distribution, two providers, because a Cog container serves the very prediction object that
Replicate's API returns: ``replicate`` (``ReplicateProvider``: models, versions, deployments)
and ``cog`` (``CogProvider``: a container's own ``/predictions`` and ``/health-check``), both on
the ``gpubench.providers`` entry point. Their emulators, for tests and demos, are
``gpubench_replicate.emulator`` and ``gpubench_replicate.cog_emulator`` (they need
``gpubench-sdk[testing]``).
"""

from ._cog import CogOptions, CogProvider
from ._replicate import (
    PRIVATE_BILLING,
    PUBLIC_MODEL_BILLING,
    ReplicateOptions,
    ReplicateProvider,
)

__all__ = [
    "PRIVATE_BILLING",
    "PUBLIC_MODEL_BILLING",
    "CogOptions",
    "CogProvider",
    "ReplicateOptions",
    "ReplicateProvider",
]
