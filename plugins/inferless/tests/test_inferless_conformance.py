"""The testing kit's conformance suite, against the Inferless emulator over loopback HTTP."""

from __future__ import annotations

from typing import Any

from gpubench_inferless import InferlessProvider
from gpubench_inferless.emulator import infer_url, make_app

from gpubench_sdk.testing import ASGIApp, ProviderConformance, SimulatedFleet


class TestInferlessConformance(ProviderConformance):
    provider_class = InferlessProvider
    # An abandoned request's connection closes, but nothing documents that Inferless then
    # stops the model, and there is no cancel call: the emulator lets the job run.
    cancels_remote_jobs = False

    def make_emulator(self, fleet: SimulatedFleet) -> ASGIApp:
        return make_app(fleet, api_key=self.api_key, model="conf_7f3a")

    def options(self, url: str) -> dict[str, Any]:
        # the suite's fleet boots in 400 ms; its warm requests take tens of ms
        return {"url": infer_url(url, "conf_7f3a"), "cold_threshold_ms": 200}
