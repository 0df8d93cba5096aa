"""The testing kit's conformance suite, against the Baseten emulator over loopback HTTP.

It runs in ``predict`` mode: the suite checks each request's output, and Baseten's async API
never returns one (it goes to a webhook). ``async`` mode is covered by test_baseten_protocol.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

from gpubench_baseten import BasetenProvider
from gpubench_baseten.emulator import make_app

from gpubench_sdk import ProviderError, ScalingSettings
from gpubench_sdk.testing import ASGIApp, ProviderConformance, ServedApp, SimulatedFleet

MODEL, DEPLOYMENT = "m0del1", "dep1oy1"


class TestBasetenPredictConformance(ProviderConformance):
    """``predict``: a held request. Baseten does not stop a model's work when the caller hangs
    up (the model's own code may), so an abandoned request runs to its end."""

    provider_class = BasetenProvider
    cancels_remote_jobs = False

    def make_emulator(self, fleet: SimulatedFleet) -> ASGIApp:
        return make_app(fleet, api_key=self.api_key, model_id=MODEL, deployment_id=DEPLOYMENT)

    def options(self, url: str) -> dict[str, Any]:
        return {
            "model_id": MODEL,
            "base_url": url,
            "api_url": url,
            "predict_cold_threshold_ms": 200,  # the suite's fleet boots in 400 ms
            "poll_interval_s": 0.01,
            "poll_max_interval_s": 0.05,
        }

    def test_fleet_state_matches(self, served: ServedApp, fleet: SimulatedFleet) -> None:
        """Baseten counts replicas that are up, busy or not: ``busy`` stays unknown."""
        fleet.set_scaling(ScalingSettings(idle_timeout_s=60))

        async def go() -> None:
            async with self.make_provider(served) as provider:
                state = await provider.state()
                assert (state.ready, state.busy, state.starting) == (0, None, 0), state
                assert state.detail["status"] == "SCALED_TO_ZERO"
                await self.timed_invoke(provider, self.request(5))
                state = await provider.state()
                assert (state.ready, state.busy, state.starting) == (1, None, 0), state
                task = asyncio.create_task(provider.invoke(self.request(1500)))
                await asyncio.to_thread(fleet.wait_for, lambda c: c.running == 1, 10)
                state = await provider.state()
                counts = fleet.counts()
                assert state.ready == counts.idle + counts.running == 1, (state, counts)
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError, ProviderError):
                    await task

        self.run_async(go())
