"""gpubench: neutral, reproducible benchmarks of serverless GPU inference providers.

Everything a user or plugin author needs is importable from here; the modules with a leading
underscore are private (docs/architecture.md draws them). The public subpackages are
``gpubench_sdk.metrics`` and ``gpubench_sdk.cost`` (the calculators), ``gpubench_sdk.testing``
(the kit a plugin's tests are written with), ``gpubench_sdk.telemetry`` (OpenTelemetry setup),
``gpubench_sdk.campaign`` and ``gpubench_sdk.probe``.

The names below come in groups, each public for a reason: what an application runs and reads
(running, shapes, records, results, advice), what a plugin implements (the contract), and what
a plugin builds with (the kit and the error tree). Registry plumbing stays private.

Names are imported on first use (PEP 562 module ``__getattr__``): ``import gpubench_sdk`` stays
cheap, so code that needs one light submodule inside a container (``gpubench_sdk.probe``, the
local runtime's workers) does not pay for httpx, pydantic, OpenTelemetry and rich.
"""

import importlib as _importlib
import typing as _typing
import warnings as _warnings

from ._version import __version__

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
    from ._http import as_provider_error, first_byte_ns, make_client, retry_after_s
    from ._http_call import CallResponse, PreparedCall
    from ._input import InputMap
    from ._jobs import Job, Polling, run_job
    from ._local import LocalProvider, LocalRuntime, LocalRuntimeConfig
    from ._multiproc import run_processes
    from ._plan import build_run
    from ._plugin_kit import (
        ColdMark,
        PollingOptions,
        SavedScaling,
        WarmBaseline,
        describe_error,
        error_for_status,
        finite_number,
        json_event,
        json_or_text,
        json_result,
        key_headers,
        raise_for_stream,
        scaling_fields,
        send_checked,
        status_error,
        with_capabilities,
    )
    from ._plugins import PluginInfo, list_plugins, load_provider, load_workload
    from ._provider import Provider, ProviderOptions
    from ._ray import run_on_ray
    from ._report import DailyTraffic, build_report, render_report
    from ._responses import invalid_response, json_object
    from ._results import RunResult, Target, classify
    from ._runner import Runner, run
    from ._scenarios import (
        Burst,
        ColdStarts,
        Concurrency,
        Load,
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
    from ._thresholds import Threshold, ThresholdReport
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
    from ._validate import validate_options
    from ._workload import EchoProbe, ImageGeneration, LLMCompletion, Workload, WorkloadOptions
    from .campaign._judge import check_thresholds

# name -> the private module that defines it, group by group (see __all__)
_EXPORTS: dict[str, str] = {
    # Running a benchmark
    "run": "._runner",
    "Runner": "._runner",
    "RunResult": "._results",
    "Target": "._results",
    "RunConfig": "._config",
    "load_config": "._config",
    "build_run": "._plan",
    "run_processes": "._multiproc",
    "run_on_ray": "._ray",
    "LocalProvider": "._local",
    "LocalRuntime": "._local",
    "LocalRuntimeConfig": "._local",
    # Load shapes
    "Scenario": "._scenarios",
    "Load": "._scenarios",
    "Burst": "._scenarios",
    "Rate": "._scenarios",
    "ColdStarts": "._scenarios",
    "Concurrency": "._scenarios",
    "Stages": "._scenarios",
    "Stage": "._scenarios",
    "Sweep": "._scenarios",
    "MaxRate": "._scenarios",
    "Replay": "._scenarios",
    # Records
    "Request": "._types",
    "Result": "._types",
    "Invocation": "._types",
    "Outcome": "._types",
    "Phase": "._types",
    "ColdCheck": "._types",
    "FleetState": "._types",
    "ScalingSettings": "._types",
    # Results and verdicts
    "Store": "._store",
    "RunInfo": "._store",
    "summarize": "._summary",
    "SummaryRow": "._summary",
    "Threshold": "._thresholds",
    "ThresholdReport": "._thresholds",
    "check_thresholds": ".campaign._judge",
    "build_report": "._report",
    "render_report": "._report",
    "DailyTraffic": "._report",
    # Advice
    "advise": "._advise",
    "advise_targets": "._advise",
    "advise_batch": "._advise",
    "Advice": "._advise",
    "BatchAdvice": "._advise",
    "MeasuredTarget": "._advise",
    "Objectives": "._advise",
    "Scoring": "._advise",
    "Traffic": "._advise",
    # The plugin contract
    "Provider": "._provider",
    "ProviderOptions": "._provider",
    "Capabilities": "._capabilities",
    "BillingModel": "._capabilities",
    "InputMap": "._input",
    "Workload": "._workload",
    "WorkloadOptions": "._workload",
    "EchoProbe": "._workload",
    "LLMCompletion": "._workload",
    "ImageGeneration": "._workload",
    "PluginInfo": "._plugins",
    "list_plugins": "._plugins",
    "load_provider": "._plugins",
    "load_workload": "._plugins",
    # The plugin kit
    "make_client": "._http",
    "PreparedCall": "._http_call",
    "CallResponse": "._http_call",
    "first_byte_ns": "._http",
    "as_provider_error": "._http",
    "retry_after_s": "._http",
    "classify": "._results",
    "invalid_response": "._responses",
    "json_object": "._responses",
    "SSEParser": "._sse",
    "sse_events": "._sse",
    "redact": "._secrets",
    "remember": "._secrets",
    "scrub_url": "._secrets",
    "validate_options": "._validate",
    "Job": "._jobs",
    "Polling": "._jobs",
    "run_job": "._jobs",
    # The plugin kit: shared protocol pieces
    "ColdMark": "._plugin_kit",
    "PollingOptions": "._plugin_kit",
    "SavedScaling": "._plugin_kit",
    "WarmBaseline": "._plugin_kit",
    "describe_error": "._plugin_kit",
    "error_for_status": "._plugin_kit",
    "finite_number": "._plugin_kit",
    "json_event": "._plugin_kit",
    "json_or_text": "._plugin_kit",
    "json_result": "._plugin_kit",
    "key_headers": "._plugin_kit",
    "raise_for_stream": "._plugin_kit",
    "scaling_fields": "._plugin_kit",
    "send_checked": "._plugin_kit",
    "status_error": "._plugin_kit",
    "with_capabilities": "._plugin_kit",
    # The error tree
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
}

# Registry plumbing that was public once: still importable, with a warning, for a release.
_DEPRECATED: dict[str, tuple[str, str]] = {
    "provider_class": ("._plugins", "load_provider(name, ...) or list_plugins()"),
    "workload_class": ("._plugins", "load_workload(kind, ...)"),
}

__all__ = [  # noqa: RUF022 - grouped by purpose; each comment says why the group is public
    # Running a benchmark: what an application calls to run a plan or a list of targets, on one
    # machine, on its cores or on a Ray cluster, and the built-in local runtime that needs no cloud
    # account.
    "run",
    "Runner",
    "RunResult",
    "Target",
    "RunConfig",
    "load_config",
    "build_run",
    "run_processes",
    "run_on_ray",
    "LocalProvider",
    "LocalRuntime",
    "LocalRuntimeConfig",
    # Load shapes: the built-in scenarios, and the two types a third-party shape is written on
    # (``Scenario``, and the ``Load`` it drives).
    "Scenario",
    "Load",
    "Burst",
    "Rate",
    "ColdStarts",
    "Concurrency",
    "Stages",
    "Stage",
    "Sweep",
    "MaxRate",
    "Replay",
    # Records: what goes into and comes out of one request; plugins build them, users read them.
    "Request",
    "Result",
    "Invocation",
    "Outcome",
    "Phase",
    "ColdCheck",
    "FleetState",
    "ScalingSettings",
    # Results and verdicts: the store every request lands in, its summary, the rules a run must hold
    # and the report.
    "Store",
    "RunInfo",
    "summarize",
    "SummaryRow",
    "Threshold",
    "ThresholdReport",
    "check_thresholds",
    "build_report",
    "render_report",
    "DailyTraffic",
    # Advice: ``gpubench advise`` from Python: the cheapest settings that meet an objective.
    "advise",
    "advise_targets",
    "advise_batch",
    "Advice",
    "BatchAdvice",
    "MeasuredTarget",
    "Objectives",
    "Scoring",
    "Traffic",
    # The plugin contract: what a provider or workload plugin implements, the built-in workloads,
    # and finding installed plugins by name.
    "Provider",
    "ProviderOptions",
    "Capabilities",
    "BillingModel",
    "InputMap",
    "Workload",
    "WorkloadOptions",
    "EchoProbe",
    "LLMCompletion",
    "ImageGeneration",
    "PluginInfo",
    "list_plugins",
    "load_provider",
    "load_workload",
    # The plugin kit: what a plugin builds its protocol with, so that timing, error mapping, Retry-
    # After, secrets and job polling behave the same in every plugin.
    "make_client",
    "PreparedCall",
    "CallResponse",
    "first_byte_ns",
    "as_provider_error",
    "retry_after_s",
    "classify",
    "invalid_response",
    "json_object",
    "SSEParser",
    "sse_events",
    "redact",
    "remember",
    "scrub_url",
    "validate_options",
    "Job",
    "Polling",
    "run_job",
    # The plugin kit: shared protocol pieces: small pieces several plugins need the same way
    # (``_plugin_kit``).
    "ColdMark",
    "PollingOptions",
    "SavedScaling",
    "WarmBaseline",
    "describe_error",
    "error_for_status",
    "finite_number",
    "json_event",
    "json_or_text",
    "json_result",
    "key_headers",
    "raise_for_stream",
    "scaling_fields",
    "send_checked",
    "status_error",
    "with_capabilities",
    # The error tree: every error gpubench raises, rooted at ``GpubenchError`` (docs/errors.md).
    "CapabilityError",
    "ClientHTTPError",
    "ColdTimeoutError",
    "ConfigError",
    "GpubenchError",
    "HTTPStatusError",
    "InvalidResponseError",
    "PluginError",
    "PluginLoadError",
    "PluginNotFoundError",
    "ProviderError",
    "RequestTimeoutError",
    "ServerHTTPError",
    "StoreError",
    "ThrottledError",
    "TransportError",
    "__version__",
]


def __getattr__(name: str) -> object:
    module = _EXPORTS.get(name)
    if module is None:
        if name in _DEPRECATED:
            home, instead = _DEPRECATED[name]
            _warnings.warn(
                f"gpubench_sdk.{name} is private now; use {instead}",
                DeprecationWarning,
                stacklevel=2,
            )
            return getattr(_importlib.import_module(home, __name__), name)
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(_importlib.import_module(module, __name__), name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
