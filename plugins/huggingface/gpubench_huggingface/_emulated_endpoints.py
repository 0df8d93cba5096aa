"""The emulator's Inference Endpoints management API (``/v2/endpoint/{namespace}/{name}``) over a
simulated fleet: the endpoint object, ``PUT`` updates, ``pause``/``resume``/``scale-to-zero``.

The endpoint object has every field ``huggingface_hub`` reads (``InferenceEndpoint.
_populate_from_raw``: ``name``, ``type``, ``healthRoute``, ``model.{repository, framework,
revision, task}``, ``status.{state, url, createdAt, updatedAt}``) and the ones the API
documents around them (``accountId``, ``provider``, ``compute.{id, accelerator, instanceType,
instanceSize, scaling}``, ``model.image``, ``status.{message, readyReplica, targetReplica,
createdBy, updatedBy}``). ``PUT`` merges the fields given, as ``update_inference_endpoint``
sends only those; ``resume`` of a running endpoint is refused 400 "already running" (what
``resume_inference_endpoint(running_ok=True)`` expects). Sources: huggingface_hub 2.4
``hf_api.py`` and ``_inference_endpoints.py``; https://huggingface.co/docs/inference-endpoints.
Its routes are declared on the emulator's ``Emulator`` (``register``).
"""

from __future__ import annotations

import asyncio
import dataclasses
from typing import Any

from gpubench_sdk import ScalingSettings
from gpubench_sdk.testing import Emulator, Reject, Request, SimulatedFleet, until

from . import _protocol as hf

REVISION = "0123456789abcdef0123456789abcdef01234567"  # the emulated model's commit
CREATED_AT = "2026-01-01T00:00:00.000Z"
_USER = {"id": "6630e5f1d0c8a5b3e1f2a3b4", "name": "gpubench"}
_MESSAGES = {
    hf.RUNNING: "Endpoint is running",
    hf.INITIALIZING: "Endpoint is initializing",
    hf.SCALED_TO_ZERO: "Endpoint is scaled to zero",
    hf.PAUSED: "Endpoint is paused",
}


