"""The testing kit's conformance suite, against the fal emulator over loopback HTTP."""

from __future__ import annotations

import dataclasses
from typing import Any

from gpubench_fal import FalProvider
from gpubench_fal.emulator import make_app

from gpubench_sdk.testing import ASGIApp, ProviderConformance, SimulatedFleet

APP = "gpubench/echo"


class TestFalQueueConformance(ProviderConformance):
    """The queue API, followed by polling ``/status``."""

    provider_class = FalProvider

    def make_emulator(self, fleet: SimulatedFleet) -> ASGIApp:
        return make_app(fleet, api_key=self.api_key)

    def options(self, url: str) -> dict[str, Any]:
        return {
            "app_id": APP,
            "queue_url": f"{url}/queue",
            "run_url": f"{url}/run",
            "cold_threshold_ms": 200,  # the suite's fleet boots in 400 ms
            "poll_interval_s": 0.01,
            "poll_max_interval_s": 0.05,
        }


class TestFalStatusStreamConformance(TestFalQueueConformance):
    """The queue API, followed through the SSE ``/status/stream``."""

    def options(self, url: str) -> dict[str, Any]:
        return {**super().options(url), "status_updates": "stream", "logs": True}


class _DirectCalls(FalProvider):
    """What a ``mode = "run"`` instance declares (a held request reports no metrics); the
    suite reads the capabilities from the class."""

    capabilities = dataclasses.replace(FalProvider.capabilities, server_timings=frozenset())


class TestFalRunConformance(TestFalQueueConformance):
    """``fal.run``: one held request; hanging up cancels it."""

    provider_class = _DirectCalls

    def test_run_mode_declares_what_it_reports(self) -> None:
        provider = FalProvider(app_id=APP, mode="run")
        assert provider.capabilities == _DirectCalls.capabilities

    def options(self, url: str) -> dict[str, Any]:
        return {**super().options(url), "mode": "run"}
