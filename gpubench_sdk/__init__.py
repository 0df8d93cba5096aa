"""gpubench: neutral, reproducible benchmarks of serverless GPU inference providers.

Everything a user or plugin author needs is importable from here; the modules with a leading
underscore are private. ``gpubench_sdk.telemetry`` holds the OpenTelemetry setup helpers.
"""

__version__ = "0.1.0"

from ._capabilities import BillingModel, Capabilities
from ._config import RunConfig, load_config
from ._errors import (
    CapabilityError,
    ClientHTTPError,
    ColdTimeoutError,
    ConfigError,
    GpubenchError,
    HTTPStatusError,
    InvalidResponseError,
    PluginError,
    PluginLoadError,
    PluginNotFoundError,
    ProviderError,
    RequestTimeoutError,
    ServerHTTPError,
    StoreError,
    ThrottledError,
    TransportError,
)
from ._http import first_byte_ns, make_client
from ._local import LocalProvider, LocalRuntime, LocalRuntimeConfig
from ._multiproc import run_processes
from ._plan import build_run
from ._plugins import PluginInfo, list_plugins, load_provider, provider_class, workload_class
from ._provider import Provider, ProviderOptions
from ._results import RunResult, Target
from ._runner import Runner, run
from ._scenarios import Burst, ColdStarts, Rate, Scenario
from ._store import RunInfo, Store
from ._summary import SummaryRow, summarize
from ._types import (
    ColdCheck,
    FleetState,
    Invocation,
    Outcome,
    Phase,
    Request,
    Result,
    ScalingSettings,
)
from ._workload import EchoProbe, ImageGeneration, LLMCompletion, Workload, WorkloadOptions

__all__ = [
    "BillingModel",
    "Burst",
    "Capabilities",
    "CapabilityError",
    "ClientHTTPError",
    "ColdCheck",
    "ColdStarts",
    "ColdTimeoutError",
    "ConfigError",
    "EchoProbe",
    "FleetState",
    "GpubenchError",
    "HTTPStatusError",
    "ImageGeneration",
    "InvalidResponseError",
    "Invocation",
    "LLMCompletion",
    "LocalProvider",
    "LocalRuntime",
    "LocalRuntimeConfig",
    "Outcome",
    "Phase",
    "PluginError",
    "PluginInfo",
    "PluginLoadError",
    "PluginNotFoundError",
    "Provider",
    "ProviderError",
    "ProviderOptions",
    "Rate",
    "Request",
    "RequestTimeoutError",
    "Result",
    "RunConfig",
    "RunInfo",
    "RunResult",
    "Runner",
    "ScalingSettings",
    "Scenario",
    "ServerHTTPError",
    "Store",
    "StoreError",
    "SummaryRow",
    "Target",
    "ThrottledError",
    "TransportError",
    "Workload",
    "WorkloadOptions",
    "__version__",
    "build_run",
    "first_byte_ns",
    "list_plugins",
    "load_config",
    "load_provider",
    "make_client",
    "provider_class",
    "run",
    "run_processes",
    "summarize",
    "workload_class",
]
