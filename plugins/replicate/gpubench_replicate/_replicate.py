"""``ReplicateProvider``: predictions on Replicate models, versions and deployments.

Sources (read 2026-11): HTTP API reference https://replicate.com/docs/reference/http (create on
``/models/{owner}/{name}/predictions``, ``/predictions`` with ``version``,
``/deployments/{owner}/{name}/predictions``; ``GET /predictions/{id}``,
``POST /predictions/{id}/cancel``; ``GET``/``PATCH /deployments/{owner}/{name}`` with
``current_release.configuration.{hardware, min_instances, max_instances}``; 429 body
``{"detail": "Request was throttled. ..."}``); sync mode https://replicate.com/docs/topics/
predictions/create-a-prediction (``Prefer: wait`` holds the request 60 s, ``wait=N`` 1..60,
then the incomplete prediction comes back); deadlines https://replicate.com/changelog/
2025-10-16-prediction-deadlines (``Cancel-After: 1m``; ``aborted`` if it never started);
streaming: replicate-python ``replicate/stream.py`` (``Accept: text/event-stream`` on
``urls.stream``; events output, logs, error, done); billing https://replicate.com/pricing.
"""

from __future__ import annotations

import asyncio
import math
import time
from typing import Any, Literal, Self

import httpx
from pydantic import Field, model_validator

import gpubench_sdk as sdk

from . import _prediction as p

API_URL = "https://api.replicate.com/v1"
MAX_WAIT_S = 60  # Prefer: wait holds a request at most 60 s (and by default)
CANCEL_AFTER_SLACK_S = 5.0  # past a Cancel-After deadline, how long to wait for its status
_NAME = r"^[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+$"

PUBLIC_MODEL_BILLING = sdk.BillingModel(
    granularity_s=1.0,
    billed_phases=frozenset({"execution"}),
    billed_unit="request",
    source="https://replicate.com/pricing (read 2026-06): public models bill only the time "
    "the prediction runs (metrics.predict_time), per second by hardware",
)
PRIVATE_BILLING = sdk.BillingModel(
    granularity_s=1.0,
    billed_phases=frozenset({"cold_boot", "execution", "idle"}),
    source="https://replicate.com/pricing (read 2026-06): deployments and private models bill "
    "setup, idle and run time of every instance, per second by hardware",
)


class ReplicateOptions(sdk.PollingOptions):
    """One Replicate target: exactly one of ``model``, ``version`` or ``deployment``."""

    model: str | None = Field(default=None, pattern=_NAME, description="'owner/name'")
    version: str | None = Field(default=None, pattern=r"^[A-Za-z0-9]+$", description="version id")
    deployment: str | None = Field(default=None, pattern=_NAME, description="'owner/name'")
    private: bool = Field(
        default=False, description="a private model (billed setup + idle + run, like deployments)"
    )
    base_url: str = Field(default=API_URL, description="API base (emulator: <url>/v1)")
    mode: Literal["wait", "poll"] = Field(
        default="wait",
        description="'wait': Prefer: wait (falls back to polling); 'poll': create, then poll "
        "GET /predictions/{id} (cancellable while it runs)",
    )
    wait_s: int = Field(default=MAX_WAIT_S, ge=1, le=MAX_WAIT_S, description="Prefer: wait=N")
    cancel_after: bool = Field(
        default=True, description="send Cancel-After = timeout_s, so Replicate ends it too"
    )
    poll_interval_s: float = Field(default=0.1, gt=0, description="first poll delay")
    poll_max_interval_s: float = Field(default=2.0, gt=0, description="backoff cap")
    cold_threshold_ms: float = Field(
        default=5000.0,
        gt=0,
        description="a starting phase (started_at - created_at) at least this long is cold",
    )
    cold_factor: float = Field(
        default=3.0, ge=1.0, description="...and at least this many times the warm median"
    )
    scale_down_wait_s: float = Field(
        default=300.0,
        ge=0,
        description="ensure_cold: how long idle instances linger after min_instances 0 "
        "(Replicate publishes no figure; set what you observe)",
    )

    @model_validator(mode="after")
    def _one_target(self) -> Self:
        given = [n for n in ("model", "version", "deployment") if getattr(self, n)]
        if len(given) != 1:
            raise ValueError(
                f"set exactly one of model ('owner/name'), version (an id) or deployment "
                f"('owner/name'); got {given or 'none'}"
            )
        return self


