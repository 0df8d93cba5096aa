"""The testing kit's conformance suite against the Modal web endpoint emulator over loopback
HTTP, with proxy auth and the long-request redirect scaled down from 150 s to 0.4 s.

Timing: boots take 0.2 s, so the suite's short requests (20 ms, cold: 0.22 s) are answered
directly, and its 300 ms poll-route requests (cold: 0.5 s) get a ``303`` to the result URL,
which the provider follows with ``GET``: the poll faults land there."""

from __future__ import annotations

from typing import Any, ClassVar

import pytest
from gpubench_modal import ModalProvider
from gpubench_modal.emulator import make_app

from gpubench_sdk import ClientHTTPError
from gpubench_sdk.testing import (
    ASGIApp,
    Duration,
    FleetConfig,
    ProviderConformance,
    ServedApp,
    SimulatedFleet,
)


class TestModalConformance(ProviderConformance):
    provider_class = ModalProvider
    api_key: ClassVar[str] = "wk-conf9f3c1e7a:ws-conf5d2b8a4c6e"
    fleet_config: ClassVar[FleetConfig] = FleetConfig(
        cold_start=Duration.fixed(0.2), max_workers=2, idle_timeout_s=1.0
    )

    def make_emulator(self, fleet: SimulatedFleet) -> ASGIApp:
        return make_app(fleet, api_key=self.api_key, redirect_after_s=0.4)

    def options(self, url: str) -> dict[str, Any]:
        return {"url": url + "/generate", "cold_threshold_ms": 120}

    def test_unauthorized_is_a_client_error(self, served: ServedApp) -> None:
        """The kit's wrong key has no ':', which the options refuse before anything is sent
        (naming api_key; a plan gets a ConfigError): a wrong token of the right shape gets
        Modal's 401."""

        async def go(key: str) -> None:
            async with self.provider_class(api_key=key, **self.options(served.url)) as p:
                await self.timed_invoke(p, self.request())

        with pytest.raises(ValueError, match="api_key: got '\\(hidden\\)'"):
            self.run_async(go("gpbk-wrong-key-0000"))
        with pytest.raises(ClientHTTPError) as info:
            self.run_async(go("wk-wrong0000:ws-wrong0000"))
        assert info.value.status_code == 401 and "proxy authorization" in str(info.value)
