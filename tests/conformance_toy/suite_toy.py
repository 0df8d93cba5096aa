"""Run by tests/test_testing_conformance.py in a child pytest: a good toy and broken ones."""

from __future__ import annotations

import base64
import logging
from typing import Any

import httpx
from toy import ToyProvider, toy_emulator

from gpubench_sdk import Result, ServerHTTPError, ThrottledError
from gpubench_sdk.testing import ASGIApp, ProviderConformance, SimulatedFleet


class TestToy(ProviderConformance):
    provider_class = ToyProvider
    cancels_remote_jobs = False  # a synchronous protocol has no job to cancel

    def make_emulator(self, fleet: SimulatedFleet) -> ASGIApp:
        return toy_emulator(fleet, self.api_key)

    def options(self, url: str) -> dict[str, Any]:
        return {"url": url}


class LeakyProvider(ToyProvider):
    # ProviderError masks remembered secrets in its own message, so this one leaks where
    # nothing can mask it for the plugin: its own log lines.
    def throttled(self, retry_after_s: float | None, kw: dict[str, Any]) -> Exception:
        assert self.options.api_key is not None
        logging.getLogger("toy").warning(
            "throttled for %s", self.options.api_key.get_secret_value()
        )
        return ThrottledError("throttled", retry_after_s=retry_after_s, **kw)


class TestLeaky(TestToy):
    provider_class = LeakyProvider


class Base64LeakyProvider(ToyProvider):
    # The key inside an HTTP Basic credential, as a debug log line might show the header.
    def throttled(self, retry_after_s: float | None, kw: dict[str, Any]) -> Exception:
        assert self.options.api_key is not None
        basic = base64.b64encode(f"user:{self.options.api_key.get_secret_value()}".encode())
        logging.getLogger("toy").warning("sent Authorization: Basic %s", basic.decode())
        return ThrottledError("throttled", retry_after_s=retry_after_s, **kw)


class TestBase64Leaky(TestToy):
    provider_class = Base64LeakyProvider


class ThrottleAs5xxProvider(ToyProvider):
    def throttled(self, retry_after_s: float | None, kw: dict[str, Any]) -> Exception:
        return ServerHTTPError("throttled", **kw)


class TestThrottleAs5xx(TestToy):
    provider_class = ThrottleAs5xxProvider


class LyingTimingsProvider(ToyProvider):
    async def invoke(self, request: Any) -> Result:
        result = await super().invoke(request)
        assert result.queue_ms is not None
        result.queue_ms += 100  # not what the server said
        return result


class TestLyingTimings(TestToy):
    provider_class = LyingTimingsProvider


class FloatRetryAfterProvider(ToyProvider):
    # Retry-After read as a number only: an HTTP date (RFC 9110 allows one) is lost.
    def retry_after(self, response: httpx.Response) -> float | None:
        try:
            return float(response.headers.get("retry-after", ""))
        except ValueError:
            return None


class TestFloatRetryAfter(TestToy):
    provider_class = FloatRetryAfterProvider
