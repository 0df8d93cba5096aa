"""``InferlessProvider``: an Inferless model's KServe v2 ``infer`` URL, plain or streamed (SSE).

Inferless exposes no job, status or timing API (PROVIDERS.md), so every figure is the client's,
and a cold start can only be inferred: a request far slower than the running warm median.
"""

from __future__ import annotations

import contextlib
import time
import uuid
from collections.abc import Mapping
from typing import Any

import httpx
from pydantic import Field, model_validator

import gpubench_sdk as sdk
from gpubench_sdk.cost import load_catalog

from . import _kserve as kserve

# Per second of GPU, cold boot and idle included; the rules and their sources live in the
# cost catalog (gpubench_sdk/cost/data/prices.json), with the shared A100's price.
BILLING = load_catalog().billing_model("inferless")
WARM_WINDOW = 50  # warm latencies the running median is taken over


# Options this plugin once had of its own, now the shared ``input`` map's (``InputMap``) work.
_MOVED = {"input_names": "rename", "omit": "drop"}


_SSE = {"Accept": "text/event-stream"}


class InferlessOptions(sdk.ProviderOptions):
    """One Inferless model: its ``infer`` URL and how its inputs are typed and outputs read.

    The workload's payload is first mapped onto the model's input names by the ``input``
    option every provider has (``InputMap``: rename, drop, set, template); each key of what
    comes out is one input tensor, typed by ``datatypes``.
    """

    url: str = Field(
        pattern=r"^https?://",
        description="the model's infer URL, e.g. https://m-<id>-m.default.model-v2.inferless.com"
        "/v2/models/<name>_<id>/versions/1/infer",
    )
    datatypes: dict[str, kserve.DataType] = Field(
        default_factory=dict,
        description="input name (after the input map) -> KServe datatype "
        "(default: BYTES for text, INT64, FP32, BOOL)",
    )
    output_name: str | None = Field(
        default=None, description="return only this output tensor (default: all, by name)"
    )
    cold_threshold_ms: float = Field(
        default=3000.0, gt=0, description="an inferred cold start is at least this slow"
    )
    cold_factor: float = Field(
        default=3.0, ge=1.0, description="...and at least this many times the warm median"
    )

    @model_validator(mode="before")
    @classmethod
    def _moved_to_input(cls, data: Any) -> Any:
        # Removed, not aliased: one way to map inputs, the same on every provider. A plan that
        # still uses the old names learns the exact replacement instead of "unknown key".
        if isinstance(data, Mapping):
            for old, new in _MOVED.items():
                if old in data:
                    raise sdk.ConfigError(
                        old,
                        data[old],
                        f"the shared input map: write it as input.{new} "
                        f"([targets.input] {new} = ... in a plan; "
                        f"input=InputMap({new}=...) in Python)",
                    )
        return data


