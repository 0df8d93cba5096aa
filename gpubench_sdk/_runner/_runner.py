"""The runner: executes scenarios against targets side by side and records every request.

This module holds the orchestration (validating the plan, opening providers, the run's
lifecycle and its record in the store, shards, fleet and health sampling); ``_send`` the
per-request hot path and the budget (a base of ``Runner``). The runner knows no scenario kind:
each scenario drives itself through a ``Load`` (``_load``, over the loops of
``_drivers``), which reaches the run only through the ``RunState`` made here.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from contextlib import AsyncExitStack
from dataclasses import asdict
from pathlib import Path
from typing import Any

import anyio
import anyio.lowlevel
import anyio.to_thread

from .._base._errors import ConfigError
from .._base._monitor import HealthWindow, Monitor
from .._base._secrets import redact
from .._base._types import Invocation
from .._contract._input import check_inputs
from .._contract._provider import Provider
from .._contract._workload import Workload
from .._scenarios import Scenario
from .._store._store import DEFAULT_FLUSH_INTERVAL_S, RunInfo, ScenarioRecord, Store, TargetRecord
from .._transport._spans import reset_tracer, use_tracer
from ..cost._meter import BudgetGuard
from ..metrics._ready import mark_false_ready
from ._deployment import read_deployment
from ._drivers import RunState
from ._gc import startup_frozen
from ._load import RunLoad
from ._resources import check_open_files, out_of_files, unwrap
from ._results import RunResult, Target
from ._send import (
    BUDGET_SPENT,
    LiveTarget,
    Observer,
    RequestSender,
    SharedCounter,
    retry_after_s,
)
from ._telemetry import Instruments

__all__ = [
    "BUDGET_SPENT",
    "Observer",
    "Runner",
    "SharedCounter",
    "check_run",
    "retry_after_s",
    "run",
]

log = logging.getLogger("gpubench.runner")

DEADLINE_CUT = "deadline"  # ScenarioRecord.status of a scenario cut short by its deadline_s
CLOSE_TIMEOUT_S = 60.0  # how long a provider may take to restore settings when a run ends


class Runner(RequestSender):
    """Runs ``scenarios`` in order; within each, all targets are driven at the same time.

    Every completed request becomes an ``Invocation`` appended to the store at once (committed
    within the store's flush interval), recorded as one span, and passed to ``observers``.
    ``stop()`` ends the run early; requests in flight are recorded as ``cancelled``.
    ``max_requests`` stops sending once that many requests went out and lets those in flight
    finish. Each request is bounded by its provider's ``timeout_s`` (outcome ``timeout``).
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
        cost_guard: BudgetGuard | None = None,
        monitor: bool = True,
        fleet_interval_s: float | None = 0.5,
        flush_interval_s: float = DEFAULT_FLUSH_INTERVAL_S,
    ) -> None:
        if isinstance(targets, Mapping):
            targets = [Target(n, p) for n, p in targets.items()]
        check_run(targets, workload, scenarios, max_requests)
        self._targets = list(targets)
        self._workload = workload
        self._scenarios = list(scenarios)
        self._own_store = not isinstance(store, Store)
        self._store = (
            store if isinstance(store, Store) else Store(store, flush_interval_s=flush_interval_s)
        )
        self._name = name
        self._config = dict(config or {})
        # A run started from Python has no plan: its workload is stored as a plan's table
        # would hold it, so what reads stored runs (groupings, reports) sees what was sent.
        self._config.setdefault(
            "workload", {"kind": workload.name, **workload.options.model_dump(mode="json")}
        )
        self._instruments = instruments or Instruments()
        self._observers = list(observers)
        self._budget = max_requests
        # Budget guard: per-target cost meters and caps (gpubench_sdk.cost); None = no meter.
        self._guard = cost_guard
        self._use_monitor = monitor
        self._fleet_interval_s = fleet_interval_s
        self._scope: anyio.CancelScope | None = None
        self._stop_reason: str | None = None
        self._inflight = 0
        self._sent = 0
        self._origin_ns = 0
        self._origin_wall_ns = 0
        self._run_id = 0
        # Multi-process load generation: this process is shard `_shard[0]` of `_shard[1]`
        # driving a run the parent began (`_joined`); `_sync` waits for the other shards
        # before each scenario, `_abort` releases them when this one stops early.
        self._shard = (0, 1)
        self._joined: RunInfo | None = None
        self._sync: Callable[[], object] | None = None
        self._abort: Callable[[], None] | None = None
        self._shared_sent: SharedCounter | None = None
        self._cut: list[int] = []  # scenarios cut short by their deadline_s
        self._fd_cap: int | None = None  # requests in flight per target the files limit holds
        self._scenario_scope: anyio.CancelScope | None = None
        self.result: RunResult | None = None

    @property
    def store(self) -> Store:
        return self._store

    def spent_usd(self) -> dict[str, float]:
        """What each metered target has cost so far (the budget guard's meters), in USD."""
        return {} if self._guard is None else self._guard.spent_usd()

    def stop(self, reason: str = "stopped by user") -> None:
        """End the run early (safe from signal handlers running in the event loop)."""
        if self._stop_reason is None:
            self._stop_reason = reason
        if self._scope is not None:
            self._scope.cancel()
        self._release_shards()

    def _release_shards(self) -> None:
        """Never leave the other load-generating processes waiting at a barrier for us."""
        if self._abort is not None:
            self._abort()

    async def _wait_for_shards(self) -> None:
        if self._sync is None:
            return
        try:
            await anyio.to_thread.run_sync(self._sync, abandon_on_cancel=True)
        except Exception:  # BrokenBarrierError: another process stopped or failed
            self.stop("another load-generating process stopped")
            await anyio.lowlevel.checkpoint()

    def begin(self) -> RunInfo:
        """Record the run in the store; ``run`` calls it unless a parent process did."""
        self._origin_ns = time.perf_counter_ns()
        self._origin_wall_ns = time.time_ns()
        return self._store.begin_run(
            name=self._name,
            config=self._config,
            targets=[self._target_record(t) for t in self._targets],
            scenarios=[
                ScenarioRecord(s.kind, {**asdict(s), "name": s.label(i)})  # type: ignore[call-overload]
                for i, s in enumerate(self._scenarios)
            ],
            origin_ns=self._origin_ns,
            started_wall_ns=self._origin_wall_ns,
        )

    def join(
        self,
        run: RunInfo,
        shard: int,
        shards: int,
        *,
        sync: Callable[[], object] | None = None,
        abort: Callable[[], None] | None = None,
        sent: SharedCounter | None = None,
    ) -> None:
        """Make this runner shard ``shard`` of ``shards`` processes driving the begun ``run``.

        ``sync`` waits for every shard (before each scenario, after each warm-up), ``abort``
        releases them when this one stops, and ``sent`` counts requests across all shards so
        ``max_requests`` is one budget for the run.
        """
        self._joined = run
        self._shard = (shard, shards)
        self._origin_ns = run.origin_ns
        self._origin_wall_ns = run.started_wall_ns
        self._sync, self._abort = sync, abort
        self._shared_sent = sent

    @property
    def cost_flag_count(self) -> int | None:
        """Shared flags the budget guard needs across processes (None: no guard)."""
        return None if self._guard is None else self._guard.flag_count

    def share_cost_stops(self, flags: Any) -> None:
        """Stop a target in this process when another process's guard stopped it."""
        if flags is not None and self._guard is not None:
            self._guard.share_stops(flags)

    def check_resources(self, shards: int | None = None) -> None:
        """Raise the open-files limit and refuse (``ConfigError``) a plan that cannot fit in it;
        ``run`` calls it before anything is sent or stored."""
        n = self._shard[1] if shards is None else shards
        self._fd_cap = check_open_files(self._scenarios, len(self._targets), n)

    async def run(self) -> RunResult:
        self.check_resources()
        info = self._joined or self.begin()
        self._run_id = info.id
        status, error = "completed", None
        monitor = Monitor(
            origin_ns=self._origin_ns, inflight=lambda: self._inflight, sink=self._health
        )
        self._monitor = monitor if self._use_monitor else None
        # Spans recorded: each request's invoke span is opened before it is sent, and the
        # transport opens an HTTP client span per call under it (tasks inherit the tracer).
        self._tracing = self._instruments.enabled
        if self._tracing:
            self._instruments.batch()  # flushed when the run ends (finally, below)
        http_tracer = use_tracer(self._instruments.tracer if self._tracing else None)
        try:
            # Before the first request opens a socket: the writer's file must not compete with
            # the run's sockets for descriptors (or a run that used them all would keep none).
            await anyio.to_thread.run_sync(self._store.open_writer)
            async with AsyncExitStack() as stack:
                live = [await self._open(stack, t) for t in self._targets]
                if self._shard[0] == 0:  # one process reads them for all (APIs count calls)
                    await self._record_deployments()
                # Providers close outside this scope (and shielded), so a stopped run still
                # restores the settings it changed.
                with anyio.CancelScope() as scope:
                    self._scope = scope
                    if self._stop_reason is not None:
                        scope.cancel()
                    try:
                        with startup_frozen():
                            await self._drive(live, monitor, _RunState(self))
                    except BaseException:
                        self._release_shards()  # before providers take their time to close
                        raise
                if scope.cancelled_caught:
                    status = "cancelled"
        except BaseExceptionGroup as group:
            # Task groups wrap what their tasks raise; a lone error is re-raised as itself, and
            # a cause we can name (out of open files, a gpubench error) as that error.
            named = unwrap(group)
            status, error = "failed", redact(f"{type(named).__name__}: {named}")
            if named is group:
                raise
            raise named from None
        except anyio.get_cancelled_exc_class():
            status = "cancelled"  # the caller's own scope was cancelled
            raise
        except BaseException as exc:
            status, error = "failed", redact(f"{type(exc).__name__}: {exc}")
            resource = out_of_files(exc) if isinstance(exc, Exception) else None
            if resource is not None:
                error = str(resource)
                raise resource from exc
            raise
        finally:
            reset_tracer(http_tracer)
            self._instruments.flush()  # the invocations and request counts still batched
            self._scope = None
            if status != "completed":
                self._release_shards()
            with anyio.CancelScope(shield=True):
                if self._joined is None:
                    await anyio.to_thread.run_sync(self._judge_readiness)
                    # A run stopped early (budget, max_cost_usd, stop()) keeps why with it.
                    why = error or self._stop_reason
                    await anyio.to_thread.run_sync(self._store.end_run, self._run_id, status, why)
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
                deadline_cut=tuple(self._cut),
            )
            if self._own_store:
                self._store.close()
        return self.result

    def _judge_readiness(self) -> None:
        """Count as cold the requests a provider's false "ready" slowed (``metrics`` ``false
        ready``), before the run is ended: every reader sees them as cold from then on."""
        if not self._fleet_interval_s or self._shard[0] != 0:
            return
        for target in self._targets:
            if not target.provider.capabilities.fleet_state:
                continue
            try:
                found = mark_false_ready(self._store, self._run_id, target=target.name)
            except Exception as exc:  # a judgement never costs the run its record
                log.warning("%s: readiness not judged: %s", target.name, redact(str(exc)))
                continue
            if found is not None and found.count:
                # info, not a warning: `gpubench run` and `results show` print it in the summary
                # (metrics.run_false_ready), and a warning would say it on screen twice
                log.info("%s: %s (counted as cold)", target.name, found.text)

    async def _record_deployments(self) -> None:
        """Keep each target's plugin and its scaling as its provider reports them, read at
        once for all targets before the first request (``_deployment``)."""
        found: dict[str, dict[str, Any]] = {}

        async def read(target: Target) -> None:
            found[target.name] = await read_deployment(target.provider)

        async with anyio.create_task_group() as tg:
            for target in self._targets:
                tg.start_soon(read, target)
        for name, deployment in found.items():
            try:
                await anyio.to_thread.run_sync(
                    self._store.record_deployment, self._run_id, name, deployment
                )
            except Exception as exc:  # metadata: never worth the measurements to come
                log.warning("%s: deployment not stored: %s", name, redact(str(exc)))

    async def _open(self, stack: AsyncExitStack, target: Target) -> LiveTarget:
        provider = target.provider
        await provider.__aenter__()

        async def close(*exc_info: Any) -> bool:
            with anyio.move_on_after(CLOSE_TIMEOUT_S, shield=True):
                await provider.__aexit__(*exc_info)
            return False

        stack.push_async_exit(close)
        live = LiveTarget(target)
        stack.callback(live.deadlines.close)
        return live

    async def _drive(self, live: list[LiveTarget], monitor: Monitor, state: RunState) -> None:
        async with anyio.create_task_group() as tg:
            if self._use_monitor:
                tg.start_soon(monitor.run)
            if self._fleet_interval_s and self._shard[0] == 0:
                for lt in live:
                    if lt.provider.capabilities.fleet_state:
                        tg.start_soon(self._watch_fleet, lt, self._fleet_interval_s)
            for sidx, scenario in enumerate(self._scenarios):
                await self._wait_for_shards()
                if self._spent():
                    continue  # still pass every boundary, so other shards never wait on us
                self._label(live, sidx, scenario)
                await self._scenario(live, sidx, scenario, state)
            tg.cancel_scope.cancel()

    def _target_record(self, target: Target) -> TargetRecord:
        p = target.provider
        return TargetRecord(target.name, p.name, p.options.public(), p.capabilities.names())

    def _label(self, live: list[LiveTarget], sidx: int, scenario: Scenario) -> None:
        # Two scenarios of one kind are two series: the index tells them apart, the name (a
        # scenario's optional `name`, else kind-index) says which is which.
        name = scenario.label(sidx)
        for lt in live:
            lt.attrs = {
                "gpubench.target": lt.name,
                "gpubench.provider": lt.provider.name,
                "gpubench.workload": self._workload.name,
                "gpubench.scenario": scenario.kind,
                "gpubench.scenario.index": sidx,
                "gpubench.scenario.name": name,
            }
            if lt.provider.endpoint:
                lt.attrs["gpubench.endpoint"] = lt.provider.endpoint
            # OTel GenAI semconv: the model asked for, where the provider's options name one
            # (the OpenAI-compatible plugin's `model`, a Replicate `model`...).
            model = getattr(lt.provider.options, "model", None)
            if isinstance(model, str) and model:
                lt.attrs["gen_ai.request.model"] = model

    def _health(self, window: HealthWindow) -> None:
        self._store.append_health(self._run_id, window)

    async def _watch_fleet(self, lt: LiveTarget, interval_s: float) -> None:
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

    async def _scenario(
        self, live: list[LiveTarget], sidx: int, scenario: Scenario, state: RunState
    ) -> None:
        deadline = scenario.deadline_s
        with anyio.move_on_after(deadline if deadline is not None else float("inf")) as scope:
            self._scenario_scope = scope
            await scenario.drive(RunLoad(state, live, sidx))  # the shape schedules; _send sends
        self._scenario_scope = None
        if scope.cancelled_caught:
            # Said as such, never as "completed": the scenario sent less than it planned.
            self._cut.append(sidx)
            log.warning(
                "scenario %d (%s) was cut short by its deadline_s=%g",
                sidx,
                scenario.kind,
                deadline,
            )
            await anyio.to_thread.run_sync(
                self._store.set_scenario_status, self._run_id, sidx, DEADLINE_CUT
            )


