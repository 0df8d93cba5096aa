"""``CloudRunProvider``: a Cloud Run service with GPUs, invoked over HTTPS and controlled
through the Cloud Run Admin API v2 (``google.cloud.run_v2``)."""

from __future__ import annotations

import functools
import time
import uuid
from dataclasses import dataclass
from typing import Any, Literal, Self

import anyio
import httpx
from pydantic import Field, model_validator

import gpubench_sdk as sdk
from gpubench_sdk.cost import load_catalog

from ._admin import ServiceAdmin, ServiceInfo
from ._auth import CachedIdToken, IdTokenSource, google_id_token

# A template label whose new value makes Cloud Run roll a new revision (any template change
# does: https://cloud.google.com/run/docs/resource-model#revisions). Label values allow
# lowercase letters and digits (https://cloud.google.com/run/docs/configuring/services/labels).
ROLL_LABEL = "gpubench-cold-roll"
# Cloud Run may keep an idle instance around for up to 15 minutes after its last request
# (https://cloud.google.com/run/docs/about-instance-autoscaling, "idle instances").
DEFAULT_IDLE_RECLAIM_S = 900.0
RESTORE_TIMEOUT_S = 600.0  # a revision roll takes seconds to minutes
TIMEOUT_MARGIN_S = 0.05


class CloudRunOptions(sdk.IngressOptions):
    """Options of a Cloud Run target.

    ``service`` (``projects/P/locations/L/services/S``) turns on the Admin API: the URL is read
    from it and cold starts can be forced. ``url`` alone benchmarks a service without it.
    """

    service: str | None = Field(
        default=None,
        pattern=r"^projects/[^/]+/locations/[^/]+/services/[^/]+$",
        description="full resource name: projects/P/locations/L/services/S",
    )
    url: str | None = Field(default=None, description="the service URL (default: its uri)")
    auth_mode: Literal["google", "token", "none"] | None = Field(
        default=None,
        description="'google': ID tokens from google-auth (default); 'token': api_key is an "
        "ID token you minted (gcloud auth print-identity-token); 'none': a public service",
    )
    audience: str | None = Field(default=None, description="ID token audience (default: url)")
    admin_endpoint: str | None = Field(
        default=None, description="Admin API host (default run.googleapis.com; a fake's URL)"
    )
    admin_login: Literal["adc", "anonymous"] = Field(
        default="adc",
        description="'adc': Application Default Credentials; 'anonymous': a local fake only",
    )
    admin_timeout_s: float = Field(default=RESTORE_TIMEOUT_S, gt=0)
    roll_revision: bool = Field(
        default=True, description="ensure_cold rolls a new revision (confirms the cold start)"
    )
    idle_reclaim_s: float = Field(
        default=DEFAULT_IDLE_RECLAIM_S,
        ge=0,
        description="how long ensure_cold waits for idle instances to be reclaimed",
    )

    @model_validator(mode="after")
    def _check_target(self) -> Self:
        if self.service is None and self.url is None:
            raise ValueError("give 'service' (projects/P/locations/L/services/S) or 'url'")
        if self.auth_mode == "token" and self.api_key is None:
            raise ValueError("auth_mode = 'token' needs api_key_env or api_key_file (an ID token)")
        return self


@dataclass(frozen=True, slots=True)
class _UserSettings:
    """The user's settings before ``ensure_cold`` changed them, put back by ``close()``."""

    min_instances: int
    labels: dict[str, str]


