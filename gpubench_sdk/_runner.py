"""The runner: executes scenarios against targets side by side and records every request."""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import httpx

from ._errors import (
    ConfigError,
    GpubenchError,
    ProviderError,
)
from ._monitor import HealthWindow, Monitor
from ._provider import Provider
from ._scenarios import Burst, ColdStarts, Rate, Scenario
from ._secrets import redact
from ._store import RunInfo, ScenarioRecord, Store, TargetRecord
from ._telemetry import Instruments
from ._types import ColdCheck, Invocation, Outcome, Phase
from ._workload import Workload

log = logging.getLogger("gpubench.runner")

Observer = Callable[[Invocation], None]


@dataclass(frozen=True, slots=True)
class Target:
    """A named provider instance to benchmark. Names must be unique within a run."""

    name: str
    provider: Provider


@dataclass(slots=True)
class RunResult:
    """What a finished (or stopped) run leaves behind; the samples are in ``store``."""

    run: RunInfo
    store_path: Path
    status: str
    requests: int
    stop_reason: str | None = None
    health: list[HealthWindow] = field(default_factory=list)

    @property
    def run_id(self) -> int:
        return self.run.id

    @property
    def client_bound_s(self) -> float:
        """Seconds of the run during which the client itself was the bottleneck."""
        return float(sum(1 for w in self.health if w.client_bound))


def classify(exc: BaseException, provider: str) -> tuple[Outcome, int | None, str]:
    """Place an exception from ``invoke`` in the outcome taxonomy, with a safe message."""
    status: int | None = None
    if isinstance(exc, ProviderError):
        outcome, status = exc.outcome, exc.status_code
    elif isinstance(exc, httpx.HTTPStatusError):
        status = exc.response.status_code
        if status == 429:
            outcome = Outcome.THROTTLED
        elif status >= 500:
            outcome = Outcome.HTTP_5XX
        else:
            outcome = Outcome.HTTP_4XX
    elif isinstance(exc, httpx.TimeoutException | TimeoutError):
        outcome = Outcome.TIMEOUT
    elif isinstance(exc, httpx.TransportError | OSError):
        outcome = Outcome.TRANSPORT
    else:
        # JSON/Key/Type errors while parsing a response, or a plugin bug: either way the
        # answer could not be used. The exception type is kept so bugs stay visible.
        outcome = Outcome.INVALID_RESPONSE
    message = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
    if not isinstance(exc, ProviderError):
        message = f"[{provider}] {message}"
    return outcome, status, redact(message)[:500]


class _Live:
    """Per-target state during a run: the open provider and its seq counter per scenario."""

    __slots__ = ("attrs", "idx", "name", "provider")

    def __init__(self, idx: int, target: Target) -> None:
        self.idx = idx
        self.name = target.name
        self.provider = target.provider
        self.attrs: dict[str, Any] = {}


