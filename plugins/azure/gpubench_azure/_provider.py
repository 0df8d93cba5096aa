"""``AzureProvider``: an Azure Container Apps app on serverless GPUs, invoked through its HTTPS
ingress and controlled through Azure Resource Manager (``gpubench_azure._arm``)."""

from __future__ import annotations

import re
import ssl
import time
from typing import Any, Literal, Self

from pydantic import Field, model_validator

import gpubench_sdk as sdk
from gpubench_sdk.cost import load_catalog

from ._arm import GPUBENCH_RULE, AppInfo, ContainerAppAdmin

APP_ID = re.compile(
    r"^/subscriptions/(?P<sub>[^/]+)/resourceGroups/(?P<group>[^/]+)"
    r"/providers/Microsoft\.App/containerApps/(?P<app>[^/]+)$",
    re.IGNORECASE,
)
RESTORE_TIMEOUT_S = 600.0  # an update is a revision roll: seconds to minutes
TIMEOUT_MARGIN_S = 0.05
# Azure Functions on Container Apps take their function key in this header
# (https://learn.microsoft.com/azure/azure-functions/function-keys-how-to)
FUNCTIONS_KEY_HEADER = "x-functions-key"


class AzureOptions(sdk.IngressOptions):
    """Options of an Azure Container Apps target.

    ``app`` (the resource id) turns on Resource Manager: the ingress URL is read from it,
    replicas are listed and cold starts forced. ``url`` alone benchmarks the ingress only.
    """

    app: str | None = Field(
        default=None,
        description="resource id: /subscriptions/S/resourceGroups/G/providers/"
        "Microsoft.App/containerApps/A",
    )
    url: str | None = Field(default=None, description="ingress URL (default: https://FQDN)")
    region: str | None = Field(
        default=None, description="the app's location; checked against Resource Manager's"
    )
    auth_mode: Literal["bearer", "functions-key", "none"] | None = Field(
        default=None,
        description="how api_key is sent: 'bearer' (Easy Auth / Entra ID token, the default "
        "with a key), 'functions-key' (x-functions-key), 'none'",
    )
    arm_endpoint: str | None = Field(
        default=None, description="Resource Manager URL (default https://management.azure.com)"
    )
    arm_token_env: str | None = Field(
        default=None,
        description="variable holding an ARM access token (default: DefaultAzureCredential)",
    )
    ca_file: str | None = Field(
        default=None, description="PEM CA bundle to trust for ARM and the ingress (private CA)"
    )
    arm_poll_interval_s: float = Field(default=5.0, gt=0, description="operation polling")
    replica_poll_s: float = Field(default=2.0, gt=0, description="ensure_cold's replica poll")
    cold_cooldown_s: int | None = Field(
        default=None,
        ge=0,
        description="cooldownPeriod set while forcing cold starts (restored in close)",
    )
    http_concurrency: int | None = Field(
        default=None,
        ge=1,
        description="set an HTTP scale rule with this concurrentRequests (restored in close)",
    )

    @model_validator(mode="after")
    def _check_target(self) -> Self:
        if self.app is None and self.url is None:
            raise ValueError("give 'app' (the container app's resource id) or 'url'")
        if self.app is not None and not APP_ID.match(self.app):
            expected = "/subscriptions/S/resourceGroups/G/providers/Microsoft.App/containerApps/A"
            raise sdk.ConfigError("app", self.app, expected)
        if self.auth_mode in ("bearer", "functions-key") and self.api_key is None:
            raise sdk.ConfigError("api_key_env", None, f"a key for auth_mode = {self.auth_mode!r}")
        return self