def check_run(
    targets: Sequence[Target],
    workload: Workload,
    scenarios: Sequence[Scenario],
    max_requests: int | None,
) -> None:
    """Refuse a run that cannot go ahead, before anything is sent or stored: what a Runner
    checks when it is made, so that ``gpubench run --dry-run`` refuses what the run would."""
    _check_scenarios(targets, scenarios, max_requests)
    check_inputs(targets, workload)


def _check_scenarios(
    targets: Sequence[Target], scenarios: Sequence[Scenario], max_requests: int | None
) -> None:
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
    capabilities = {t.name: t.provider.capabilities.names() for t in targets}
    labels: set[str] = set()
    for i, sc in enumerate(scenarios):
        if not isinstance(sc, Scenario):
            raise ConfigError(
                f"scenarios[{i}]",
                type(sc).__name__,
                "a scenario: Burst(...), Rate(...), ... or a subclass of gpubench_sdk.Scenario",
            )
        if sc.label(i) in labels:
            raise ConfigError(f"scenarios[{i}].name", sc.label(i), "a name no other scenario has")
        labels.add(sc.label(i))
        try:
            sc.check_targets(capabilities)
        except ConfigError as exc:  # named "<kind>.<field>": say which scenario
            raise ConfigError(f"scenarios[{i}].{exc.field}", exc.value, exc.expected) from None


