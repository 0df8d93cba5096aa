"""Baseten's management API for one deployment: its replicas, status and autoscaling settings."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Coroutine
from typing import Any

import httpx

import gpubench_sdk as sdk

from . import _protocol as bt

Send = Callable[..., Coroutine[Any, Any, httpx.Response]]
SETTLE_TIMEOUT_S = 30.0  # how long a QUEUED settings change may take to show


class DeploymentAdmin:
    """``GET /v1/models/{model}/deployments/{dep}`` and its ``autoscaling_settings``."""

    def __init__(self, send: Send, api_url: str, model_id: str, deployment: str) -> None:
        self._send = send
        self.url = httpx.URL(f"{api_url.rstrip('/')}/v1/models/{model_id}/deployments/{deployment}")
        self._settings_url = httpx.URL(f"{self.url}/autoscaling_settings")

    async def deployment(self) -> dict[str, Any]:
        return sdk.json_object(await self._send("GET", self.url), provider="baseten")

    async def settings(self) -> dict[str, Any]:
        data = await self.deployment()
        settings = data.get("autoscaling_settings")
        if not isinstance(settings, dict):
            raise sdk.InvalidResponseError(
                f"deployment {data.get('id')!r} has no autoscaling_settings (status "
                f"{data.get('status')!r}): it has not finished deploying",
                provider="baseten",
            )
        return settings

    async def patch(self, changes: dict[str, int]) -> str:
        """PATCH the given fields (Baseten changes only those); wait for a QUEUED change."""
        try:
            answer = sdk.json_object(
                await self._send("PATCH", self._settings_url, changes), provider="baseten"
            )
        except sdk.ClientHTTPError as exc:
            raise sdk.ConfigError("scaling", changes, f"values Baseten accepts ({exc})") from exc
        status = str(answer.get("status"))
        if status == "QUEUED":  # applied later (e.g. while the deployment updates): wait for it
            deadline = time.monotonic() + SETTLE_TIMEOUT_S
            while time.monotonic() < deadline:
                current = await self.settings()
                if all(current.get(k) == v for k, v in changes.items()):
                    break
                await asyncio.sleep(0.5)
        return status

    async def state(self, queue: dict[str, Any] | None) -> sdk.FleetState:
        """Replicas up (Baseten counts them without telling idle from busy) and, from the async
        queue status, requests waiting."""
        data = await self.deployment()
        active = data.get("active_replica_count")
        if not isinstance(active, int):
            raise sdk.InvalidResponseError(
                "deployment lacks active_replica_count", provider="baseten"
            )
        starting = data.get("status") in bt.STARTING_STATES
        queued = queue.get("num_queued_requests") if queue else None
        return sdk.FleetState(
            ready=0 if starting else active,
            busy=None,
            starting=active if starting else 0,
            queued=queued if isinstance(queued, int) else None,
            detail={"status": data.get("status"), "active_replica_count": active, **(queue or {})},
        )


def scaling_of(settings: dict[str, Any]) -> sdk.ScalingSettings:
    return sdk.read_scaling(
        settings,
        "min_replica",
        "max_replica",
        "scale_down_delay",
        idle_default=bt.DEFAULT_SCALE_DOWN_DELAY_S,
        provider="baseten",
        where="autoscaling_settings",
    )


def changes_of(settings: sdk.ScalingSettings) -> dict[str, int]:
    return sdk.scaling_fields(
        settings,
        "min_replica",
        "max_replica",
        "scale_down_delay",
        idle_range=(0, bt.MAX_SCALE_DOWN_DELAY_S),
        expected=f"whole seconds 0..{bt.MAX_SCALE_DOWN_DELAY_S} (Baseten's scale_down_delay)",
    )
