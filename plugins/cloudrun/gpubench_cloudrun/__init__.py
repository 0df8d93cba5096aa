"""gpubench provider plugin for Google Cloud Run services with GPUs.

Registered as ``cloudrun`` on the ``gpubench.providers`` entry point. The emulator used by its
tests (a fake Cloud Run Admin API plus an emulated service URL on the simulated fleet) lives in
``gpubench_cloudrun.emulator`` (needs ``gpubench-sdk[testing]``).
"""

from ._admin import ServiceInfo
from ._auth import CachedIdToken, IdToken, IdTokenSource, google_id_token
from ._provider import CloudRunOptions, CloudRunProvider

__all__ = [
    "CachedIdToken",
    "CloudRunOptions",
    "CloudRunProvider",
    "IdToken",
    "IdTokenSource",
    "ServiceInfo",
    "google_id_token",
]
