"""SageMaker's control plane for a benchmark: fleet state from ``describe_endpoint`` and the
inference component, scale to zero by copy count, and the user's copy count put back.

API fields: DescribeEndpoint ``ProductionVariants[].CurrentInstanceCount`` /
``DesiredInstanceCount``; DescribeInferenceComponent ``RuntimeConfig.CurrentCopyCount`` /
``DesiredCopyCount`` and ``InferenceComponentStatus``; UpdateInferenceComponentRuntimeConfig
``DesiredRuntimeConfig.CopyCount`` (botocore data/sagemaker/2017-07-24/service-2.json).
Scaling to zero needs an endpoint with inference components and managed instance scaling
(MinInstanceCount 0): https://docs.aws.amazon.com/sagemaker/latest/dg/endpoint-auto-scaling-zero-instances.html
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from typing import Any

from gpubench_sdk import ColdCheck, ConfigError, FleetState, Polling, wait_cold

Call = Callable[..., Awaitable[Any]]
POLL_S = 0.05
POLL_MAX_S = 5.0
TIMEOUT_MARGIN_S = 1.0


class Control:
    """Control-plane calls for one endpoint (and optionally one inference component)."""

    def __init__(
        self,
        client: Any,
        endpoint: str,
        component: str | None,
    ) -> None:
        self.client = client
        self._endpoint = endpoint
        self._component = component
        self._original_copies: int | None = None

    async def _component_config(self, call: Call) -> dict[str, Any]:
        described: dict[str, Any] = await call(
            "DescribeInferenceComponent",
            self.client.describe_inference_component,
            InferenceComponentName=self._component,
        )
        return described

    async def state(self, call: Call) -> FleetState:
        """Instances (or model copies, with a component) that are up: SageMaker does not say
        which are busy, so ``busy`` stays unknown."""
        endpoint: dict[str, Any] = await call(
            "DescribeEndpoint", self.client.describe_endpoint, EndpointName=self._endpoint
        )
        variants = endpoint.get("ProductionVariants") or []
        current = sum(int(v.get("CurrentInstanceCount") or 0) for v in variants)
        desired = sum(int(v.get("DesiredInstanceCount") or 0) for v in variants)
        detail: dict[str, Any] = {
            "endpoint_status": endpoint.get("EndpointStatus"),
            "current_instance_count": current,
            "desired_instance_count": desired,
            "variants": [v.get("VariantName") for v in variants],
        }
        if self._component is None:
            return FleetState(ready=current, starting=max(0, desired - current), detail=detail)
        component = await self._component_config(call)
        runtime = component.get("RuntimeConfig") or {}
        copies = int(runtime.get("CurrentCopyCount") or 0)
        wanted = int(runtime.get("DesiredCopyCount") or 0)
        detail.update(
            component_status=component.get("InferenceComponentStatus"),
            current_copy_count=copies,
            desired_copy_count=wanted,
        )
        return FleetState(ready=copies, starting=max(0, wanted - copies), detail=detail)

    async def _set_copies(self, call: Call, copies: int) -> None:
        await call(
            "UpdateInferenceComponentRuntimeConfig",
            self.client.update_inference_component_runtime_config,
            InferenceComponentName=self._component,
            DesiredRuntimeConfig={"CopyCount": copies},
        )

    async def scale_to_zero(self, call: Call, timeout_s: float) -> ColdCheck:
        """Copy count 0, then wait until the component reports no copy: confirmed by the
        service's own count."""
        if self._component is None:
            raise ConfigError(
                "inference_component",
                None,
                "an inference component: only endpoints with inference components scale to zero",
            )
        started = time.monotonic()
        runtime = (await self._component_config(call)).get("RuntimeConfig") or {}
        if self._original_copies is None:
            self._original_copies = int(runtime.get("DesiredCopyCount") or 0)
        if int(runtime.get("DesiredCopyCount") or 0) != 0:
            await self._set_copies(call, 0)

        async def look() -> tuple[bool, str]:
            component = await self._component_config(call)
            copies = int((component.get("RuntimeConfig") or {}).get("CurrentCopyCount") or 0)
            if copies == 0 and component.get("InferenceComponentStatus") in ("InService", None):
                return True, "CopyCount=0; DescribeInferenceComponent: CurrentCopyCount 0"
            return False, f"CurrentCopyCount {copies}"

        # answer inside timeout_s (the runner's deadline is the same number), leaving room for
        # the last describe call
        return await wait_cold(
            look,
            timeout_s=timeout_s,
            poll=Polling(POLL_S, POLL_MAX_S),
            started=started,
            margin_s=TIMEOUT_MARGIN_S,
        )

    async def restore(self, call: Call) -> None:
        """Put the user's copy count back (called from ``close()``, shielded)."""
        original, self._original_copies = self._original_copies, None
        if original is not None and self._component is not None:
            await self._set_copies(call, original)
