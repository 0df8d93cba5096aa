"""One container app through Azure Resource Manager, with Microsoft's official clients:
``azure-mgmt-appcontainers`` (its asyncio client) and ``azure-identity``.

Calls made (operation names of the SDK; routes under
``/subscriptions/S/resourceGroups/G/providers/Microsoft.App/containerApps/A``):

- ``container_apps.get``: the app (``properties.template.scale``, ingress FQDN, revisions);
- ``container_apps.begin_update``: a JSON merge-patch of ``properties.template.scale``, a
  long-running operation (``202`` + ``Location``, polled until done) that rolls a revision;
- ``container_apps_revisions.list_revisions``: which revisions are active;
- ``container_apps_revision_replicas.list_replicas``: each active revision's replicas, with
  ``runningState`` ``Running``/``NotRunning`` (the fleet state and the cold-start check).

Scale fields, their defaults (min 0, max 10, cooldown 300 s, polling 30 s) and rules are
documented in https://learn.microsoft.com/azure/container-apps/scale-app; the replica list in
the REST reference "Container Apps Revision Replicas - List Replicas".
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import gpubench_sdk as sdk

PROVIDER = "azure"
ARM_SCOPE = "https://management.azure.com/.default"
# Defaults of properties.template.scale when the app leaves a field out (scale-app docs)
DEFAULT_MIN_REPLICAS = 0
DEFAULT_MAX_REPLICAS = 10
DEFAULT_COOLDOWN_S = 300
GPUBENCH_RULE = "gpubench-http"  # the HTTP scale rule gpubench writes (http_concurrency)
# what a 401/403 from Resource Manager adds to its error
ROLE_HINT = (
    "the caller needs a role that may read and write Microsoft.App/containerApps,"
    " e.g. Contributor on the app: see docs/providers/azure.md"
)


@dataclass(frozen=True, slots=True)
class AppInfo:
    """What ARM says about a container app: scale settings, ingress and revisions."""

    id: str
    location: str | None
    fqdn: str | None
    workload_profile: str | None
    min_replicas: int
    max_replicas: int
    cooldown_s: int
    polling_interval_s: int | None
    rules: tuple[Mapping[str, Any], ...]
    cpu: float | None
    memory: str | None
    latest_revision: str | None
    latest_ready_revision: str | None


@dataclass(frozen=True, slots=True)
class Replicas:
    """The replicas of the app's active revisions: ``Running`` ones, and the rest (being
    provisioned, or waiting for GPU capacity: ``NotRunning``/``Unknown``)."""

    running: int
    provisioning: int
    names: tuple[str, ...] = ()
    revisions: tuple[str, ...] = ()

    @property
    def none(self) -> bool:
        return self.running + self.provisioning == 0


def app_info(app: Any) -> AppInfo:
    """Read a ``models.ContainerApp`` (field names: the SDK's models, ARM's camelCase JSON)."""
    props = app.properties
    scale = _at(props, "template", "scale")
    containers = _at(props, "template", "containers") or []
    resources = containers[0].resources if containers else None
    ingress = _at(props, "configuration", "ingress")
    return AppInfo(
        id=str(app.id or ""),
        location=app.location,
        fqdn=_at(ingress, "fqdn"),
        workload_profile=_at(props, "workload_profile_name"),
        min_replicas=_or(scale, "min_replicas", DEFAULT_MIN_REPLICAS),
        max_replicas=_or(scale, "max_replicas", DEFAULT_MAX_REPLICAS),
        cooldown_s=_or(scale, "cooldown_period", DEFAULT_COOLDOWN_S),
        polling_interval_s=_at(scale, "polling_interval"),
        rules=tuple(r.as_dict() for r in (_at(scale, "rules") or [])),
        cpu=_at(resources, "cpu"),
        memory=_at(resources, "memory"),
        latest_revision=_at(props, "latest_revision_name"),
        latest_ready_revision=_at(props, "latest_ready_revision_name"),
    )


def _at(model: Any, *path: str) -> Any:
    """``model.a.b...``, or None from the first step that is None (the SDK's optional parts)."""
    for name in path:
        model = None if model is None else getattr(model, name)
    return model


def _or(scale: Any, name: str, default: int) -> int:
    value = getattr(scale, name, None) if scale is not None else None
    return default if value is None else int(value)


class EnvToken:
    """An ARM access token read from an environment variable (``az account get-access-token
    --query accessToken -o tsv``): azure-core's async token-credential protocol, for runs
    where no ``DefaultAzureCredential`` source exists. The token is read at each call, never
    kept in a repr."""

    def __init__(self, variable: str) -> None:
        self._variable = variable

    def __repr__(self) -> str:
        return f"EnvToken({self._variable!r})"

    async def get_token(self, *scopes: str, **kwargs: Any) -> Any:
        from azure.core.credentials import AccessToken

        token = os.environ.get(self._variable)
        if not token:
            raise sdk.ConfigError(
                "arm_token_env", self._variable, "a set variable holding an ARM access token"
            )
        # unknown expiry: claim an hour; a refused token answers 401, reported as such
        return AccessToken(token, int(time.time()) + 3600)

    async def close(self) -> None:
        pass

    async def __aenter__(self) -> EnvToken:
        return self

    async def __aexit__(self, *exc: object) -> None:
        pass


class ContainerAppAdmin:
    """``get``/``update_scale``/``replicas`` of one container app (resource id parts).

    ``endpoint`` points the client at another ARM host (a sovereign cloud, a local emulator);
    ``ca_file`` is a PEM bundle it trusts (``connection_verify``, azure-core's option).
    """

    def __init__(
        self,
        subscription: str,
        resource_group: str,
        app: str,
        *,
        endpoint: str | None,
        token_env: str | None,
        ca_file: str | None,
        poll_interval_s: float,
    ) -> None:
        from azure.mgmt.appcontainers.aio import ContainerAppsAPIClient

        if token_env is not None:
            self._credential: Any = EnvToken(token_env)
        else:
            from azure.identity.aio import DefaultAzureCredential

            self._credential = DefaultAzureCredential()
        kw: dict[str, Any] = {"polling_interval": poll_interval_s}
        if endpoint:
            kw["base_url"] = endpoint
            kw["credential_scopes"] = [ARM_SCOPE]
        if ca_file:
            kw["connection_verify"] = ca_file
        self._client = ContainerAppsAPIClient(self._credential, subscription, **kw)
        self.group, self.app = resource_group, app
        self._poll_s = poll_interval_s

    async def get(self) -> Any:
        with sdk.sdk_errors(map_arm_error):
            return await self._client.container_apps.get(self.group, self.app)

    async def info(self) -> AppInfo:
        return app_info(await self.get())

    async def update_scale(self, scale: Mapping[str, Any]) -> AppInfo:
        """Merge-patch ``properties.template.scale`` and wait for the operation (it rolls a
        revision). ``scale`` is ARM JSON (``minReplicas``, ``cooldownPeriod``, ``rules``)."""
        # a JSON merge patch: the SDK takes it as JSON (its ContainerApp TypedDict), whose
        # typing requires `location`, which a patch of the scale alone has no need of
        body: Any = {"properties": {"template": {"scale": dict(scale)}}}
        with sdk.sdk_errors(map_arm_error):
            poller = await self._client.container_apps.begin_update(
                self.group, self.app, body, polling_interval=self._poll_s
            )
            return app_info(await poller.result())

    async def replicas(self) -> Replicas:
        """The replicas of every active revision (after a change, the old revision's replicas
        drain while the new one starts: both count)."""
        with sdk.sdk_errors(map_arm_error):
            active = [
                r.name
                async for r in self._client.container_apps_revisions.list_revisions(
                    self.group, self.app
                )
                if r.name and r.properties is not None and r.properties.active
            ]
            listed: list[Any] = []
            for revision in active:
                replicas = self._client.container_apps_revision_replicas
                listed += (await replicas.list_replicas(self.group, self.app, revision)).value
        running = sum(1 for r in listed if r.properties and r.properties.running_state == "Running")
        names = tuple(str(r.name) for r in listed)
        return Replicas(running, len(listed) - running, names, tuple(str(r) for r in active))

    async def close(self) -> None:
        await self._client.close()
        await self._credential.close()


def map_arm_error(exc: BaseException) -> sdk.ProviderError:
    """azure-core errors: ``HttpResponseError`` carries the status; ``ServiceRequestError``
    (connect, TLS) and ``ServiceResponseError`` (a broken answer) carry none."""
    from azure.core import exceptions as aexc

    status = None
    if isinstance(exc, aexc.HttpResponseError) and exc.status_code is not None:
        status = int(exc.status_code)
    return sdk.sdk_error(
        exc,
        provider=PROVIDER,
        service="Azure Resource Manager",
        status=status,
        timed_out=isinstance(exc, TimeoutError | aexc.ServiceResponseTimeoutError),
        hint=ROLE_HINT if status in (401, 403) else None,
    )
