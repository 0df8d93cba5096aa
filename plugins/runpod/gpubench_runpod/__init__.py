"""gpubench provider plugin for RunPod Serverless (queue endpoints).

Registered as ``runpod`` on the ``gpubench.providers`` entry point. The emulator used by its
tests lives in ``gpubench_runpod.emulator`` (needs ``gpubench-sdk[testing]``).
"""

from ._provider import RunPodOptions, RunPodProvider

__all__ = ["RunPodOptions", "RunPodProvider"]