class _RunState:
    """The run as its scenarios' Loads see it (``RunState``), for one ``Runner.run``.

    The per-request members are the runner's own bound methods, so a request sent through a
    Load pays no extra call for going through this interface."""

    __slots__ = (
        "_fd_warned", "_runner", "send", "shard", "spent", "take", "turns", "wait_for_shards"
    )  # fmt: skip

    def __init__(self, runner: Runner) -> None:
        self._runner = runner
        self._fd_warned: set[str] = set()
        self.shard = runner._shard
        self.turns = max(1, int(getattr(runner._workload, "turns", 1)))
        self.take = runner._take
        self.send = runner._send
        self.spent = runner._spent
        self.wait_for_shards = runner._wait_for_shards

    def stopping(self) -> bool:
        return self._runner._stop_reason is not None

    def target_stopped(self, target: str) -> bool:
        guard = self._runner._guard
        return guard is not None and target in guard.stopped

    def within_open_files(self, target: str, cap: int) -> int:
        fd_cap = self._runner._fd_cap
        if fd_cap is None or cap <= fd_cap:
            return cap
        if target not in self._fd_warned:  # once per target, not at every step of a sweep
            self._fd_warned.add(target)
            log.warning(
                "%s: at most %d requests in flight (the open-files limit, ulimit -n); "
                "set max_inflight to choose",
                target,
                fd_cap,
            )
        return fd_cap

    async def flush(self) -> None:
        await anyio.to_thread.run_sync(self._runner._store.flush)

    async def invocations(self) -> list[Invocation]:
        store, run_id = self._runner._store, self._runner._run_id
        await anyio.to_thread.run_sync(store.flush)
        return await anyio.to_thread.run_sync(store.invocations, run_id)


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
