"""The testing kit's conformance suite, against the Hugging Face emulator over loopback HTTP."""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path
from typing import Any

import pytest
from gpubench_huggingface import HuggingFaceProvider
from gpubench_huggingface.emulator import make_app

from gpubench_sdk import ProviderError, ScalingSettings
from gpubench_sdk.testing import (
    FAULT_CASES,
    ASGIApp,
    FaultCase,
    ProviderConformance,
    ServedApp,
    SimulatedFleet,
)

NAMESPACE, NAME = "conf-org", "conf-endpoint"


class TestHuggingFaceConformance(ProviderConformance):
    provider_class = HuggingFaceProvider

    def make_emulator(self, fleet: SimulatedFleet) -> ASGIApp:
        # One emulated minute of scaleToZeroTimeout lasts 1 s: the suite's 1 s idle timeout.
        return make_app(
            fleet, api_key=self.api_key, namespace=NAMESPACE, endpoint_name=NAME, minute_s=1.0
        )

    def options(self, url: str) -> dict[str, Any]:
        return {
            "url": url,
            "namespace": NAMESPACE,
            "endpoint_name": NAME,
            "management_url": f"{url}/v2",
            "minute_s": 1.0,
            "poll_interval_s": 0.02,
            "retry_interval_s": 0.02,
            "cold_threshold_ms": 200,  # the suite's fleet boots in 400 ms
            "retry_while_initializing": self.retry_503,
        }

    retry_503 = True

    def test_api_key_never_leaks(
        self,
        served: ServedApp,
        fleet: SimulatedFleet,
        tmp_path: Path,
        caplog: pytest.LogCaptureFixture,
    ) -> None:
        # The suite injects a 503 carrying the key as a final error; this plugin would wait
        # that 503 out (HF's "replica initializing"), so the check runs with retries off.
        self.retry_503 = False
        super().test_api_key_never_leaks(served, fleet, tmp_path, caplog)

    @pytest.mark.parametrize("case", FAULT_CASES, ids=[c.name for c in FAULT_CASES])
    def test_fault_is_mapped(
        self, case: FaultCase, served: ServedApp, fleet: SimulatedFleet
    ) -> None:
        if case.name != "unavailable_while_cold":
            super().test_fault_is_mapped(case, served, fleet)
            return
        # HF's proxy answers 503 while a replica initializes: the plugin waits it out, by
        # design, and records the wait as a confirmed cold start instead of failing.
        fleet.faults.next(1, case.fault, on=self.fault_route)

        async def go() -> Any:
            async with self.make_provider(served) as provider:
                result, _, _ = await self.timed_invoke(provider, self.request())
                return result

        result = self.run_async(go())
        assert fleet.faults.injected and result.output == {"echo": "conformance-echo"}
        assert result.cold is True and result.cold_confirmed is True
        boot_ms = fleet.billing.workers[0].boot_end_s - fleet.billing.workers[0].started_s
        assert result.setup_ms is not None and result.setup_ms >= boot_ms * 1e3 - 30

    def test_fleet_state_matches(self, served: ServedApp, fleet: SimulatedFleet) -> None:
        # HF reports ready replicas (idle and busy alike) and the target count, never how many
        # are busy: the suite's busy check cannot apply, so ready/starting are checked.
        fleet.set_scaling(ScalingSettings(idle_timeout_s=60))

        async def go() -> None:
            async with self.make_provider(served) as provider:
                await self.timed_invoke(provider, self.request(5))
                state = await provider.state()
                assert (state.ready, state.busy, state.starting) == (1, None, 0), state
                assert state.detail["state"] == "running"
                task = asyncio.create_task(provider.invoke(self.request(1500)))
                await asyncio.to_thread(fleet.wait_for, lambda c: c.running == 1, 10)
                state = await provider.state()
                counts = fleet.counts()
                assert state.ready == counts.idle + counts.running == 1, state
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError, ProviderError):
                    await task

        self.run_async(go())


class TestHuggingFaceHold503Conformance(TestHuggingFaceConformance):
    """Without ``X-Scale-Up-Timeout``: every cold request meets the proxy's 503s first."""

    def options(self, url: str) -> dict[str, Any]:
        return {**super().options(url), "hold_while_scaling": False}

    def test_cold_start_detection(self, served: ServedApp, fleet: SimulatedFleet) -> None:
        # The replica boots while the proxy answers 503, so the request it finally serves is
        # warm to the fleet; the plugin reports the 503 phase as the cold start (tested in
        # test_huggingface_protocol.py against the fleet's boot time).
        pytest.skip("the fleet never sees the cold request: the proxy refused it with 503")

    def test_ensure_cold_leaves_no_worker(self, served: ServedApp, fleet: SimulatedFleet) -> None:
        pytest.skip("as test_cold_start_detection: covered by the protocol tests")
