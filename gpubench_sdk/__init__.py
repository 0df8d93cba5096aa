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

from ._base._lazy import lazy_getattr as _lazy_getattr
from ._base._version import __version__

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
    from ._base._errors import (
        CapabilityError,
        ClientHTTPError,
        ColdTimeoutError,
        ConfigError,
        GpubenchError,
        HTTPStatusError,
        InvalidResponseError,
        JobCancelledError,
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
    from ._base._secrets import RedactingFilter, redact, remember, scrub_url
    from ._base._types import (
        ColdCheck,
        FleetState,
        Invocation,
        Outcome,
        Phase,
        Request,
        Result,
        ScalingSettings,
    )
    from ._base._validate import validate_options, whole_number
    from ._contract._audio import Transcription, TranscriptionOptions
    from ._contract._capabilities import BillingModel, Capabilities
    from ._contract._chat import LLMChat
    from ._contract._cloud import SavedSettings, sdk_error, sdk_errors
    from ._contract._control import (
        held_json_call,
        ingress_call,
        lower_min_workers,
        read_scaling,
        shielded,
        wait_cold,
    )
    from ._contract._embeddings import Embeddings, EmbeddingsOptions
    from ._contract._error_text import error_text, reclassified
    from ._contract._inferred_cold import ColdThresholdOptions
    from ._contract._ingress import IngressOptions
    from ._contract._input import InputMap
    from ._contract._job_state import job_state
    from ._contract._jobs import Job, Polling, naming_errors, run_job
    from ._contract._kit import (
        ColdMark,
        PollingOptions,
        SavedScaling,
        WarmBaseline,
        describe_error,
        error_for_status,
        finite_number,
        http_result,
        json_body,
        json_event,
        json_or_text,
        json_result,
        raise_for_stream,
        refused_as_config,
        reported_time,
        required,
        run_polled,
        scaling_fields,
        send_checked,
        status_error,
        stream_error,
        with_capabilities,
    )
    from ._contract._lengths import Length, LengthDistribution, draw_length
    from ._contract._media import data_url, from_data_url
    from ._contract._provider import KeyScheme, Provider, ProviderOptions, key_headers
    from ._contract._sender import Sender
    from ._contract._template import compile_json_template
    from ._contract._times import iso_seconds, span_ms
    from ._contract._vision import VisionChat, VisionChatOptions
    from ._contract._workload import (
        EchoProbe,
        ImageGeneration,
        LLMCompletion,
        TokenWorkload,
        Workload,
        WorkloadOptions,
    )
    from ._local import LocalProvider, LocalRuntime, LocalRuntimeConfig
    from ._plan._build import build_run
    from ._plan._config import RunConfig, load_config
    from ._plan._thresholds import Threshold, ThresholdReport
    from ._plugins import PluginInfo, list_plugins, load_provider, load_workload
    from ._ray import run_on_ray
    from ._report import DailyTraffic, build_report, render_report
    from ._report._summary import SummaryRow, summarize
    from ._runner._multiproc import run_processes
    from ._runner._results import RunResult, Target, classify
    from ._runner._runner import Runner, run
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
        Users,
    )
    from ._store._store import RunInfo, Store
    from ._transport._call import CallResponse, PreparedCall
    from ._transport._client import as_provider_error, first_byte_ns, make_client, retry_after_s
    from ._transport._responses import invalid_response, json_object
    from ._transport._sse import SSEParser, arrived_ns, sse_events
    from .campaign._judge import check_thresholds