class AzureProvider(sdk.Provider):
    """Azure Container Apps: POST the payload as JSON to the ingress; read and change
    ``properties.template.scale`` through Resource Manager; fleet state and confirmed cold
    starts from the active revisions' replica lists.

    The ingress reports no server timings and which replica served a request is not said,
    so ``busy`` is what this provider has in flight (at most the running replicas).
    """

    name = "azure"
    capabilities = sdk.Capabilities(
        fleet_state=True,
        cold_start_control=True,
        scaling_settings=True,
        billing=load_catalog().billing_model("azure"),
        # properties.template.scale: minReplicas, maxReplicas, cooldownPeriod (PROVIDERS.md)
        scaling_knobs=frozenset({"min_workers", "max_workers", "scale_down_s"}),
    )
    options: AzureOptions

    def __init__(self, options: sdk.ProviderOptions | None = None, **kw: Any) -> None:
        super().__init__(options, **kw)
        self._admin: ContainerAppAdmin | None = None
        # the app's scale before gpubench changed it (ARM JSON), put back by close()
        self._saved = sdk.SavedSettings[dict[str, Any]](
            lambda scale: self._require_admin().update_scale(scale)
        )
        self._cold = sdk.ColdMark(self.options.cold_threshold_ms)
        self._in_flight = 0
        self.app_info: AppInfo | None = None

    def _url(self) -> str | None:
        fqdn = self.app_info.fqdn if self.app_info else None
        return self.options.url or (f"https://{fqdn}" if fqdn else None)

    @property
    def endpoint(self) -> str | None:
        url = self._url()
        return sdk.scrub_url(url).split("?", 1)[0] if url else self.options.app

    async def __aenter__(self) -> Self:
        ca = self.options.ca_file
        if ca is not None and self._client is None:  # the ingress trusts the same CA as ARM
            try:
                context = ssl.create_default_context(cafile=ca)
            except (OSError, ssl.SSLError) as exc:
                raise sdk.ConfigError("ca_file", ca, f"a readable PEM CA bundle ({exc})") from None
            self._client = sdk.make_client(timeout_s=self.options.timeout_s, verify=context)
        return await super().__aenter__()

    async def open(self) -> None:
        o = self.options
        if o.app is not None:
            match = APP_ID.match(o.app)
            assert match is not None  # validated
            self._admin = ContainerAppAdmin(
                *match.group("sub", "group", "app"),
                endpoint=o.arm_endpoint,
                token_env=o.arm_token_env,
                ca_file=o.ca_file,
                poll_interval_s=o.arm_poll_interval_s,
            )
            try:
                self.app_info = await self._admin.info()
                self._check_region(self.app_info)
                if o.http_concurrency is not None:
                    await self._set_scale(_http_rule(self.app_info, o.http_concurrency))
            except BaseException:
                await self.close()
                raise
        url = sdk.required(self._url(), "url", "the ingress URL: the app has no ingress FQDN")
        self._invoke_url = o.invoke_url(url)

    def _check_region(self, info: AppInfo) -> None:
        wanted, actual = self.options.region, info.location
        if wanted is not None and actual is not None and _norm(wanted) != _norm(actual):
            raise sdk.ConfigError(
                "region", wanted, f"the app's location, {actual!r} (or another app's id)"
            )

    async def close(self) -> None:
        admin = self._admin
        if admin is None:
            return
        try:  # the user's settings, even when the run was cancelled
            await sdk.shielded(self._saved.restore(), timeout_s=RESTORE_TIMEOUT_S)
        finally:
            self._admin = None
            await sdk.shielded(admin.close())

    # ----- requests -------------------------------------------------------------------------

    def auth_headers(self) -> dict[str, str]:
        o = self.options
        if o.auth_mode == "functions-key" and o.api_key is not None:
            return {FUNCTIONS_KEY_HEADER: o.api_key.get_secret_value()}
        return sdk.key_headers(o.api_key, "none" if o.auth_mode == "none" else "bearer")

    async def invoke(self, request: sdk.Request) -> sdk.Result:
        headers = {**self.options.headers, **self.auth_headers()}
        # busy in state() is what is in flight here: the ingress does not say
        self._in_flight += 1
        try:
            # the first request after ensure_cold is cold; else, with cold_threshold_ms, inferred
            return await sdk.ingress_call(self, self._invoke_url, request, headers, self._cold)
        finally:
            self._in_flight -= 1

    # ----- control --------------------------------------------------------------------------

    def _require_admin(self) -> ContainerAppAdmin:
        return sdk.required(self._admin, "app", "the container app's resource id, to control it")

    async def describe(self) -> AppInfo:
        """Read the app again (kept in ``app_info``)."""
        self.app_info = await self._require_admin().info()
        return self.app_info

    async def _set_scale(self, scale: dict[str, Any]) -> AppInfo:
        """Patch the scale, saving the user's first (all of it: rules are replaced whole)."""
        admin = self._require_admin()
        info = self.app_info or await admin.info()
        self._saved.keep(
            {
                "minReplicas": info.min_replicas,
                "maxReplicas": info.max_replicas,
                "cooldownPeriod": info.cooldown_s,
                "rules": [dict(r) for r in info.rules],
            }
        )
        self.app_info = await admin.update_scale(scale)
        return self.app_info

    async def state(self) -> sdk.FleetState:
        replicas = await self._require_admin().replicas()
        busy = min(self._in_flight, replicas.running)
        return sdk.FleetState(
            ready=replicas.running - busy,
            busy=busy,
            starting=replicas.provisioning,
            detail={"replicas": list(replicas.names), "active_revisions": list(replicas.revisions)},
        )

    async def get_scaling(self) -> sdk.ScalingSettings:
        info = await self.describe()
        return sdk.ScalingSettings(info.min_replicas, info.max_replicas, float(info.cooldown_s))

    async def set_scaling(self, settings: sdk.ScalingSettings) -> None:
        """Min/max replicas and the cooldown period (whole seconds: rounded up)."""
        scale = sdk.scaling_fields(
            settings, "minReplicas", "maxReplicas", "cooldownPeriod", round_up=True
        )
        if scale:
            await self._set_scale(scale)

    async def ensure_cold(self, timeout_s: float) -> sdk.ColdCheck:
        """Set ``minReplicas`` to 0 (and ``cooldownPeriod`` to ``cold_cooldown_s`` when set),
        then list the active revisions' replicas until there are none: confirmed when the
        list is empty, within ``timeout_s``. KEDA removes the last replica only a cooldown
        period after the last request (300 s unless changed)."""
        o = self.options
        started = time.monotonic()
        info = await self.describe()
        scale: dict[str, Any] = {}
        if info.min_replicas != 0:
            scale["minReplicas"] = 0
        if o.cold_cooldown_s is not None and info.cooldown_s != o.cold_cooldown_s:
            scale["cooldownPeriod"] = o.cold_cooldown_s
        if scale:
            info = await self._set_scale(scale)
        admin = self._require_admin()
        settings = f"minReplicas=0, cooldownPeriod={info.cooldown_s}s"

        async def look() -> tuple[bool, str]:
            replicas = await admin.replicas()
            if replicas.none:
                return True, f"{settings}; no replica listed in the active revisions"
            up = replicas.running + replicas.provisioning
            return False, f"{settings}; {up} replica(s) still listed"

        return await sdk.wait_cold(
            look,
            timeout_s=timeout_s,
            poll=o.replica_poll_s,
            started=started,
            margin_s=TIMEOUT_MARGIN_S,
            mark=self._cold,
        )


def _http_rule(info: AppInfo, concurrency: int) -> dict[str, Any]:
    """The app's rules with gpubench's HTTP rule (``concurrentRequests``, a string in ARM)."""
    rules = [dict(r) for r in info.rules if r.get("name") != GPUBENCH_RULE]
    metadata = {"concurrentRequests": str(concurrency)}
    rules.append({"name": GPUBENCH_RULE, "http": {"metadata": metadata}})
    return {"rules": rules}


def _norm(location: str) -> str:
    return location.replace(" ", "").lower()  # ARM may say "East US" for "eastus"
