"""gpubench provider plugin for Azure Container Apps on serverless GPUs.

Registered as ``azure`` on the ``gpubench.providers`` entry point. The emulator used by its
tests (Resource Manager's container-app routes plus the app's ingress, on the simulated fleet)
lives in ``gpubench_azure.emulator`` (needs ``gpubench-azure[testing]``).
"""

from ._arm import AppInfo, Replicas
from ._provider import AzureOptions, AzureProvider

__all__ = ["AppInfo", "AzureOptions", "AzureProvider", "Replicas"]
