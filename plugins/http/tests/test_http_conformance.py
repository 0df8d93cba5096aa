"""The testing kit's conformance suite, against the generic JSON emulator over loopback."""

from __future__ import annotations

from typing import Any

import pytest
from gpubench_http import HTTPProvider
from gpubench_http.emulator import make_app

from gpubench_sdk import ClientHTTPError
from gpubench_sdk.testing import ASGIApp, ProviderConformance, ServedApp, SimulatedFleet


class TestHTTPConformance(ProviderConformance):
    provider_class = HTTPProvider

    def make_emulator(self, fleet: SimulatedFleet) -> ASGIApp:
        return make_app(fleet, api_key=self.api_key)

    def options(self, url: str) -> dict[str, Any]:
        return {"url": f"{url}/predict", "output_path": "$.output"}


class TestHTTPModalConformance(TestHTTPConformance):
    """Modal's shape: Modal-Key/Modal-Secret, the payload wrapped in ``input``, and a 303 to
    the result URL for every request still running after 0.1 s (Modal: 150 s), so cold starts,
    cancellation and faults are all checked through redirects."""

    api_key = "wk-conformance-1c2d:ws-conformance-3e4f"
    poll_errors_name_the_job = False  # httpx follows the 303 itself: the call id stays unseen

    def make_emulator(self, fleet: SimulatedFleet) -> ASGIApp:
        return make_app(fleet, api_key=self.api_key, auth="modal", redirect_after_s=0.1)

    def options(self, url: str) -> dict[str, Any]:
        return {**super().options(url), "auth_scheme": "modal", "body": {"input": "{payload}"}}

    def test_unauthorized_is_a_client_error(self, served: ServedApp) -> None:
        async def go() -> None:
            options = self.options(served.url)
            async with HTTPProvider(api_key="wk-wrong:ws-wrong", **options) as provider:
                await self.timed_invoke(provider, self.request())

        with pytest.raises(ClientHTTPError) as info:
            self.run_async(go())
        assert info.value.status_code == 401
