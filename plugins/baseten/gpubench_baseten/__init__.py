"""gpubench provider plugin for Baseten: ``predict``, ``async_predict`` and the management API.

Registered as ``baseten`` on the ``gpubench.providers`` entry point. The emulator used by its
tests lives in ``gpubench_baseten.emulator`` (needs ``gpubench-sdk[testing]``).
"""

from ._provider import BasetenOptions, BasetenProvider

__all__ = ["BasetenOptions", "BasetenProvider"]
