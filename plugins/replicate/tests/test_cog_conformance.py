"""The testing kit's conformance suite, against the Cog container emulator over loopback."""

from __future__ import annotations

from typing import Any

import pytest
from gpubench_replicate import CogProvider
from gpubench_replicate.cog_emulator import make_app

from gpubench_sdk.testing import (
    FAULT_CASES,
    ASGIApp,
    FaultCase,
    ProviderConformance,
    ServedApp,
    SimulatedFleet,
)


class TestCogConformance(ProviderConformance):
    provider_class = CogProvider

    def make_emulator(self, fleet: SimulatedFleet) -> ASGIApp:
        return make_app(fleet, api_key=self.api_key)

    def options(self, url: str) -> dict[str, Any]:
        return {"url": url, "cold_threshold_ms": 200}  # the suite's fleet boots in 400 ms


class TestCogIdempotentPutConformance(TestCogConformance):
    """``PUT /predictions/{id}``: idempotent, so the HTTP client may resend it after a
    connection dropped before any byte (aiohttp does, for idempotent methods)."""

    def options(self, url: str) -> dict[str, Any]:
        return {**super().options(url), "mode": "put"}

    @pytest.mark.parametrize("case", FAULT_CASES, ids=[c.name for c in FAULT_CASES])
    def test_fault_is_mapped(
        self, case: FaultCase, served: ServedApp, fleet: SimulatedFleet
    ) -> None:
        if case.name != "reset":
            super().test_fault_is_mapped(case, served, fleet)
            return
        fleet.faults.next(1, case.fault, on=self.fault_route)

        async def go() -> Any:
            async with self.make_provider(served) as provider:
                return await self.timed_invoke(provider, self.request())

        result, _, _ = self.run_async(go())
        assert fleet.faults.injected, "the reset was never injected"
        assert result.output is not None
        assert len(fleet.truths()) == 1, "the resent PUT ran a second prediction"