# name -> the private module that defines it, group by group (see __all__)
_EXPORTS: dict[str, str] = {
    # Running a benchmark
    "run": "._runner._runner",
    "Runner": "._runner._runner",
    "RunResult": "._runner._results",
    "Target": "._runner._results",
    "RunConfig": "._plan._config",
    "load_config": "._plan._config",
    "build_run": "._plan._build",
    "run_processes": "._runner._multiproc",
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
    "Users": "._scenarios",
    # Records
    "Request": "._base._types",
    "Result": "._base._types",
    "Invocation": "._base._types",
    "Outcome": "._base._types",
    "Phase": "._base._types",
    "ColdCheck": "._base._types",
    "FleetState": "._base._types",
    "ScalingSettings": "._base._types",
    # Results and verdicts
    "Store": "._store._store",
    "RunInfo": "._store._store",
    "summarize": "._report._summary",
    "SummaryRow": "._report._summary",
    "Threshold": "._plan._thresholds",
    "ThresholdReport": "._plan._thresholds",
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
    "Provider": "._contract._provider",
    "ProviderOptions": "._contract._provider",
    "KeyScheme": "._contract._provider",
    "Capabilities": "._contract._capabilities",
    "BillingModel": "._contract._capabilities",
    "InputMap": "._contract._input",
    "Workload": "._contract._workload",
    "WorkloadOptions": "._contract._workload",
    "EchoProbe": "._contract._workload",
    "LLMCompletion": "._contract._workload",
    "TokenWorkload": "._contract._workload",
    "ImageGeneration": "._contract._workload",
    "LLMChat": "._contract._chat",
    "Embeddings": "._contract._embeddings",
    "EmbeddingsOptions": "._contract._embeddings",
    "Transcription": "._contract._audio",
    "TranscriptionOptions": "._contract._audio",
    "VisionChat": "._contract._vision",
    "VisionChatOptions": "._contract._vision",
    "Length": "._contract._lengths",
    "LengthDistribution": "._contract._lengths",
    "draw_length": "._contract._lengths",
    "PluginInfo": "._plugins",
    "list_plugins": "._plugins",
    "load_provider": "._plugins",
    "load_workload": "._plugins",
    # The plugin kit
    "make_client": "._transport._client",
    "PreparedCall": "._transport._call",
    "CallResponse": "._transport._call",
    "first_byte_ns": "._transport._client",
    "arrived_ns": "._transport._sse",
    "as_provider_error": "._transport._client",
    "retry_after_s": "._transport._client",
    "classify": "._runner._results",
    "invalid_response": "._transport._responses",
    "json_object": "._transport._responses",
    "SSEParser": "._transport._sse",
    "sse_events": "._transport._sse",
    "redact": "._base._secrets",
    "RedactingFilter": "._base._secrets",
    "remember": "._base._secrets",
    "scrub_url": "._base._secrets",
    "validate_options": "._base._validate",
    "Job": "._contract._jobs",
    "Polling": "._contract._jobs",
    "run_job": "._contract._jobs",
    "naming_errors": "._contract._jobs",
    "job_state": "._contract._job_state",
    # The plugin kit: shared protocol pieces
    "ColdMark": "._contract._kit",
    "ColdThresholdOptions": "._contract._inferred_cold",
    "PollingOptions": "._contract._kit",
    "run_polled": "._contract._kit",
    "SavedScaling": "._contract._kit",
    "WarmBaseline": "._contract._kit",
    "describe_error": "._contract._kit",
    "error_for_status": "._contract._kit",
    "finite_number": "._contract._kit",
    "whole_number": "._base._validate",
    "reported_time": "._contract._kit",
    "required": "._contract._kit",
    "refused_as_config": "._contract._kit",
    "http_result": "._contract._kit",
    "json_body": "._contract._kit",
    "json_event": "._contract._kit",
    "json_or_text": "._contract._kit",
    "json_result": "._contract._kit",
    "key_headers": "._contract._provider",
    "raise_for_stream": "._contract._kit",
    "scaling_fields": "._contract._kit",
    "send_checked": "._contract._kit",
    "status_error": "._contract._kit",
    "stream_error": "._contract._kit",
    "with_capabilities": "._contract._kit",
    "compile_json_template": "._contract._template",
    "error_text": "._contract._error_text",
    "iso_seconds": "._contract._times",
    "span_ms": "._contract._times",
    "data_url": "._contract._media",
    "from_data_url": "._contract._media",
    "Sender": "._contract._sender",
    "reclassified": "._contract._error_text",
    # The plugin kit: control-plane pieces
    "SavedSettings": "._contract._cloud",
    "IngressOptions": "._contract._ingress",
    "sdk_error": "._contract._cloud",
    "sdk_errors": "._contract._cloud",
    "held_json_call": "._contract._control",
    "ingress_call": "._contract._control",
    "lower_min_workers": "._contract._control",
    "read_scaling": "._contract._control",
    "shielded": "._contract._control",
    "wait_cold": "._contract._control",
    # The error tree
    "CapabilityError": "._base._errors",
    "ClientHTTPError": "._base._errors",
    "ColdTimeoutError": "._base._errors",
    "ConfigError": "._base._errors",
    "GpubenchError": "._base._errors",
    "HTTPStatusError": "._base._errors",
    "InvalidResponseError": "._base._errors",
    "JobCancelledError": "._base._errors",
    "PluginError": "._base._errors",
    "PluginLoadError": "._base._errors",
    "PluginNotFoundError": "._base._errors",
    "ProviderError": "._base._errors",
    "RequestTimeoutError": "._base._errors",
    "ServerHTTPError": "._base._errors",
    "StoreError": "._base._errors",
    "ThrottledError": "._base._errors",
    "TransportError": "._base._errors",
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
    "Users",
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
    "KeyScheme",
    "Capabilities",
    "BillingModel",
    "InputMap",
    "Workload",
    "WorkloadOptions",
    "EchoProbe",
    "LLMCompletion",
    "TokenWorkload",
    "ImageGeneration",
    "LLMChat",
    "Embeddings",
    "EmbeddingsOptions",
    "Transcription",
    "TranscriptionOptions",
    "VisionChat",
    "VisionChatOptions",
    "Length",
    "LengthDistribution",
    "draw_length",
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
    "arrived_ns",
    "as_provider_error",
    "retry_after_s",
    "classify",
    "invalid_response",
    "json_object",
    "SSEParser",
    "sse_events",
    "redact",
    "RedactingFilter",
    "remember",
    "scrub_url",
    "validate_options",
    "Job",
    "Polling",
    "run_job",
    "naming_errors",
    "job_state",
    # The plugin kit: shared protocol pieces: small pieces several plugins need the same way
    # (``_contract._kit``; JSON templates: ``_contract._template``; error bodies' text:
    # ``_contract._error_text``; server timestamps: ``_contract._times``).
    "ColdMark",
    "ColdThresholdOptions",
    "PollingOptions",
    "run_polled",
    "SavedScaling",
    "WarmBaseline",
    "describe_error",
    "error_for_status",
    "finite_number",
    "whole_number",
    "reported_time",
    "required",
    "refused_as_config",
    "http_result",
    "json_body",
    "json_event",
    "json_or_text",
    "json_result",
    "key_headers",
    "raise_for_stream",
    "scaling_fields",
    "send_checked",
    "status_error",
    "stream_error",
    "with_capabilities",
    "compile_json_template",
    "error_text",
    "iso_seconds",
    "span_ms",
    "data_url",
    "from_data_url",
    "Sender",
    "reclassified",
    # The plugin kit: control-plane pieces: a provider's scaling read, ensure_cold's first step
    # and wait, a restore that outlives a cancelled run, a held JSON call judged cold
    # (``_contract._control``).
    "held_json_call",
    "ingress_call",
    "lower_min_workers",
    "read_scaling",
    "shielded",
    "wait_cold",
    # The plugin kit: a cloud SDK's control plane: its exceptions as gpubench's errors, the
    # user's settings of any shape put back on close (``_contract._cloud``).
    "SavedSettings",
    "sdk_error",
    "sdk_errors",
    # ... and the options of a service invoked by a held POST to its own URL (``_ingress``).
    "IngressOptions",
    # The error tree: every error gpubench raises, rooted at ``GpubenchError`` (docs/errors.md).
    "CapabilityError",
    "ClientHTTPError",
    "ColdTimeoutError",
    "ConfigError",
    "GpubenchError",
    "HTTPStatusError",
    "InvalidResponseError",
    "JobCancelledError",
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


def _deprecated(name: str) -> object:
    if name not in _DEPRECATED:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    home, instead = _DEPRECATED[name]
    _warnings.warn(
        f"gpubench_sdk.{name} is private now; use {instead}",
        DeprecationWarning,
        stacklevel=3,  # the caller's line, past the lazy __getattr__
    )
    return getattr(_importlib.import_module(home, __name__), name)


# later lookups of an export skip this function (it is kept in globals())
__getattr__ = _lazy_getattr(__name__, _EXPORTS, globals(), missing=_deprecated)


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
