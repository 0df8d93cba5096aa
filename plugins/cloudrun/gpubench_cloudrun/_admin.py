"""The Cloud Run Admin API v2 through ``google.cloud.run_v2``, each call in a worker thread.

Why the synchronous client: ``ServicesAsyncClient`` speaks only gRPC (grpc.aio), whose channel
is bound to the loop it was made on and does not run under every loop gpubench uses (uvloop,
anyio's asyncio backend in tests); the REST transport, which a local fake Admin API can serve,
exists only on the synchronous ``ServicesClient``. Control-plane calls are a handful per run,
so a worker thread per call (bounded by a ``CapacityLimiter``) costs nothing measurable and
the code the tests run is the code production runs. Invocations never go through here.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import anyio

import gpubench_sdk as sdk

T = TypeVar("T")
PROVIDER = "cloudrun"
GPU_LIMIT = "nvidia.com/gpu"  # containers[].resources.limits key for GPUs (Cloud Run GPU docs)
ROLE_HINT = "the caller needs roles/run.developer on the service: see the docs"  # a 401/403's


@dataclass(frozen=True, slots=True)
class ServiceInfo:
    """What the Admin API says about a service: scaling, GPU and revisions.

    ``max_instances`` 0 means "not set" (proto3 omits zero: Cloud Run's default applies).
    """

    name: str
    uri: str | None
    min_instances: int
    max_instances: int
    accelerator: str | None
    gpus: str | None
    cpu: str | None
    memory: str | None
    gpu_zonal_redundancy_disabled: bool
    latest_ready_revision: str | None
    revisions: tuple[str, ...] = ()


def service_info(service: Any, revisions: tuple[str, ...] = ()) -> ServiceInfo:
    """Read a ``run_v2.Service``: ``template.scaling``, ``template.node_selector`` and the
    first container's ``resources.limits`` (field names from google/cloud/run/v2/service.proto
    and revision_template.proto)."""
    template = service.template
    limits = dict(template.containers[0].resources.limits) if template.containers else {}
    return ServiceInfo(
        name=service.name,
        uri=service.uri or None,
        min_instances=int(template.scaling.min_instance_count),
        max_instances=int(template.scaling.max_instance_count),
        accelerator=template.node_selector.accelerator or None,
        gpus=limits.get(GPU_LIMIT),
        cpu=limits.get("cpu"),
        memory=limits.get("memory"),
        gpu_zonal_redundancy_disabled=bool(template.gpu_zonal_redundancy_disabled),
        latest_ready_revision=service.latest_ready_revision or None,
        revisions=revisions,
    )


class ServiceAdmin:
    """``get``/``update``/``revisions`` of one service. ``endpoint`` (``http://127.0.0.1:PORT``)
    points the REST transport at a fake; ``anonymous`` sends no credentials (fakes only)."""

    def __init__(
        self, name: str, *, endpoint: str | None, anonymous: bool, timeout_s: float
    ) -> None:
        from google.api_core.client_options import ClientOptions
        from google.cloud import run_v2

        credentials: Any = None
        if anonymous:
            from google.auth import credentials as gcreds

            anonymous_class: Any = gcreds.AnonymousCredentials  # untyped in google-auth
            credentials = anonymous_class()
        options = ClientOptions(api_endpoint=endpoint) if endpoint else None
        kw: dict[str, Any] = {
            "transport": "rest",
            "credentials": credentials,
            "client_options": options,
        }
        self.name = name
        self._timeout_s = timeout_s
        self._services = run_v2.ServicesClient(**kw)
        self._revisions = run_v2.RevisionsClient(**kw)
        self._limiter = anyio.CapacityLimiter(2)

    async def _call(self, fn: Callable[..., T], *args: Any, **kw: Any) -> T:
        with sdk.sdk_errors(map_admin_error):
            return await anyio.to_thread.run_sync(
                functools.partial(fn, *args, **kw), limiter=self._limiter
            )

    async def get(self) -> Any:
        return await self._call(self._services.get_service, name=self.name, timeout=self._timeout_s)

    async def update(self, service: Any) -> Any:
        """PATCH the whole service and wait for the long-running operation to finish."""

        def update_and_wait() -> Any:
            operation: Any = self._services.update_service(service=service, timeout=self._timeout_s)
            return operation.result(timeout=self._timeout_s)

        return await self._call(update_and_wait)

    async def revisions(self) -> tuple[str, ...]:
        def names() -> tuple[str, ...]:
            pager = self._revisions.list_revisions(parent=self.name, timeout=self._timeout_s)
            return tuple(revision.name for revision in pager)

        return await self._call(names)

    async def info(self) -> ServiceInfo:
        service = await self.get()
        return service_info(service, await self.revisions())

    def close(self) -> None:
        for client in (self._services, self._revisions):
            transport: Any = client.transport
            transport.close()


def map_admin_error(exc: BaseException) -> sdk.ProviderError:
    """google.api_core errors carry the HTTP status in ``code``; network errors come from
    ``requests`` (the REST transport) or google-auth."""
    from google.api_core import exceptions as gexc

    status = None
    if isinstance(exc, gexc.GoogleAPICallError) and isinstance(exc.code, int):
        status = exc.code
    denied = isinstance(exc, gexc.PermissionDenied | gexc.Unauthenticated)  # 403, 401
    return sdk.sdk_error(
        exc,
        provider=PROVIDER,
        service="Cloud Run Admin API",
        status=status,
        timed_out=isinstance(exc, gexc.RetryError | gexc.DeadlineExceeded | TimeoutError),
        hint=ROLE_HINT if denied else None,
    )
