"""The testing kit's conformance suite against the Cloud Run emulator over loopback HTTP: the
Admin API through google.cloud.run_v2's REST transport, the service URL through httpx."""

from __future__ import annotations

from typing import Any

from gpubench_cloudrun import CloudRunProvider
from gpubench_cloudrun.emulator import DEFAULT_SERVICE, make_app

from gpubench_sdk.testing import ASGIApp, ProviderConformance, SimulatedFleet


class TestCloudRunConformance(ProviderConformance):
    provider_class = CloudRunProvider

    def make_emulator(self, fleet: SimulatedFleet) -> ASGIApp:
        return make_app(fleet, api_key=self.api_key)

    def options(self, url: str) -> dict[str, Any]:
        return {
            "service": DEFAULT_SERVICE,
            "admin_endpoint": url,
            "admin_login": "anonymous",
            # the suite's fleet: 0.4 s boot, 1 s idle timeout; the rolled revision's instance
            # is gone 1.4 s after the roll
            "idle_reclaim_s": 1.6,
            "cold_threshold_ms": 200,
        }