class Runner:
    """Runs ``scenarios`` in order; within each, all targets are driven at the same time.

    Every completed request becomes an ``Invocation`` appended to the store at once (committed
    within the store's flush interval), recorded as one span, and passed to ``observers``.
    ``stop()`` ends the run early; requests in flight are recorded as ``cancelled``.
    """

    def __init__(
        self,
        targets: Sequence[Target] | Mapping[str, Provider],
        workload: Workload,
        scenarios: Sequence[Scenario],
        *,
        store: Store | str | Path,
        name: str = "run",
        config: Mapping[str, Any] | None = None,
        instruments: Instruments | None = None,
        observers: Iterable[Observer] = (),
        max_requests: int | None = None,
        monitor: bool = True,
        fleet_interval_s: float | None = 0.5,
    ) -> None:
        if isinstance(targets, Mapping):
            targets = [Target(n, p) for n, p in targets.items()]
        if not targets:
            raise ConfigError("targets", [], "at least one target")
        names = [t.name for t in targets]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise ConfigError("targets.name", dupes[0], "a name used by one target only")
        if not scenarios:
            raise ConfigError("scenarios", [], "at least one scenario")
        if max_requests is not None and max_requests < 1:
            raise ConfigError("max_requests", max_requests, "an integer >= 1")
        blind = [t.name for t in targets if not t.provider.capabilities.cold_start_control]
        for sc in scenarios:
            if isinstance(sc, ColdStarts) and blind and sc.idle_gap_s is None:
                raise ConfigError(
                    "cold_starts.idle_gap_s",
                    None,
                    f"seconds to wait between requests for targets without cold-start control "
                    f"({', '.join(blind)}): at least the platform's scale-down delay",
                )
        self._targets = list(targets)
        self._workload = workload
        self._scenarios = list(scenarios)
        self._own_store = not isinstance(store, Store)
        self._store = store if isinstance(store, Store) else Store(store)
        self._name = name
        self._config = dict(config or {})
        self._instruments = instruments or Instruments()
        self._observers = list(observers)
        self._max_requests = max_requests
        self._use_monitor = monitor
        self._fleet_interval_s = fleet_interval_s
        self._scope: anyio.CancelScope | None = None
        self._stop_reason: str | None = None
        self._inflight = 0
        self._sent = 0
        self._origin_ns = 0
        self._origin_wall_ns = 0
        self._run_id = 0
        # Multi-process load generation: this process drives every `_shard[1]`-th request,
        # starting at `_shard[0]`, of a run that `_joined` says the parent already began.
        self._shard = (0, 1)
        self._joined: RunInfo | None = None
        self.result: RunResult | None = None

    @property
    def store(self) -> Store:
        return self._store

    def stop(self, reason: str = "stopped by user") -> None:
        """End the run early (safe from signal handlers running in the event loop)."""
        if self._stop_reason is None:
            self._stop_reason = reason
        if self._scope is not None:
            self._scope.cancel()

    def begin(self) -> RunInfo:
        """Record the run in the store; ``run`` calls it unless a parent process did."""
        self._origin_ns = time.perf_counter_ns()
        self._origin_wall_ns = time.time_ns()
        return self._store.begin_run(
            name=self._name,
            config=self._config,
            targets=[self._target_record(t) for t in self._targets],
            scenarios=[ScenarioRecord(s.kind, s.params()) for s in self._scenarios],
            origin_ns=self._origin_ns,
            started_wall_ns=self._origin_wall_ns,
        )

    def join(self, run: RunInfo, shard: int, shards: int) -> None:
        """Make this runner one of ``shards`` processes driving the already begun ``run``."""
        self._joined = run
        self._shard = (shard, shards)
        self._origin_ns = run.origin_ns
        self._origin_wall_ns = run.started_wall_ns

    async def run(self) -> RunResult:
        info = self._joined or self.begin()
        self._run_id = info.id
        status, error = "completed", None
        monitor = Monitor(
            origin_ns=self._origin_ns, inflight=lambda: self._inflight, sink=self._health
        )
        try:
            with anyio.CancelScope() as scope:
                self._scope = scope
                if self._stop_reason is not None:
                    scope.cancel()
                async with AsyncExitStack() as stack:
                    live = []
                    for idx, target in enumerate(self._targets):
                        await stack.enter_async_context(target.provider)
                        live.append(_Live(idx, target))
                    async with anyio.create_task_group() as tg:
                        if self._use_monitor:
                            tg.start_soon(monitor.run)
                        if self._fleet_interval_s and self._shard[0] == 0:
                            for lt in live:
                                if lt.provider.capabilities.fleet_state:
                                    tg.start_soon(self._watch_fleet, lt, self._fleet_interval_s)
                        for sidx, scenario in enumerate(self._scenarios):
                            self._label(live, scenario)
                            await self._scenario(live, sidx, scenario)
                        tg.cancel_scope.cancel()
            if scope.cancelled_caught and self._stop_reason != "max_requests reached":
                status = "cancelled"
        except BaseExceptionGroup as group:
            # Task groups wrap what their tasks raise; a lone error is re-raised as itself.
            inner = _sole(group)
            status, error = "failed", redact(f"{type(inner).__name__}: {inner}")
            if inner is group:
                raise
            raise inner from None
        except BaseException as exc:
            status, error = "failed", redact(f"{type(exc).__name__}: {exc}")
            raise
        finally:
            self._scope = None
            with anyio.CancelScope(shield=True):
                if self._joined is None:
                    await anyio.to_thread.run_sync(self._store.end_run, self._run_id, status, error)
                else:
                    await anyio.to_thread.run_sync(self._store.flush)
                final = self._store.run(self._run_id)
            self.result = RunResult(
                run=final,
                store_path=Path(self._store.path),
                status=status,
                requests=self._sent,
                stop_reason=self._stop_reason,
                health=monitor.windows,
            )
            if self._own_store:
                self._store.close()
        return self.result

    def _target_record(self, target: Target) -> TargetRecord:
        p = target.provider
        options = json.loads(p.options.model_dump_json())  # api_key is excluded by the model
        return TargetRecord(target.name, p.name, options, p.capabilities.names())

    def _label(self, live: list[_Live], scenario: Scenario) -> None:
        for lt in live:
            lt.attrs = {
                "gpubench.target": lt.name,
                "gpubench.provider": lt.provider.name,
                "gpubench.workload": self._workload.name,
                "gpubench.scenario": scenario.kind,
            }

    def _health(self, w: HealthWindow) -> None:
        self._store.append_health(
            self._run_id, w.t_ns, w.loop_lag_ms, w.cpu_pct, w.inflight, w.client_bound
        )

    async def _watch_fleet(self, lt: _Live, interval_s: float) -> None:
        """Record the target's workers over the whole run: scale-out and scale-to-zero as data."""
        warned = False
        while True:
            try:
                state = await lt.provider.state()
                t_ns = time.perf_counter_ns() - self._origin_ns
                self._store.append_fleet(self._run_id, lt.name, t_ns, state)
            except Exception as exc:  # a failing poll never stops the measurement
                if not warned:
                    warned = True
                    log.warning("%s: fleet state unavailable: %s", lt.name, redact(str(exc)))
            await anyio.sleep(interval_s)

    async def _scenario(self, live: list[_Live], sidx: int, scenario: Scenario) -> None:
        deadline = getattr(scenario, "deadline_s", None)
        with anyio.move_on_after(deadline if deadline is not None else float("inf")):
            if isinstance(scenario, Burst):
                await self._burst(live, sidx, scenario)
            elif isinstance(scenario, Rate):
                await self._rate(live, sidx, scenario)
            elif isinstance(scenario, ColdStarts):
                await self._cold_starts(live, sidx, scenario)
            else:  # pragma: no cover - the Scenario union is closed
                raise ConfigError("scenario", scenario, "Burst, Rate or ColdStarts")

    # -- the hot path ---------------------------------------------------------------------

    async def _send(
        self,
        lt: _Live,
        sidx: int,
        seq: int,
        phase: Phase,
        scheduled_ns: int,
        expect_cold: bool | None = None,
        check: ColdCheck | None = None,
    ) -> Invocation:
        if self._max_requests is not None and self._sent >= self._max_requests:
            self.stop("max_requests reached")
            await anyio.lowlevel.checkpoint()  # delivers the cancellation
        self._sent += 1
        request = self._workload.request(seq)
        self._inflight += 1
        wall = time.time_ns()
        start = time.perf_counter_ns()
        scheduled_ns = min(scheduled_ns, start)  # a timer may fire a hair early
        result = None
        status = None
        error = None
        outcome = Outcome.OK
        units: tuple[int | None, int | None] = (None, None)
        cancelled: BaseException | None = None
        try:
            result = await lt.provider.invoke(request)
        except anyio.get_cancelled_exc_class() as exc:
            cancelled = exc
            outcome, error = Outcome.CANCELLED, self._stop_reason or "cancelled"
        except Exception as exc:
            outcome, status, error = classify(exc, lt.provider.name)
        end = time.perf_counter_ns()
        self._inflight -= 1
        if result is not None:
            status = result.http_status if result.http_status is not None else status
            units = (result.input_units, result.output_units)
            if result.output_units is None and result.input_units is None:
                try:
                    units = self._workload.read(result.output)
                except Exception as exc:
                    outcome, _, error = classify(exc, lt.provider.name)
        origin = self._origin_ns
        cold = None if result is None else result.cold
        confirmed = cold is True
        if cold is None and expect_cold is not None:
            cold = expect_cold
            confirmed = bool(expect_cold and check is not None and check.confirmed)
        fb = None if result is None else result.first_byte_ns
        inv = Invocation(
            target=lt.name,
            scenario=sidx,
            seq=seq,
            phase=phase,
            scheduled_ns=scheduled_ns - origin,
            start_ns=start - origin,
            end_ns=end - origin,
            wall_start_ns=wall,
            outcome=outcome,
            first_byte_ns=None if fb is None else fb - origin,
            http_status=status,
            error=error,
            request_id=None if result is None else result.request_id,
            queue_ms=None if result is None else result.queue_ms,
            execution_ms=None if result is None else result.execution_ms,
            setup_ms=None if result is None else result.setup_ms,
            cold=cold,
            cold_confirmed=confirmed,
            input_units=units[0],
            output_units=units[1],
            worker_id=None if result is None else result.worker_id,
        )
        self._store.append(self._run_id, inv)
        self._instruments.record(inv, lt.attrs, self._origin_wall_ns)
        for observer in self._observers:
            observer(inv)
        if cancelled is not None:
            raise cancelled
        return inv

    # -- scenarios ------------------------------------------------------------------------

    async def _closed_loop(
        self, lt: _Live, sidx: int, seqs: range, concurrency: int, phase: Phase
    ) -> None:
        pending = iter(seqs)

        async def slot() -> None:
            for seq in pending:  # one shared iterator: each seq is sent exactly once
                await self._send(lt, sidx, seq, phase, time.perf_counter_ns())

        async with anyio.create_task_group() as tg:
            for _ in range(min(concurrency, len(seqs))):
                tg.start_soon(slot)

    def _share(self, seqs: range, concurrency: int) -> tuple[range, int]:
        """This shard's part of a closed loop: every n-th seq and its part of the slots."""
        k, n = self._shard
        return seqs[k::n], concurrency // n + (1 if k < concurrency % n else 0)

    async def _burst(self, live: list[_Live], sidx: int, sc: Burst) -> None:
        async def one_target(lt: _Live) -> None:
            if sc.warmup:
                seqs, slots = self._share(range(-sc.warmup, 0), sc.concurrency)
                await self._closed_loop(lt, sidx, seqs, slots, Phase.WARMUP)
            seqs, slots = self._share(range(sc.total), sc.concurrency)
            await self._closed_loop(lt, sidx, seqs, slots, Phase.MEASURE)

        async with anyio.create_task_group() as tg:
            for lt in live:
                tg.start_soon(one_target, lt)

    async def _rate(self, live: list[_Live], sidx: int, sc: Rate) -> None:
        k, n = self._shard
        if sc.warmup:
            seqs, _ = self._share(range(-sc.warmup, 0), 1)
            async with anyio.create_task_group() as tg:
                for lt in live:
                    tg.start_soon(self._closed_loop, lt, sidx, seqs, 1, Phase.WARMUP)
        limiters = [anyio.Semaphore(sc.max_inflight) for _ in live]

        async def fire(lt: _Live, sem: anyio.Semaphore, seq: int, due: int) -> None:
            try:
                await self._send(lt, sidx, seq, Phase.MEASURE, due)
            finally:
                sem.release()

        t0 = time.perf_counter_ns()
        async with anyio.create_task_group() as tg:
            for seq, offset_s in enumerate(sc.offsets_s()):
                if seq % n != k:  # another process sends this one, on the same schedule
                    continue
                due = t0 + int(offset_s * 1e9)
                delay = (due - time.perf_counter_ns()) / 1e9
                if delay > 0:
                    await anyio.sleep(delay)
                for lt, sem in zip(live, limiters, strict=True):
                    # At max_inflight the schedule waits; the wait is counted in latency
                    # (from the scheduled time), never hidden.
                    await sem.acquire()
                    tg.start_soon(fire, lt, sem, seq, due)

    async def _cold_starts(self, live: list[_Live], sidx: int, sc: ColdStarts) -> None:
        if self._shard[0] != 0:
            return  # cold starts are sequential by nature: the first process sends them all
        seq = 0

        async def one_target(lt: _Live, first_seq: int) -> None:
            check = await self._make_cold(lt, sc)
            await self._send(
                lt, sidx, first_seq, Phase.MEASURE, time.perf_counter_ns(), True, check
            )
            for k in range(sc.warm_after):
                await self._send(
                    lt, sidx, first_seq + 1 + k, Phase.MEASURE, time.perf_counter_ns(), False
                )

        for _ in range(sc.n):
            async with anyio.create_task_group() as tg:
                for lt in live:
                    tg.start_soon(one_target, lt, seq)
            seq += 1 + sc.warm_after

    async def _make_cold(self, lt: _Live, sc: ColdStarts) -> ColdCheck:
        provider = lt.provider
        if not provider.capabilities.cold_start_control:
            assert sc.idle_gap_s is not None
            await anyio.sleep(sc.idle_gap_s)
            return ColdCheck(False, sc.idle_gap_s, f"waited idle gap {sc.idle_gap_s:g} s")
        began = time.perf_counter()
        try:
            return await provider.ensure_cold(sc.cold_timeout_s)
        except GpubenchError as exc:
            # A failed check does not stop the study: the sample is kept, marked unconfirmed.
            log.warning("%s: could not confirm a cold target: %s", lt.name, redact(str(exc)))
            return ColdCheck(False, time.perf_counter() - began, f"ensure_cold failed: {exc}")


def _sole(group: BaseExceptionGroup[BaseException]) -> BaseException:
    """The one leaf exception of nested single-member groups, else the group itself."""
    inner: BaseException = group
    while isinstance(inner, BaseExceptionGroup) and len(inner.exceptions) == 1:
        inner = inner.exceptions[0]
    return inner


async def run(
    targets: Sequence[Target] | Mapping[str, Provider],
    workload: Workload,
    scenarios: Sequence[Scenario],
    *,
    store: Store | str | Path = "gpubench.sqlite",
    **kwargs: Any,
) -> RunResult:
    """Run ``scenarios`` against ``targets`` and return the result. See ``Runner``."""
    return await Runner(targets, workload, scenarios, store=store, **kwargs).run()
