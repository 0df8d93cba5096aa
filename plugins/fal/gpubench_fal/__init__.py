"""gpubench provider plugin for fal: the queue API and the synchronous ``fal.run`` route.

Registered as ``fal`` on the ``gpubench.providers`` entry point. The emulator used by its tests
lives in ``gpubench_fal.emulator`` (needs ``gpubench-sdk[testing]``).
"""

from ._provider import FalOptions, FalProvider

__all__ = ["FalOptions", "FalProvider"]
