"""gpubench provider plugin for Hugging Face Inference Endpoints (dedicated).

Registered as ``huggingface`` on the ``gpubench.providers`` entry point. The emulator used by
its tests lives in ``gpubench_huggingface.emulator`` (needs ``gpubench-sdk[testing]``).
"""

from ._protocol import EndpointStatus, HandlerError, compute_time_ms
from ._provider import BILLING, HuggingFaceOptions, HuggingFaceProvider

__all__ = [
    "BILLING",
    "EndpointStatus",
    "HandlerError",
    "HuggingFaceOptions",
    "HuggingFaceProvider",
    "compute_time_ms",
]
