"""The testing kit's conformance suite against the SageMaker emulator over loopback HTTP:
boto3 signs every request (SigV4, checked by the emulator) and runs in worker threads."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator
from typing import Any

import pytest
from gpubench_sagemaker import SageMakerProvider
from gpubench_sagemaker.emulator import DEFAULT_COMPONENT, DEFAULT_ENDPOINT, make_app

from gpubench_sdk import ProviderError, ScalingSettings
from gpubench_sdk.testing import (
    FAULT_CASES,
    ASGIApp,
    Duration,
    FaultCase,
    FleetConfig,
    ProviderConformance,
    ServedApp,
    SimulatedFleet,
    serve,
)

ACCESS_KEY_ID = "AKIAGPUBENCHTEST0001"


class TestSageMakerConformance(ProviderConformance):
    """With an inference component, so scale to zero works; the secret access key plays the
    suite's API key (it must never leak)."""

    provider_class = SageMakerProvider
    cancels_remote_jobs = False  # SageMaker has no API to cancel a real-time invocation
    # one model copy, as a deployed component has (the suite's default fleet starts empty)
    fleet_config = FleetConfig(
        cold_start=Duration.fixed(0.4), min_workers=1, max_workers=2, idle_timeout_s=1.0
    )

    @pytest.fixture
    def served(self, fleet: SimulatedFleet) -> Iterator[ServedApp]:
        with serve(self.make_emulator(fleet)) as served:
            fleet.wait_for(lambda c: c.idle >= 1, 10)  # the copy is InService
            yield served

    def make_emulator(self, fleet: SimulatedFleet) -> ASGIApp:
        return make_app(
            fleet,
            credentials={ACCESS_KEY_ID: self.api_key},
            inference_component=DEFAULT_COMPONENT,
        )

    def options(self, url: str) -> dict[str, Any]:
        return {
            "endpoint_name": DEFAULT_ENDPOINT,
            "inference_component": DEFAULT_COMPONENT,
            "region": "us-east-1",
            "aws_access_key_id": ACCESS_KEY_ID,
            "runtime_url": url,
            "control_url": url,
            "cold_retry_max_s": 0.05,
        }

    # SageMaker refuses requests while no copy is up and routes only to ready copies, so the
    # request that succeeds after a scale-out never waited on its worker's boot: the fleet's
    # per-job "cold" (first job of a worker that booted after it arrived) is never true. The
    # cold start is the refused time before it, which the provider reports as setup_ms.

    @pytest.mark.parametrize("case", FAULT_CASES, ids=[c.name for c in FAULT_CASES])
    def test_fault_is_mapped(
        self, case: FaultCase, served: ServedApp, fleet: SimulatedFleet
    ) -> None:
        if case.name == "unavailable_while_cold":
            # SageMaker's "no copy up" is a ValidationError or ModelNotReadyException, never
            # a proxy 503, and the component here has a copy up: test_cold_start_detection
            # covers the real signal
            pytest.skip("SageMaker signals cold with NoCapacity errors, not a 503")
        super().test_fault_is_mapped(case, served, fleet)

    def test_cold_start_detection(self, served: ServedApp, fleet: SimulatedFleet) -> None:
        async def go() -> tuple[Any, Any, Any]:
            async with self.make_provider(served) as provider:
                check = await provider.ensure_cold(15)
                cold, _, _ = await self.timed_invoke(provider, self.request(seq=0))
                warm, _, _ = await self.timed_invoke(provider, self.request(seq=1))
                return check, cold, warm

        check, cold, warm = self.run_async(go())
        assert check.confirmed, check
        assert cold.cold is True and cold.cold_confirmed and warm.cold is False
        boot_ms = 400  # the suite's fleet boots workers in 0.4 s
        assert cold.setup_ms is not None and cold.setup_ms >= boot_ms - 20, cold
        assert self.truth_of(fleet, warm).worker_id == self.truth_of(fleet, cold).worker_id

    def test_ensure_cold_leaves_no_worker(self, served: ServedApp, fleet: SimulatedFleet) -> None:
        async def go() -> None:
            async with self.make_provider(served) as provider:
                check = await provider.ensure_cold(20)
                assert check.confirmed, check
                assert fleet.counts().is_cold, fleet.counts()
                result, _, _ = await self.timed_invoke(provider, self.request())
                assert result.cold is True and result.setup_ms is not None

        self.run_async(go())
        assert fleet.scaling.min_workers == 1, "close() did not restore the copy count"

    def test_fleet_state_matches(self, served: ServedApp, fleet: SimulatedFleet) -> None:
        """SageMaker counts copies that are up, busy or not: ``busy`` stays unknown."""
        fleet.set_scaling(ScalingSettings(idle_timeout_s=60))

        async def go() -> None:
            async with self.make_provider(served) as provider:
                state = await provider.state()
                assert (state.ready, state.busy, state.starting) == (1, None, 0), state
                task = asyncio.create_task(provider.invoke(self.request(1500)))
                await asyncio.to_thread(fleet.wait_for, lambda c: c.running == 1, 10)
                state = await provider.state()
                counts = fleet.counts()
                assert state.ready == counts.idle + counts.running, (state, counts)
                assert state.detail["desired_copy_count"] == 1
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError, ProviderError):
                    await task

        self.run_async(go())
