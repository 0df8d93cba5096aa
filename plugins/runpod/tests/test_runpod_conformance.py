"""The testing kit's conformance suite, against the RunPod emulator over loopback HTTP."""

from __future__ import annotations

from typing import Any

from gpubench_runpod import RunPodProvider
from gpubench_runpod.emulator import make_app

from gpubench_sdk.testing import ASGIApp, ProviderConformance, SimulatedFleet


class TestRunPodConformance(ProviderConformance):
    provider_class = RunPodProvider

    def make_emulator(self, fleet: SimulatedFleet) -> ASGIApp:
        return make_app(fleet, api_key=self.api_key, endpoint_id="ep1")

    def options(self, url: str) -> dict[str, Any]:
        return {
            "endpoint_id": "ep1",
            "base_url": f"{url}/v2",
            "rest_url": f"{url}/v1",
            "cold_threshold_ms": 200,  # the suite's fleet boots in 400 ms
            "poll_interval_s": 0.01,
            "poll_max_interval_s": 0.05,
        }


class TestRunPodRunsyncConformance(TestRunPodConformance):
    """``/runsync``: the job id arrives with the result, so an abandoned call cannot cancel."""

    cancels_remote_jobs = False

    def options(self, url: str) -> dict[str, Any]:
        return {**super().options(url), "mode": "runsync"}