class ReplicateProvider(p.PredictionProvider):
    """Replicate predictions with ``Prefer: wait`` (or polling), ``Cancel-After``, cancel on
    abandon, SSE streaming and, for deployments, ``min_instances``/``max_instances``.

    ``started_at - created_at`` becomes ``queue_ms`` (queue and any setup) and
    ``metrics.predict_time`` (seconds) ``execution_ms``. A prediction is *inferred* cold when its
    starting phase is at least ``cold_threshold_ms`` and ``cold_factor`` times the median of
    the warm ones seen so far: Replicate has no API listing live instances.
    """

    name = "replicate"
    capabilities = sdk.Capabilities(
        streaming=True,
        cold_start_control=True,
        scaling_settings=True,
        server_timings=frozenset({"queue_ms", "execution_ms"}),
        billing=PRIVATE_BILLING,
        # deployments: min_instances, max_instances; idle instances linger as Replicate
        # decides (PROVIDERS.md)
        scaling_knobs=frozenset({"min_workers", "max_workers"}),
    )
    options: ReplicateOptions

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        o = self.options
        if not (o.deployment or o.private):  # public models bill run time only
            # Per instance: the class declares the deployment rules, the most a target bills.
            sdk.with_capabilities(self, billing=PUBLIC_MODEL_BILLING)
        # the median starting phase of the last 50 warm predictions
        self._warm = sdk.WarmBaseline(o.cold_threshold_ms, o.cold_factor)
        self._scaling = sdk.SavedScaling(self.get_scaling, self._patch_scaling)

    @property
    def endpoint(self) -> str:
        o = self.options
        base = o.base_url.rstrip("/")
        if o.deployment:
            return f"{base}/deployments/{o.deployment}"
        if o.model:
            return f"{base}/models/{o.model}"
        return f"{base}/predictions"

    async def open(self) -> None:
        o = self.options
        self._api = httpx.URL(o.base_url.rstrip("/") + "/")
        self._create_url = httpx.URL(
            self.endpoint + ("/predictions" if o.deployment or o.model else "")
        )
        await super().open()
        self._create_headers: dict[str, str] = {}
        if o.cancel_after:
            # Go-style duration, as in Replicate's example ("1m"); whole seconds, at least 1.
            self._create_headers["Cancel-After"] = f"{max(1, math.ceil(o.timeout_s))}s"

    async def close(self) -> None:
        await self._scaling.restore()

    # ----- requests -------------------------------------------------------------------------

    async def invoke(self, request: sdk.Request) -> sdk.Result:
        o = self.options
        # With Cancel-After, Replicate ends the prediction at timeout_s itself: read how.
        timeout_s = o.timeout_s + (CANCEL_AFTER_SLACK_S if o.cancel_after else 0.0)
        return await sdk.run_polled(self, _Prediction(self, request), timeout_s=timeout_s)

    def _url(self, prediction: dict[str, Any], kind: Literal["get", "cancel"]) -> httpx.URL:
        urls = prediction.get("urls")
        given = urls.get(kind) if isinstance(urls, dict) else None
        if isinstance(given, str) and given.startswith(("http://", "https://")):
            return httpx.URL(given)
        suffix = "/cancel" if kind == "cancel" else ""
        return self._api.join(f"predictions/{prediction['id']}{suffix}")

    def _infer_cold(self, queue_ms: float | None) -> bool | None:
        """A long ``starting`` phase is a cold boot: above the threshold and well above the
        warm baseline (the median starting phase of the last 50 warm predictions)."""
        return None if queue_ms is None else self._warm.cold(queue_ms)

    # ----- deployments: scaling and cold starts -----------------------------------------------

    def _deployment_url(self) -> httpx.URL:
        expected = "a deployment target: only deployments have scaling settings"
        deployment = sdk.required(self.options.deployment, "deployment", expected)
        return self._api.join(f"deployments/{deployment}")

    async def get_scaling(self) -> sdk.ScalingSettings:
        """``current_release.configuration``'s ``min_instances``/``max_instances``; Replicate
        has no idle-timeout setting, so ``idle_timeout_s`` is None."""
        release = (await self._send.json("GET", self._deployment_url())).get("current_release")
        config = release.get("configuration") if isinstance(release, dict) else None
        return sdk.read_scaling(
            config if isinstance(config, dict) else {},
            "min_instances",
            "max_instances",
            provider=self.name,
            where="the deployment's current_release.configuration",
        )

    async def set_scaling(self, settings: sdk.ScalingSettings) -> None:
        """PATCH the given instance bounds; restored in ``close()``."""
        if settings.idle_timeout_s is not None:
            expected = "None: Replicate deployments have no idle-timeout setting"
            raise sdk.ConfigError("scaling.idle_timeout_s", settings.idle_timeout_s, expected)
        await self._scaling.change(settings)

    async def _patch_scaling(self, settings: sdk.ScalingSettings) -> None:
        changes = sdk.scaling_fields(settings, "min_instances", "max_instances")
        if not changes:
            return
        with sdk.refused_as_config("scaling", changes, "Replicate"):
            await self._send("PATCH", self._deployment_url(), changes)

    async def ensure_cold(self, timeout_s: float) -> sdk.ColdCheck:
        """Set ``min_instances`` 0 (deployments) and wait ``scale_down_wait_s``.

        Never *confirmed*: Replicate has no API that lists live instances, so whether the
        instances really stopped is inferred afterwards from the next starting phase.
        """
        started = time.monotonic()
        o = self.options
        steps = []
        if o.deployment:
            was = (await sdk.lower_min_workers(self)).min_workers
            steps.append(f"min_instances {was} -> 0" if was else "min_instances already 0")
        wait_s = min(o.scale_down_wait_s, max(0.0, timeout_s - (time.monotonic() - started)))
        await asyncio.sleep(wait_s)
        steps.append(f"waited {wait_s:g} s of scale_down_wait_s={o.scale_down_wait_s:g}")
        how = "; ".join(steps) + " (no instance API: cold inferred, not confirmed)"
        return sdk.ColdCheck(confirmed=False, waited_s=time.monotonic() - started, how=how)


