"""The testing kit's conformance suite, against the OpenAI-compatible emulator over loopback."""

from __future__ import annotations

from typing import Any

from gpubench_openai import OpenAIProvider
from gpubench_openai.emulator import make_app

from gpubench_sdk.testing import ASGIApp, Fault, ProviderConformance, ServedApp, SimulatedFleet

ECHO = "conformance-echo"  # what the testing kit's conformance requests ask to be echoed


class TestOpenAIConformance(ProviderConformance):
    provider_class = OpenAIProvider

    def make_emulator(self, fleet: SimulatedFleet) -> ASGIApp:
        return make_app(fleet, api_key=self.api_key, model="m")

    def options(self, url: str) -> dict[str, Any]:
        return {"base_url": f"{url}/v1", "model": "m"}

    # An OpenAI server answers text, not the probe's JSON object: the emulator's answer is the
    # job's echo as text, so these two checks look for the echo there instead.
    def test_invoke_returns_output(self, served: ServedApp, fleet: SimulatedFleet) -> None:
        async def go() -> Any:
            async with self.make_provider(served) as provider:
                result, _, _ = await self.timed_invoke(provider, self.request())
            return result

        result = self.run_async(go())
        assert result.output["text"].strip() == ECHO
        assert self.truth_of(fleet, result).status.value == "completed"

    def test_slow_response_is_waited_for(self, served: ServedApp, fleet: SimulatedFleet) -> None:

        fleet.faults.next(1, Fault.slow(0.3), on=self.fault_route)

        async def go() -> Any:
            async with self.make_provider(served) as provider:
                return await self.timed_invoke(provider, self.request())

        result, start, end = self.run_async(go())
        assert result.output["text"].strip() == ECHO
        assert (end - start) / 1e9 >= 0.3

    def test_streaming(self, served: ServedApp, fleet: SimulatedFleet) -> None:
        super().test_streaming(served, fleet)

        async def go() -> Any:
            async with self.make_provider(served) as provider:
                return await self.timed_invoke(provider, self.request(90, seq=1, chunks=3))

        result, start, end = self.run_async(go())
        times = result.token_times_ns
        assert len(times) == 3 and start <= times[0] <= times[-1] <= end
        assert result.output["text"].split() == [ECHO] * 3
        assert result.output_units == 3 and result.detail is None  # from the usage chunk


class TestOpenAICompletionsConformance(TestOpenAIConformance):
    def options(self, url: str) -> dict[str, Any]:
        return {**super().options(url), "api": "completions"}
