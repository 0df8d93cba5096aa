"""gpubench: neutral, reproducible benchmarks of serverless GPU inference providers.

Everything a user or plugin author needs is importable from here; the modules with a leading
underscore are private. ``gpubench_sdk.telemetry`` holds the OpenTelemetry setup helpers.

Names are imported on first use (PEP 562 module ``__getattr__``): ``import gpubench_sdk`` stays
cheap, so code that needs one light submodule inside a container (``gpubench_sdk.probe``, the
local runtime's workers) does not pay for httpx, pydantic, OpenTelemetry and rich.
"""

import importlib as _importlib
import typing as _typing

__version__ = "0.1.0"

if _typing.TYPE_CHECKING:  # the same names, eagerly, for type checkers and IDEs
    from ._advise import (
        Advice,
        BatchAdvice,
        MeasuredTarget,
        Objectives,
        Scoring,
        Traffic,
        advise,
        advise_batch,
        advise_targets,
    )
    from ._capabilities import BillingModel, Capabilities
    from ._config import RunConfig, load_config, validate_options
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
    from ._http import as_provider_error, first_byte_ns, make_client, retry_after_s
    from ._http_call import CallResponse, PreparedCall
    from ._input import InputMap
    from ._jobs import Job, Polling, run_job
    from ._local import LocalProvider, LocalRuntime, LocalRuntimeConfig
    from ._multiproc import run_processes
    from ._plan import build_run
    from ._plugins import PluginInfo, list_plugins, load_provider, provider_class, workload_class
    from ._provider import Provider, ProviderOptions
    from ._ray import run_on_ray
    from ._report import DailyTraffic, build_report, render_report
    from ._responses import invalid_response, json_object
    from ._results import RunResult, Target, classify
    from ._runner import Runner, run
    from ._runner_load import Load
    from ._scenarios import (
        Burst,
        ColdStarts,
        Concurrency,
        MaxRate,
        Rate,
        Replay,
        Scenario,
        Stage,
        Stages,
        Sweep,
    )
    from ._secrets import redact, remember, scrub_url
    from ._sse import SSEParser, sse_events
    from ._store import RunInfo, Store
    from ._summary import SummaryRow, summarize
    from ._thresholds import Threshold, ThresholdReport, check_thresholds
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

# public name -> the private module that defines it
_EXPORTS: dict[str, str] = {
    "Advice": "._advise",
    "Objectives": "._advise",
    "Traffic": "._advise",
    "advise": "._advise",
    "advise_targets": "._advise",
    "advise_batch": "._advise",
    "BatchAdvice": "._advise",
    "MeasuredTarget": "._advise",
    "Scoring": "._advise",
    "BillingModel": "._capabilities",
    "Capabilities": "._capabilities",
    "RunConfig": "._config",
    "load_config": "._config",
    "validate_options": "._config",
    "CapabilityError": "._errors",
    "ClientHTTPError": "._errors",
    "ColdTimeoutError": "._errors",
    "ConfigError": "._errors",
    "GpubenchError": "._errors",
    "HTTPStatusError": "._errors",
    "InvalidResponseError": "._errors",
    "PluginError": "._errors",
    "PluginLoadError": "._errors",
    "PluginNotFoundError": "._errors",
    "ProviderError": "._errors",
    "RequestTimeoutError": "._errors",
    "ServerHTTPError": "._errors",
    "StoreError": "._errors",
    "ThrottledError": "._errors",
    "TransportError": "._errors",
    "as_provider_error": "._http",
    "first_byte_ns": "._http",
    "InputMap": "._input",
    "Job": "._jobs",
    "Polling": "._jobs",
    "run_job": "._jobs",
    "make_client": "._http",
    "retry_after_s": "._http",
    "CallResponse": "._http_call",
    "PreparedCall": "._http_call",
    "LocalProvider": "._local",
    "LocalRuntime": "._local",
    "LocalRuntimeConfig": "._local",
    "run_processes": "._multiproc",
    "build_run": "._plan",
    "run_on_ray": "._ray",
    "PluginInfo": "._plugins",
    "list_plugins": "._plugins",
    "load_provider": "._plugins",
    "provider_class": "._plugins",
    "workload_class": "._plugins",
    "DailyTraffic": "._report",
    "build_report": "._report",
    "render_report": "._report",
    "invalid_response": "._responses",
    "json_object": "._responses",
    "Provider": "._provider",
    "ProviderOptions": "._provider",
    "RunResult": "._results",
    "Target": "._results",
    "classify": "._results",
    "Runner": "._runner",
    "run": "._runner",
    "Load": "._runner_load",
    "Burst": "._scenarios",
    "ColdStarts": "._scenarios",
    "Concurrency": "._scenarios",
    "MaxRate": "._scenarios",
    "Rate": "._scenarios",
    "Replay": "._scenarios",
    "Scenario": "._scenarios",
    "Stage": "._scenarios",
    "Stages": "._scenarios",
    "Sweep": "._scenarios",
    "redact": "._secrets",
    "remember": "._secrets",
    "scrub_url": "._secrets",
    "SSEParser": "._sse",
    "sse_events": "._sse",
    "RunInfo": "._store",
    "Store": "._store",
    "SummaryRow": "._summary",
    "summarize": "._summary",
    "Threshold": "._thresholds",
    "ThresholdReport": "._thresholds",
    "check_thresholds": "._thresholds",
    "ColdCheck": "._types",
    "FleetState": "._types",
    "Invocation": "._types",
    "Outcome": "._types",
    "Phase": "._types",
    "Request": "._types",
    "Result": "._types",
    "ScalingSettings": "._types",
    "EchoProbe": "._workload",
    "ImageGeneration": "._workload",
    "LLMCompletion": "._workload",
    "Workload": "._workload",
    "WorkloadOptions": "._workload",
}

