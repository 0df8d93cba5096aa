"""The conformance suite every provider plugin subclasses (like fsspec's abstract tests).

A plugin's whole test file::

    class TestMyProvider(ProviderConformance):
        provider_class = MyProvider
        def make_emulator(self, fleet): return my_emulator(fleet)
        def options(self, url): return {"base_url": url}

Each test serves the emulator over real HTTP on loopback, on a fresh ``SimulatedFleet``, and
compares what the provider reports with the fleet's ground truth. The capabilities the provider
declares switch on the matching tests; the others are skipped, saying why.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from collections.abc import Coroutine, Iterator
from pathlib import Path
from typing import Any, ClassVar, TypeVar

import pytest

from .. import telemetry
from .._base._errors import (
    ClientHTTPError,
    ProviderError,
    ServerHTTPError,
    ThrottledError,
)
from .._base._types import Request, Result, ScalingSettings
from .._contract._input import InputMap
from .._contract._provider import Provider
from .._contract._workload import EchoProbe
from .._runner._results import classify
from .._runner._runner import run
from .._scenarios import Burst, ColdStarts
from ._cases import FAULT_CASES, POLL_FAULT_CASES, FaultCase, check_retry_after, leak_forms
from ._faults import ASGIApp, Fault
from ._fleet import FleetConfig, SimulatedFleet
from ._harness import ServedApp, serve
from ._jobs import JobStatus, JobTruth
from ._otlp import check_exported, otlp_receiver
from ._timing import Duration

T = TypeVar("T")


ECHO = "conformance-echo"


class ProviderConformance:
    """Base class of a plugin's conformance tests. Not collected itself (no ``Test`` prefix).

    Set ``provider_class``; implement ``make_emulator(fleet)`` (an ASGI app speaking the
    provider's protocol on ``fleet``, with its job ids as request ids, faults applied through
    ``FaultInjector`` and the API key required) and ``options(url)`` (the provider's options
    pointing at the served emulator). Override the class attributes to tune the fleet.
    """

    provider_class: ClassVar[type[Provider]]
    fleet_config: ClassVar[FleetConfig] = FleetConfig(
        cold_start=Duration.fixed(0.4), max_workers=2, idle_timeout_s=1.0
    )
    api_key: ClassVar[str] = "gpbk-conformance-9f3c1e7a5d2b"
    timing_tolerance_ms: ClassVar[float] = 30.0
    cancels_remote_jobs: ClassVar[bool] = True
    fault_route: ClassVar[str] = "submit"
    invoke_timeout_s: ClassVar[float] = 30.0
    # A failed poll's error names the job it was polling (request_id). False only for a
    # protocol whose client never learns a job id (e.g. a redirect to a result URL, followed).
    poll_errors_name_the_job: ClassVar[bool] = True

    # -- what a plugin provides -----------------------------------------------------------

    def make_emulator(self, fleet: SimulatedFleet) -> ASGIApp:
        raise NotImplementedError("return the provider's emulator app for this fleet")

    def options(self, url: str) -> dict[str, Any]:
        raise NotImplementedError("return the provider options pointing at url")

    # -- fixtures and helpers -------------------------------------------------------------

    @pytest.fixture
    def fleet(self) -> SimulatedFleet:
        return SimulatedFleet(self.fleet_config)

    @pytest.fixture
    def served(self, fleet: SimulatedFleet) -> Iterator[ServedApp]:
        with serve(self.make_emulator(fleet)) as served:
            yield served

    def make_provider(self, served: ServedApp) -> Provider:
        return self.provider_class(api_key=self.api_key, **self.options(served.url))

    @staticmethod
    def run_async(coro: Coroutine[Any, Any, T]) -> T:
        return asyncio.run(coro)

    def request(self, sleep_ms: float = 20, seq: int = 0, **extra: Any) -> Request:
        payload = {**EchoProbe(sleep_ms=sleep_ms).request(seq).payload, "echo": ECHO, **extra}
        return Request(seq=seq, payload=payload, stream=bool(extra.get("chunks")))

    async def timed_invoke(self, provider: Provider, request: Request) -> tuple[Result, int, int]:
        start = time.perf_counter_ns()
        result = await asyncio.wait_for(provider.invoke(request), self.invoke_timeout_s)
        return result, start, time.perf_counter_ns()

    @staticmethod
    def truth_of(fleet: SimulatedFleet, result: Result) -> JobTruth:
        truths = fleet.truths()
        matching = [t for t in truths if t.job_id == result.request_id]
        assert matching, f"request_id {result.request_id!r} is no job of the fleet"
        return matching[0]

    # -- the checks -----------------------------------------------------------------------

    def test_invoke_returns_output(self, served: ServedApp, fleet: SimulatedFleet) -> None:
        async def go() -> Result:
            async with self.make_provider(served) as provider:
                result, _, _ = await self.timed_invoke(provider, self.request())
            return result

        result = self.run_async(go())
        assert isinstance(result, Result)
        assert result.output == {"echo": ECHO}
        assert self.truth_of(fleet, result).status is JobStatus.COMPLETED

    def test_input_map_reaches_the_server(self, served: ServedApp, fleet: SimulatedFleet) -> None:
        """The provider's ``input`` option (``InputMap``, applied by ``Provider`` itself) shapes
        what the job receives: the payload's ``text`` arrives as ``echo``, with a constant."""
        mapping = InputMap(rename={"text": "echo"}, set={"sleep_ms": 20})

        async def go() -> Result:
            made = self.make_provider(served)
            async with type(made)(made.options, input=mapping) as provider:
                request = Request(seq=0, payload={"text": ECHO})
                result, _, _ = await self.timed_invoke(provider, request)
            return result

        result = self.run_async(go())
        job = fleet.job(self.truth_of(fleet, result).job_id)
        assert job is not None and job.status is JobStatus.COMPLETED
        assert job.input.get("echo") == ECHO and "text" not in job.input, job.input
        assert job.input.get("sleep_ms") == 20, job.input

    def test_timings_are_consistent(self, served: ServedApp, fleet: SimulatedFleet) -> None:
        tol = self.timing_tolerance_ms
        timings = self.provider_class.capabilities.server_timings

        async def go() -> list[tuple[Result, int, int]]:
            async with self.make_provider(served) as provider:
                return [await self.timed_invoke(provider, self.request(40, i)) for i in range(4)]

        for result, start, end in self.run_async(go()):
            latency_ms = (end - start) / 1e6
            if result.first_byte_ns is not None:
                assert start <= result.first_byte_ns <= end
            truth = self.truth_of(fleet, result)
            for name in timings:
                assert getattr(result, name) is not None, f"{name} declared but not reported"
            phases = [v for v in (result.queue_ms, result.execution_ms) if v is not None]
            assert sum(phases) <= latency_ms + tol, (phases, latency_ms)
            if "queue_ms" in timings:
                assert truth.queue_ms is not None and result.queue_ms is not None
                assert abs(result.queue_ms - truth.queue_ms) <= tol, (result.queue_ms, truth)
            if "execution_ms" in timings:
                assert truth.execution_ms is not None and result.execution_ms is not None
                assert abs(result.execution_ms - truth.execution_ms) <= tol, (result, truth)
            if "setup_ms" in timings and truth.cold:
                assert truth.boot_ms is not None and result.setup_ms is not None
                assert abs(result.setup_ms - truth.boot_ms) <= tol, (result.setup_ms, truth)

    @pytest.mark.parametrize("case", FAULT_CASES, ids=[c.name for c in FAULT_CASES])
    def test_fault_is_mapped(
        self, case: FaultCase, served: ServedApp, fleet: SimulatedFleet
    ) -> None:
        route = "job" if case.fault.default_route == "job" else self.fault_route
        fleet.faults.next(case.times, case.fault, on=route)

        async def go() -> BaseException:
            async with self.make_provider(served) as provider:
                try:
                    await self.timed_invoke(provider, self.request())
                except ProviderError as exc:
                    return exc
            raise AssertionError(f"{case.name}: invoke succeeded despite the fault")

        exc = self.run_async(go())
        assert fleet.faults.injected, f"{case.name} was never injected: wrong fault_route?"
        assert isinstance(exc, case.errors), f"{case.name}: got {type(exc).__name__}: {exc}"
        assert classify(exc, self.provider_class.name)[0] in case.outcomes
        assert isinstance(exc, ProviderError) and exc.provider == self.provider_class.name
        if case.fault.status and isinstance(exc, ThrottledError | ServerHTTPError):
            assert exc.status_code == case.fault.status
        if isinstance(exc, ThrottledError):
            check_retry_after(case, exc)

    @pytest.mark.parametrize("case", POLL_FAULT_CASES, ids=[c.name for c in POLL_FAULT_CASES])
    def test_poll_fault_is_mapped(
        self, case: FaultCase, served: ServedApp, fleet: SimulatedFleet
    ) -> None:
        """A fault on the poll route either fails the request with the right error, naming
        the job it was polling (``request_id``), or is outlived: the right output comes back."""
        fleet.faults.next(case.times, case.fault, on="poll")

        async def go() -> Result | ProviderError:
            async with self.make_provider(served) as provider:
                try:
                    result, _, _ = await self.timed_invoke(provider, self.request(300))
                except ProviderError as exc:
                    return exc
            return result

        outcome = self.run_async(go())
        if fleet.faults.count("poll") == 0:
            pytest.skip("the provider did not poll (or its emulator names no route 'poll')")
        assert fleet.faults.injected, f"{case.name} was never injected on the poll route"
        job = fleet.truths()[0].job_id
        if isinstance(outcome, Result):
            assert outcome.output == {"echo": ECHO} and outcome.request_id == job, outcome
            return
        assert isinstance(outcome, case.errors), f"{case.name}: {type(outcome).__name__}"
        assert classify(outcome, self.provider_class.name)[0] in case.outcomes
        assert outcome.provider == self.provider_class.name
        if self.poll_errors_name_the_job:
            assert outcome.request_id == job, f"a failed poll lost the job id: {outcome!r}"

    def test_slow_response_is_waited_for(self, served: ServedApp, fleet: SimulatedFleet) -> None:
        fleet.faults.next(1, Fault.slow(0.3), on=self.fault_route)

        async def go() -> tuple[Result, int, int]:
            async with self.make_provider(served) as provider:
                return await self.timed_invoke(provider, self.request())

        result, start, end = self.run_async(go())
        assert result.output == {"echo": ECHO}
        assert (end - start) / 1e9 >= 0.3

    def test_unauthorized_is_a_client_error(self, served: ServedApp) -> None:
        async def go() -> None:
            options = self.options(served.url)
            async with self.provider_class(api_key="gpbk-wrong-key-0000", **options) as p:
                await self.timed_invoke(p, self.request())

        with pytest.raises(ClientHTTPError) as info:
            self.run_async(go())
        assert info.value.status_code in (401, 403)

    def test_cold_start_detection(self, served: ServedApp, fleet: SimulatedFleet) -> None:
        caps = self.provider_class.capabilities

        async def go() -> list[Result]:
            async with self.make_provider(served) as provider:
                if caps.cold_start_control:
                    check = await provider.ensure_cold(15)
                    assert check.confirmed, check
                cold, _, _ = await self.timed_invoke(provider, self.request(seq=0))
                warm, _, _ = await self.timed_invoke(provider, self.request(seq=1))
                return [cold, warm]

        cold, warm = self.run_async(go())
        assert self.truth_of(fleet, cold).cold is True
        assert self.truth_of(fleet, warm).cold is False
        if cold.cold is None and warm.cold is None:
            pytest.skip("the provider reports no cold flag")
        assert cold.cold is True and warm.cold is False, (cold, warm)

    def test_cancellation_cancels_the_job(self, served: ServedApp, fleet: SimulatedFleet) -> None:
        if not self.cancels_remote_jobs:
            pytest.skip("the protocol cannot cancel a job")

        async def go() -> bool:
            async with self.make_provider(served) as provider:
                task = asyncio.create_task(provider.invoke(self.request(sleep_ms=20_000)))
                deadline = time.monotonic() + 10
                while not any(t.status is JobStatus.RUNNING for t in fleet.truths()):
                    assert time.monotonic() < deadline, "the job never started"
                    await asyncio.sleep(0.02)
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
                return task.cancelled()

        assert self.run_async(go()), "invoke swallowed the cancellation"
        deadline = time.monotonic() + 5
        while fleet.truths()[0].status is not JobStatus.CANCELLED:
            assert time.monotonic() < deadline, f"job not cancelled: {fleet.truths()[0]}"
            time.sleep(0.02)

    def test_api_key_never_leaks(
        self,
        served: ServedApp,
        fleet: SimulatedFleet,
        tmp_path: Path,
        caplog: pytest.LogCaptureFixture,
    ) -> None:
        key = self.api_key
        caplog.set_level(logging.DEBUG)
        setup = telemetry.configure(in_memory=True, set_global=False)
        echoed = json.dumps({"error": f"invalid header Authorization: Bearer {key}"})
        fleet.faults.next(1, Fault.server_error(500, body=echoed), on=self.fault_route)
        fleet.faults.next(1, Fault.throttle(1, body=echoed), on=self.fault_route)
        provider = self.make_provider(served)
        scenarios: list[Any] = [Burst(total=4, concurrency=1)]
        if self.provider_class.capabilities.cold_start_control:
            scenarios.append(ColdStarts(n=1, warm_after=1, cold_timeout_s=15))
        store = tmp_path / "leak.sqlite"
        result = self.run_async(
            run(
                {"t": provider},
                EchoProbe(sleep_ms=5),
                scenarios,
                store=store,
                instruments=setup.instruments(),
            )
        )
        assert result.status == "completed"
        assert len(fleet.faults.injected) == 2

        async def failing() -> list[BaseException]:
            caught: list[BaseException] = []
            async with self.make_provider(served) as p:
                for fault in (
                    Fault.server_error(503, body=echoed),
                    Fault.throttle(2, body=echoed),
                ):
                    fleet.faults.next(1, fault, on=self.fault_route)
                    try:
                        await self.timed_invoke(p, self.request())
                    except ProviderError as exc:
                        caught.append(exc)
            assert len(caught) == 2, f"injected errors did not fail the requests: {caught}"
            return caught

        errors: list[BaseException | None] = list(self.run_async(failing()))
        artifacts = [caplog.text, repr(provider), repr(provider.options), str(provider.options)]
        artifacts.append(json.dumps(provider.options.public()))
        for exc in errors:
            while exc is not None:
                artifacts += [str(exc), repr(exc), repr(exc.args)]
                exc = exc.__cause__ or exc.__context__
        assert setup.spans is not None
        for span in setup.spans.get_finished_spans():
            artifacts += [span.to_json()]
        setup.shutdown()
        for path in tmp_path.glob("leak.sqlite*"):
            artifacts.append(path.read_bytes().decode("latin-1"))
        assert any("invalid header" in a for a in artifacts), "the echoed error was not kept"
        forms = leak_forms(key)
        leaks = [a[:200] for a in artifacts if any(form in a for form in forms)]
        assert not leaks, f"the API key (or an encoding of it) appears in: {leaks}"

    def test_telemetry_follows_semconv(self, served: ServedApp, tmp_path: Path) -> None:
        """Spans and metrics reach a real OTLP/HTTP receiver named by the semantic
        conventions: an HTTP client span per HTTP call (a submit, each poll) under each
        request's ``gpubench.invoke`` span; phase and scenario on every metric point."""
        with otlp_receiver() as (url, received):
            setup = telemetry.configure(otlp_endpoint=url, set_global=False)
            result = self.run_async(
                run(
                    {"t": self.make_provider(served)},
                    EchoProbe(sleep_ms=60),  # long enough for a polling provider to poll
                    [Burst(total=3, concurrency=1, warmup=1)],
                    store=tmp_path / "otlp.sqlite",
                    instruments=setup.instruments(),
                )
            )
            setup.shutdown()  # flushes both exporters to the receiver
        assert result.status == "completed"
        check_exported(received, secret=self.api_key, warmup=1, measured=3)

    # -- capability checks ----------------------------------------------------------------

    def test_fleet_state_matches(self, served: ServedApp, fleet: SimulatedFleet) -> None:
        if not self.provider_class.capabilities.fleet_state:
            pytest.skip("fleet_state not declared")
        fleet.set_scaling(ScalingSettings(idle_timeout_s=60))

        async def go() -> None:
            async with self.make_provider(served) as provider:
                await self.timed_invoke(provider, self.request(5))
                counts = fleet.counts()
                state = await provider.state()
                assert (state.ready, state.busy, state.starting) == (counts.idle, 0, 0), state
                task = asyncio.create_task(provider.invoke(self.request(1500)))
                await asyncio.to_thread(fleet.wait_for, lambda c: c.running == 1, 10)
                state = await provider.state()
                assert state.busy == 1 and state.ready == fleet.counts().idle, state
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError, ProviderError):
                    await task

        self.run_async(go())

    def test_ensure_cold_leaves_no_worker(self, served: ServedApp, fleet: SimulatedFleet) -> None:
        if not self.provider_class.capabilities.cold_start_control:
            pytest.skip("cold_start_control not declared")
        fleet.set_scaling(ScalingSettings(min_workers=1))
        fleet.wait_for(lambda c: c.idle == 1, 10)

        async def go() -> None:
            async with self.make_provider(served) as provider:
                check = await provider.ensure_cold(20)
                assert check.confirmed, check
                assert fleet.counts().is_cold, fleet.counts()
                result, _, _ = await self.timed_invoke(provider, self.request())
                assert self.truth_of(fleet, result).cold is True

        self.run_async(go())
        assert fleet.scaling.min_workers == 1, "close() did not restore the user's min workers"

    def test_scaling_round_trip(self, served: ServedApp, fleet: SimulatedFleet) -> None:
        if not self.provider_class.capabilities.scaling_settings:
            pytest.skip("scaling_settings not declared")
        original = fleet.scaling
        wanted = ScalingSettings(min_workers=1, max_workers=3, idle_timeout_s=2)

        async def go() -> None:
            async with self.make_provider(served) as provider:
                assert await provider.get_scaling() == original
                await provider.set_scaling(wanted)
                assert fleet.scaling == wanted
                assert await provider.get_scaling() == wanted

        self.run_async(go())
        assert fleet.scaling == original, "close() did not restore the scaling settings"

    def test_streaming(self, served: ServedApp, fleet: SimulatedFleet) -> None:
        if not self.provider_class.capabilities.streaming:
            pytest.skip("streaming not declared")

        async def go() -> tuple[Result, int, int]:
            async with self.make_provider(served) as provider:
                return await self.timed_invoke(provider, self.request(90, chunks=3))

        result, start, end = self.run_async(go())
        assert result.output is not None
        assert self.truth_of(fleet, result).chunks == 3
        assert result.first_byte_ns is not None and start <= result.first_byte_ns <= end