class InferlessProvider(sdk.Provider):
    """Inferless serverless GPU models over KServe v2, with SSE streaming when the model streams.

    Each request carries a fresh ``id`` (echoed by KServe servers; the request id stored).
    ``cold`` is inferred from latency (time to the first event when streamed) against the
    median of the last 50 warm ones, never confirmed: Inferless reports no server timings.
    """

    name = "inferless"
    capabilities = sdk.Capabilities(
        streaming=True,
        billing=BILLING,
        # inferless.yaml: min_replica, max_replica, scale_down_delay (PROVIDERS.md)
        scaling_knobs=frozenset({"min_workers", "max_workers", "scale_down_s"}),
    )
    options: InferlessOptions

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        o = self.options
        self._warm = sdk.WarmBaseline(o.cold_threshold_ms, o.cold_factor, WARM_WINDOW)

    async def open(self) -> None:
        o = self.options
        self._url = httpx.URL(o.url)  # parsed once: it costs microseconds per request
        self._send = sdk.Sender.of(self, self._http_error)

    async def invoke(self, request: sdk.Request) -> sdk.Result:
        o = self.options
        request_id = uuid.uuid4().hex
        inputs = kserve.encode_inputs(request.payload, o.datatypes)  # already input-mapped
        body = {"id": request_id, "inputs": inputs}
        send_ns = time.perf_counter_ns()
        if request.stream:
            return await self._stream(body, send_ns)
        response = await self._send("POST", self._url, body)
        return self._answer(response, request_id, send_ns)

    def _answer(self, response: httpx.Response, request_id: str, send_ns: int) -> sdk.Result:
        """A whole KServe v2 response (read) as the result."""
        o = self.options
        try:
            data = response.json()
            if not isinstance(data, dict):
                raise ValueError("not a JSON object")
            outputs = kserve.decode_tensors(data.get("outputs"))
        except ValueError as exc:
            problem = f"not a KServe v2 response: {exc}"
            raise sdk.invalid_response(response, problem, provider=self.name) from exc
        if o.output_name is not None and o.output_name not in outputs:
            problem = f"no output {o.output_name!r} among {sorted(outputs)}"
            raise sdk.invalid_response(response, problem, provider=self.name)
        output = outputs if o.output_name is None else outputs[o.output_name]
        request_id = str(data.get("id") or request_id)
        return self._result(output, response, request_id, send_ns, [])

    async def _stream(self, body: dict[str, Any], send_ns: int) -> sdk.Result:
        """SSE: each ``data:`` event is one piece of output (JSON where it parses)."""
        chunks: list[Any] = []
        times: list[int] = []
        # A timeout or broken connection leaves through invoke's boundary as the core's
        # ProviderError (as_provider_error), naming the call.
        async with self._send.stream("POST", self._url, body, _SSE) as response:
            if not response.headers.get("content-type", "").startswith("text/event-stream"):
                # the model does not stream: its answer is one plain KServe response
                await response.aread()
                return self._answer(response, str(body["id"]), send_ns)
            async for _, data, at_ns in sdk.sse_events(response):
                chunk = sdk.json_or_text(data)
                if isinstance(chunk, dict) and "error" in chunk:
                    status = response.status_code
                    raise sdk.stream_error(chunk["error"], provider=self.name, status_code=status)
                if isinstance(chunk, dict) and "outputs" in chunk:
                    with contextlib.suppress(ValueError):  # a KServe response per event
                        chunk = kserve.decode_tensors(chunk["outputs"])
                chunks.append(chunk)
                times.append(at_ns)
        return self._result(chunks, response, str(body["id"]), send_ns, times)

    def _result(
        self,
        output: Any,
        response: httpx.Response,
        request_id: str,
        send_ns: int,
        times: list[int],
    ) -> sdk.Result:
        """Cold when the wait is at least ``cold_threshold_ms`` and ``cold_factor`` x the warm
        median; the estimate is the excess over that median (none before any warm request)."""
        # Streamed, the wait for the first event is what a cold start lengthens; else the whole.
        waited_ms = ((times[0] if times else time.perf_counter_ns()) - send_ns) / 1e6
        median_ms = self._warm.median_ms  # before a warm wait joins it
        cold = self._warm.cold(waited_ms)
        estimate = {"cold_start_estimate_ms": max(0.0, waited_ms - (median_ms or 0.0))}
        return sdk.http_result(
            response,
            output=output,
            request_id=request_id,
            first_byte_ns=times[0] if times else sdk.first_byte_ns(response),
            cold=cold,
            cold_confirmed=False,  # an inference from latency, never a fact
            token_times_ns=times or None,
            detail=estimate if cold and median_ms is not None else None,
        )

    def _http_error(self, response: httpx.Response) -> sdk.ProviderError:
        """The core's error for a status >= 400 (as_provider_error: the call named, a 429's
        ``Retry-After`` in seconds or as an HTTP date), showing KServe's ``{"error"}`` text, or
        FastAPI's 422 ``{"detail": [{"loc", "msg"}]}`` (kserve's answer to a body that is not
        v2) as ``inputs.0.shape: Field required``: the field named, from the first entry (kserve
        adds a second, about the binary form nobody sent)."""
        detail = sdk.error_text(response, first_only=True, hide_loc=_REQUEST_LOC)
        return sdk.status_error(response, provider=self.name, detail=detail)


_REQUEST_LOC = ("body", "InferenceRequest")  # where in the request, not which field