class _Prediction(sdk.Job[dict[str, Any]]):
    """One prediction: created (held by ``Prefer: wait``, or then read as SSE from
    ``urls.stream``), polled at ``urls.get`` until it has ended, cancelled at ``urls.cancel``."""

    terminal = p.TERMINAL_STATES

    def __init__(self, provider: ReplicateProvider, request: sdk.Request) -> None:
        o = self.p = provider
        self.stream = request.stream
        self.body: dict[str, Any] = {"input": dict(request.payload)}
        if o.options.version:
            self.body["version"] = o.options.version
        self.headers = dict(o._create_headers)
        if request.stream:
            self.body["stream"] = True  # older API versions return urls.stream only when asked
        elif o.options.mode == "wait":
            self.headers["Prefer"] = f"wait={o.options.wait_s}"
        self.chunks: list[Any] = []
        self.first_ns: int | None = None

    async def submit(self) -> dict[str, Any] | None:
        self.began = time.monotonic()
        self.response = await self.p._send("POST", self.p._create_url, self.body, self.headers)
        self.created = self.p._prediction(self.response)
        self.id = self.created["id"]
        if not self.stream:
            return self.created
        await self._read_stream()
        return None  # read at once: the stream's end is not the prediction's

    async def _read_stream(self) -> None:
        """Read ``urls.stream`` (SSE): the first ``output`` event is the first byte."""
        pv, urls = self.p, self.created.get("urls")
        stream_url = urls.get("stream") if isinstance(urls, dict) else None
        if not isinstance(stream_url, str):
            raise sdk.InvalidResponseError(
                "the model does not stream (no urls.stream)", provider=pv.name
            )
        headers = {"Accept": "text/event-stream", "Cache-Control": "no-store"}
        try:
            async with pv._send.stream("GET", stream_url, headers=headers) as response:
                async for event, data, arrived_ns in sdk.sse_events(response):
                    if event == "output":
                        self.first_ns = self.first_ns or arrived_ns
                        self.chunks.append(sdk.json_or_text(data))
                    elif event == "error":
                        raise sdk.stream_error(data, provider=pv.name)
                    elif event == "done":
                        break
        except httpx.HTTPError as exc:
            raise sdk.TransportError(sdk.describe_error(exc), provider=pv.name) from exc

    async def status(self) -> dict[str, Any]:
        self.response = await self.p._send("GET", self.p._url(self.created, "get"))
        return self.p._prediction(self.response)

    async def result(self, state: dict[str, Any]) -> sdk.Result:
        o = self.p.options
        deadline_passed = time.monotonic() - self.began >= o.timeout_s - 0.5
        self.p._check_outcome(state, deadline_passed and o.cancel_after)
        queue_ms, execution_ms = p.phases_ms(state)
        return sdk.Result(
            output=self.chunks if self.stream else state.get("output"),
            http_status=200,
            request_id=state["id"],
            first_byte_ns=self.first_ns if self.stream else sdk.first_byte_ns(self.response),
            queue_ms=queue_ms,
            execution_ms=execution_ms,
            cold=self.p._infer_cold(queue_ms),
        )

    async def cancel(self) -> None:
        await self.p._send("POST", self.p._url(self.created, "cancel"))
