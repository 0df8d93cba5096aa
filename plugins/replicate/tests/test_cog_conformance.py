"""The testing kit's conformance suite, against the Cog container emulator over loopback.

The emulator runs ``behind_proxy``: the kit's ground truth calls a request cold when a worker
booted for it, which is what a proxy that holds requests during setup gives. A container
answering directly (503 while setup runs) is covered in ``test_cog_protocol.py`` and against
Cog's own server in ``test_cog_real_server.py``.
"""

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
        return make_app(fleet, api_key=self.api_key, behind_proxy=True)

    def options(self, url: str) -> dict[str, Any]:
        return {"url": url, "cold_threshold_ms": 200}  # the suite's fleet boots in 400 ms

    @pytest.mark.parametrize("case", FAULT_CASES, ids=[c.name for c in FAULT_CASES])
    def test_fault_is_mapped(
        self, case: FaultCase, served: ServedApp, fleet: SimulatedFleet
    ) -> None:
        if case.name != "unavailable_while_cold":
            super().test_fault_is_mapped(case, served, fleet)
            return
        # A 503 while the container starts is its setup, which /health-check confirms
        # (STARTING): the cold start is waited out and reported, never an error.
        fleet.faults.next(1, case.fault, on=self.fault_route)

        async def go() -> Any:
            async with self.make_provider(served) as provider:
                return await self.timed_invoke(provider, self.request())

        result, _, _ = self.run_async(go())
        assert fleet.faults.injected, "the 503 was never injected"
        assert result.cold is True and result.cold_confirmed and result.setup_ms is not None
        assert result.detail is not None and result.detail["setup_wait_ms"] > 0


class TestCogIdempotentPutConformance(TestCogConformance):
    """``PUT /predictions/{id}``: idempotent creation, so a retried request joins the running
    prediction instead of starting another."""

    def options(self, url: str) -> dict[str, Any]:
        return {**super().options(url), "mode": "put"}