class EndpointAPI:
    """One endpoint's management routes. While paused or draining to zero the fleet runs with
    no minimum and no idle time, and the user's settings wait in ``saved``."""

    def __init__(
        self, fleet: SimulatedFleet, *, namespace: str, name: str, minute_s: float
    ) -> None:
        self.fleet = fleet
        self.namespace, self.name = namespace, name
        self.minute_s = minute_s
        self.saved: list[ScalingSettings] = []
        self.paused = False
        self.draining = False
        self.extra: dict[str, Any] = {"model": {}, "compute": {}, "route": {}}
        self.updated_at = CREATED_AT

    # ----- state --------------------------------------------------------------------------

    def state(self) -> str:
        counts = self.fleet.counts()
        if self.paused:
            return hf.PAUSED
        if counts.ready:
            return hf.RUNNING
        if counts.workers:
            return hf.INITIALIZING
        return hf.SCALED_TO_ZERO

    def user_scaling(self) -> ScalingSettings:
        return self.saved[0] if self.saved else self.fleet.scaling

    def body(self, request: Request) -> dict[str, Any]:
        counts = self.fleet.counts()
        user = self.user_scaling()
        assert user.idle_timeout_s is not None
        minutes = user.idle_timeout_s / self.minute_s
        state = self.state()
        status: dict[str, Any] = {
            "createdAt": CREATED_AT,
            "createdBy": _USER,
            "updatedAt": self.updated_at,
            "updatedBy": _USER,
            "private": None,
            "state": state,
            "message": _MESSAGES.get(state, state),
            "readyReplica": counts.ready,
            "targetReplica": counts.workers,
        }
        if state != hf.PAUSED:  # a paused endpoint has no URL to call
            status["url"] = str(request.base_url).rstrip("/")
        model = {
            "repository": "gpubench/emulated",
            "revision": REVISION,
            "task": "text-generation",
            "framework": "pytorch",
            "image": {"huggingface": {}},
            "env": {},
            "secrets": {},
            **self.extra["model"],
        }
        return {
            "accountId": None,
            "name": self.name,
            "type": "authenticated",
            "provider": {"vendor": "aws", "region": "us-east-1"},
            "compute": {
                "id": "aws-us-east-1-nvidia-a10g-x1",
                "accelerator": "gpu",
                "instanceType": "nvidia-a10g",
                "instanceSize": "x1",
                **self.extra["compute"],
                "scaling": {
                    "minReplica": user.min_workers,
                    "maxReplica": user.max_workers,
                    "scaleToZeroTimeout": round(minutes) if minutes == round(minutes) else minutes,
                },
            },
            "model": model,
            "healthRoute": "/health",
            "status": status,
        }

    # ----- scaling kept aside while paused or draining ----------------------------------------

    def hold_back(self) -> None:
        """Keep the user's settings aside and let every replica go (pause, scale-to-zero)."""
        if not self.saved:
            self.saved.append(self.fleet.scaling)
        self.fleet.set_scaling(ScalingSettings(min_workers=0, idle_timeout_s=0))

    def give_back(self) -> None:
        if self.saved and not self.paused and not self.draining:
            self.fleet.set_scaling(self.saved.pop())

    async def drain(self) -> None:
        self.draining = True
        self.hold_back()  # idle replicas stop now, busy ones after their request
        try:
            await until(lambda: not self.fleet.counts().workers)
        finally:
            self.draining = False
            self.give_back()

    # ----- routes ---------------------------------------------------------------------------

    def register(self, emu: Emulator) -> None:
        """Declare the routes on ``emu``, whose check (the key) runs after the name's."""
        base = "/v2/endpoint/{namespace}/{name}"

        def found(request: Request) -> None:
            p = request.path_params
            if (p["namespace"], p["name"]) != (self.namespace, self.name):
                raise Reject(404, "endpoint not found")
            if emu.check is not None:
                emu.check(request)

        async def endpoint(request: Request) -> Any:
            found(request)
            if request.method == "PUT":
                update = await emu.read_json(
                    request, invalid=_NOT_AN_UPDATE, not_object=_NOT_AN_UPDATE
                )
                self._update(update)
                self.updated_at = "2026-01-01T00:00:01.000Z"
            return self.body(request)

        async def action(request: Request) -> Any:
            found(request)
            name = request.path_params["action"]
            if name == "scale-to-zero":
                if self.user_scaling().min_workers:
                    raise Reject(400, "minReplica must be 0 to scale an endpoint to zero")
                if not self.draining:
                    emu.spawn(self.drain())
            elif name == "pause":
                self.paused = True
                self.hold_back()
            elif name == "resume":
                if not self.paused and self.state() == hf.RUNNING:
                    raise Reject(400, "Endpoint is already running")
                self.paused = False
                self.give_back()
            else:
                raise Reject(404, f"unknown action {name!r}")
            await asyncio.sleep(0)  # let the drain begin before the state is read
            return self.body(request)

        emu.route(base, "GET", "PUT", fault="control", check=False)(endpoint)
        emu.route(base + "/{action}", "POST", fault="control", check=False)(action)

    def _update(self, update: dict[str, Any]) -> None:
        """Merge ``update`` (only the fields sent change); ``Reject(400)`` when it is refused."""
        compute = update.get("compute") or {}
        scaling = compute.get("scaling") or {} if isinstance(compute, dict) else {}
        if not isinstance(scaling, dict):
            raise Reject(400, "compute.scaling must be an object")
        fields = {"minReplica": "min_workers", "maxReplica": "max_workers"}
        changes = {name: scaling[f] for f, name in fields.items() if f in scaling}
        if "scaleToZeroTimeout" in scaling:
            changes["idle_timeout_s"] = scaling["scaleToZeroTimeout"] * self.minute_s
        if any(not isinstance(v, int | float) or v < 0 for v in changes.values()):
            raise Reject(400, f"invalid scaling: {scaling}")
        wanted = dataclasses.replace(self.user_scaling(), **changes)
        try:
            if self.saved:
                held = dataclasses.replace(wanted, min_workers=0, idle_timeout_s=0)
                self.fleet.set_scaling(held)
                self.saved[0] = wanted
            else:
                self.fleet.set_scaling(wanted)
        except ValueError as exc:
            raise Reject(400, f"invalid scaling: {exc}") from None
        for section in ("model", "compute", "route"):
            given = update.get(section)
            if isinstance(given, dict):
                self.extra[section].update({k: v for k, v in given.items() if k != "scaling"})


_NOT_AN_UPDATE = "body must be a JSON object of the fields to update"
