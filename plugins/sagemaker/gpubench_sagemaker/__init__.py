"""gpubench provider plugin for AWS SageMaker real-time endpoints and inference components.

Registered as ``sagemaker`` on the ``gpubench.providers`` entry point. The emulator used by its
tests (runtime with the event-stream response, control plane with inference components, SigV4
checked) lives in ``gpubench_sagemaker.emulator`` (needs ``gpubench-sagemaker[testing]``).
"""

from ._provider import SageMakerOptions, SageMakerProvider

__all__ = ["SageMakerOptions", "SageMakerProvider"]