__all__ = [
    "Advice",
    "BatchAdvice",
    "BillingModel",
    "Burst",
    "CallResponse",
    "Capabilities",
    "CapabilityError",
    "ClientHTTPError",
    "ColdCheck",
    "ColdStarts",
    "ColdTimeoutError",
    "Concurrency",
    "ConfigError",
    "DailyTraffic",
    "EchoProbe",
    "FleetState",
    "GpubenchError",
    "HTTPStatusError",
    "ImageGeneration",
    "InputMap",
    "InvalidResponseError",
    "Invocation",
    "Job",
    "LLMCompletion",
    "Load",
    "LocalProvider",
    "LocalRuntime",
    "LocalRuntimeConfig",
    "MaxRate",
    "MeasuredTarget",
    "Objectives",
    "Outcome",
    "Phase",
    "PluginError",
    "PluginInfo",
    "PluginLoadError",
    "PluginNotFoundError",
    "Polling",
    "PreparedCall",
    "Provider",
    "ProviderError",
    "ProviderOptions",
    "Rate",
    "Replay",
    "Request",
    "RequestTimeoutError",
    "Result",
    "RunConfig",
    "RunInfo",
    "RunResult",
    "Runner",
    "SSEParser",
    "ScalingSettings",
    "Scenario",
    "Scoring",
    "ServerHTTPError",
    "Stage",
    "Stages",
    "Store",
    "StoreError",
    "SummaryRow",
    "Sweep",
    "Target",
    "Threshold",
    "ThresholdReport",
    "ThrottledError",
    "Traffic",
    "TransportError",
    "Workload",
    "WorkloadOptions",
    "__version__",
    "advise",
    "advise_batch",
    "advise_targets",
    "as_provider_error",
    "build_report",
    "build_run",
    "check_thresholds",
    "classify",
    "first_byte_ns",
    "invalid_response",
    "json_object",
    "list_plugins",
    "load_config",
    "load_provider",
    "make_client",
    "provider_class",
    "redact",
    "remember",
    "render_report",
    "retry_after_s",
    "run",
    "run_job",
    "run_on_ray",
    "run_processes",
    "scrub_url",
    "sse_events",
    "summarize",
    "validate_options",
    "workload_class",
]


def __getattr__(name: str) -> object:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(_importlib.import_module(module, __name__), name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