class CloudRunProvider(sdk.Provider):
    """Cloud Run: POST the payload as JSON to the service URL; read and change the service's
    scaling with the Admin API v2 to force cold starts, and put it back in ``close()``.

    Cloud Run reports no server timings and has no API listing live instances, so a request
    is marked cold only after ``ensure_cold`` (confirmed when a new revision was rolled and
    ``idle_reclaim_s`` waited out), or inferred from ``cold_threshold_ms`` when set.
    """

    name = "cloudrun"
    capabilities = sdk.Capabilities(
        cold_start_control=True,
        billing=load_catalog().billing_model("cloudrun"),
        # min/max_instance_count and --concurrency; no setting for how long an idle instance
        # lives (PROVIDERS.md; cloud.google.com/run/docs/about-concurrency)
        scaling_knobs=frozenset({"min_workers", "max_workers", "concurrency"}),
    )
    options: CloudRunOptions

    def __init__(
        self,
        options: sdk.ProviderOptions | None = None,
        *,
        client: httpx.AsyncClient | None = None,
        token_source: IdTokenSource | None = None,
        **fields: Any,
    ) -> None:
        super().__init__(options, client=client, **fields)
        self._token_source = token_source or google_id_token
        self._admin: ServiceAdmin | None = None
        self._id_token: CachedIdToken | None = None
        self._saved = sdk.SavedSettings[_UserSettings](self._put_back)
        self._cold = sdk.ColdMark(self.options.cold_threshold_ms)
        self.service_info: ServiceInfo | None = None

    @property
    def endpoint(self) -> str | None:
        url = self.options.url or (self.service_info.uri if self.service_info else None)
        return sdk.scrub_url(url).split("?", 1)[0] if url else self.options.service

    @property
    def invoker_auth(self) -> str:
        o = self.options
        return o.auth_mode or ("token" if o.api_key is not None else "google")

    async def open(self) -> None:
        o = self.options
        if o.service is not None:
            # importing run_v2 and building its clients takes a while: not on the loop
            self._admin = await anyio.to_thread.run_sync(
                functools.partial(
                    ServiceAdmin,
                    o.service,
                    endpoint=o.admin_endpoint,
                    anonymous=o.admin_login == "anonymous",
                    timeout_s=o.admin_timeout_s,
                )
            )
            self.service_info = await self._admin.info()
        url = o.url or (self.service_info.uri if self.service_info else None)
        url = sdk.required(url, "url", "the service URL: the service reports no uri yet")
        self._invoke_url = o.invoke_url(url)
        if self.invoker_auth == "google":
            self._id_token = CachedIdToken(self._token_source, o.audience or url.rstrip("/"))

    async def close(self) -> None:
        admin = self._admin
        if admin is None:
            return
        try:  # the user's settings, even when the run was cancelled
            await sdk.shielded(self._saved.restore(), timeout_s=RESTORE_TIMEOUT_S)
        finally:
            self._admin = None
            admin.close()

    async def _put_back(self, saved: _UserSettings) -> None:
        admin = self._require_admin()
        service = await admin.get()
        service.template.scaling.min_instance_count = saved.min_instances
        service.template.labels.clear()
        service.template.labels.update(saved.labels)
        await admin.update(service)

    # ----- requests -------------------------------------------------------------------------

    async def _headers(self) -> dict[str, str]:
        headers = dict(self.options.headers)
        if self._id_token is not None:
            headers["Authorization"] = f"Bearer {await self._id_token.get()}"
        elif self.invoker_auth == "token":
            headers.update(self.auth_headers())
        return headers

    async def invoke(self, request: sdk.Request) -> sdk.Result:
        # A status >= 400 (429: no instance free within max instances), a timeout or a reset
        # leaves through invoke's boundary as the core's ProviderError (as_provider_error:
        # Retry-After in seconds or as an HTTP date). The first request after ensure_cold is
        # cold; else, with cold_threshold_ms, inferred.
        headers = await self._headers()
        return await sdk.ingress_call(self, self._invoke_url, request, headers, self._cold)

    # ----- control --------------------------------------------------------------------------

    def _require_admin(self) -> ServiceAdmin:
        expected = "projects/P/locations/L/services/S to control the service"
        return sdk.required(self._admin, "service", expected)

    async def describe(self) -> ServiceInfo:
        """Read the service again: scaling, GPU and revisions (kept in ``service_info``)."""
        self.service_info = await self._require_admin().info()
        return self.service_info

    async def ensure_cold(self, timeout_s: float) -> sdk.ColdCheck:
        """Set ``min_instance_count`` to 0, roll a new revision (``roll_revision``) and wait
        ``idle_reclaim_s`` for idle instances to go. Cloud Run lists no live instances, so
        this is confirmed by procedure only when a revision was rolled and the wait elapsed;
        without the roll it stays an inference."""
        admin = self._require_admin()
        o = self.options
        started = time.monotonic()
        service = await admin.get()
        template = service.template
        self._saved.keep(
            _UserSettings(int(template.scaling.min_instance_count), dict(template.labels))
        )
        changed = template.scaling.min_instance_count != 0 or o.roll_revision
        template.scaling.min_instance_count = 0
        if o.roll_revision:
            template.labels[ROLL_LABEL] = uuid.uuid4().hex[:12]
        if changed:
            service = await admin.update(service)
        ready = time.monotonic()
        reclaimed_at = ready + o.idle_reclaim_s
        # answer just inside timeout_s: the runner's own deadline is the same number
        wake_at = min(reclaimed_at, started + timeout_s - TIMEOUT_MARGIN_S)
        # a loop's timer may fire a hair early (its clock resolution): a millisecond more
        # makes sure the clock has really passed wake_at
        await anyio.sleep(max(0.0, wake_at - time.monotonic()) + 0.001)
        waited_s = time.monotonic() - started
        reclaimed = time.monotonic() >= reclaimed_at
        confirmed = o.roll_revision and reclaimed
        revision = service.latest_ready_revision or "?"
        how = (
            f"min_instance_count=0, revision {revision.rsplit('/', 1)[-1]} "
            f"{'rolled' if o.roll_revision else 'kept'}, waited {o.idle_reclaim_s:g}s for "
            "idle instances"
            + ("" if reclaimed else " (timed out first)")
            + ("" if confirmed else "; inferred: Cloud Run lists no live instances")
        )
        self._cold.expect(confirmed)
        return sdk.ColdCheck(confirmed=confirmed, waited_s=waited_s, how=how)
