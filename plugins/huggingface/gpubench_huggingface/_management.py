"""The Inference Endpoints management API (``/v2/endpoint/{namespace}/{name}``), read into
gpubench's terms: state and replicas as ``FleetState``, ``compute.scaling`` as
``ScalingSettings`` (``scaleToZeroTimeout`` is in minutes). See ``_protocol`` for sources."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import gpubench_sdk as sdk

from . import _protocol as hf


@dataclass(frozen=True, slots=True)
class EndpointStatus:
    """What the management API says of an endpoint at one moment."""

    state: str
    ready_replicas: int | None
    target_replicas: int | None
    url: str | None
    scaling: sdk.ScalingSettings
    raw: dict[str, Any]

    @property
    def is_scaled_to_zero(self) -> bool:
        return self.state == hf.SCALED_TO_ZERO and not self.ready_replicas

    def fleet_state(self) -> sdk.FleetState:
        """Ready replicas serve requests (idle or busy: the API does not tell them apart);
        replicas targeted but not ready are starting."""
        ready, target = self.ready_replicas, self.target_replicas
        starting = None if ready is None or target is None else max(0, target - ready)
        detail = {
            "state": self.state,
            "readyReplica": ready,
            "targetReplica": target,
            "minReplica": self.scaling.min_workers,
            "maxReplica": self.scaling.max_workers,
        }
        return sdk.FleetState(ready=ready, starting=starting, detail=detail)


def parse_endpoint(body: Any, minute_s: float, provider: str) -> EndpointStatus:
    """An endpoint object as ``EndpointStatus``; ``InvalidResponseError`` if it is not one."""

    def invalid(why: str) -> sdk.InvalidResponseError:
        return sdk.InvalidResponseError(f"management API: {why}", provider=provider)

    if not isinstance(body, dict):
        raise invalid("the endpoint is not a JSON object")
    status = body.get("status")
    if not isinstance(status, dict) or status.get("state") not in hf.STATES:
        state = status.get("state") if isinstance(status, dict) else None
        raise invalid(f"unknown status.state {state!r}")
    scaling = (body.get("compute") or {}).get("scaling")
    if not isinstance(scaling, dict):
        raise invalid("no compute.scaling")
    settings = sdk.read_scaling(
        scaling,
        "minReplica",
        "maxReplica",
        "scaleToZeroTimeout",
        provider=provider,
        where="management API: compute.scaling",
        idle_unit_s=minute_s,
        idle_default=None,
    )
    return EndpointStatus(
        state=status["state"],
        ready_replicas=_count(status.get("readyReplica")),
        target_replicas=_count(status.get("targetReplica")),
        url=status.get("url") if isinstance(status.get("url"), str) else None,
        scaling=settings,
        raw=body,
    )


def scaling_payload(settings: sdk.ScalingSettings, minute_s: float) -> dict[str, Any]:
    """The ``PUT`` body changing only the given knobs; ``ConfigError`` for what HF refuses."""
    scaling = sdk.scaling_fields(
        settings,
        "minReplica",
        "maxReplica",
        "scaleToZeroTimeout",
        idle_unit_s=minute_s,
        idle_range=(0, None),
        expected=f"whole minutes of {minute_s:g} s on Hugging Face (scaleToZeroTimeout)",
    )
    return {"compute": {"scaling": scaling}}


def refused_scaling(exc: sdk.ClientHTTPError, payload: dict[str, Any]) -> sdk.ConfigError:
    return sdk.ConfigError("scaling", payload["compute"]["scaling"], f"values HF accepts ({exc})")


def _count(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None
