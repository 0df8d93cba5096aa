"""gpubench provider plugin for Inferless (serverless GPU models over KServe v2).

Registered as ``inferless`` on the ``gpubench.providers`` entry point. The emulator used by its
tests lives in ``gpubench_inferless.emulator`` (needs ``gpubench-sdk[testing]``).
"""

from ._kserve import DataType, datatype_of
from ._provider import BILLING, InferlessOptions, InferlessProvider

__all__ = ["BILLING", "DataType", "InferlessOptions", "InferlessProvider", "datatype_of"]
