"""One load generator of a Ray run: a Ray actor driving shard k of n with its own event loop.

``LoadWorker`` is a plain class; the driver makes it a Ray actor (``ray.remote``) so that this
module imports without Ray. The worker builds its ``Runner`` from the plan exactly as one
process or ``processes = N`` does and joins the driver's run as shard k of n (the runner's
shard interface: ``Runner.join``), so sharding, schedules and the budget are the same code on
every backend. What differs is where results go and how shards meet:

* the runner's store is an ``OutboxStore``: every invocation, health window and fleet sample
  is queued in memory and handed to the driver when it polls (``take``), which writes them to
  the run's one store;
* the scenario barrier is the driver: a worker at a boundary says so in ``poll`` and waits
  until the driver releases every worker with a common start instant on the driver's clock,
  which it turns into its own with the measured clock offset and sleeps until;
* a shape that decides from every shard's results (``sweep``, ``max_rate``: ``Load.results``
  after ``Load.sync``) reads them from the driver's store: the outbox's ``invocations`` says
  in ``poll`` that it asks, and waits for the driver's ``answer``. The driver stored every
  worker's batches before it released the barrier, and gives every worker asking after the
  same barrier the same answer, so every worker takes the same next step.

The actor is threaded (``max_concurrency``): the run's event loop lives in a thread of its own
(an anyio blocking portal) while ``poll``, ``release`` and ``stop`` are answered from others.
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib.metadata
import os
import shutil
import socket
import tempfile
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import anyio.from_thread

from .._base._errors import ConfigError
from .._base._monitor import HealthWindow
from .._base._secrets import redact, remember
from .._base._types import FleetState, Invocation
from .._plan._build import build_run
from .._plan._config import parse_config
from .._runner._multiproc import _loop_options as loop_options
from .._runner._runner import Runner
from .._scenarios import share as split
from .._store._store import RunInfo, Store
from ._clock import ClockOffset, clocks
from ._seal import Opener


class OutboxStore(Store):
    """A store that keeps what the runner appends for the driver to ``take``; nothing is written.

    The base class's file (a temporary one) is only opened, never written: ``run`` answers
    with the driver's run, which this worker joined.
    """

    def __init__(self, path: Path, run: RunInfo, ask: Callable[[], list[Invocation]]) -> None:
        super().__init__(path)
        self._joined = run
        self._ask = ask
        self._box = threading.Lock()
        self._invocations: list[Invocation] = []
        self._health: list[HealthWindow] = []
        self._fleet: list[tuple[str, int, FleetState]] = []
        self._statuses: list[tuple[int, str | None]] = []
        self._deployments: list[tuple[str, Mapping[str, Any]]] = []

    def open_writer(self, timeout_s: float = 30.0) -> None:
        return None

    def flush(self) -> None:
        return None

    def append(self, run_id: int, inv: Invocation) -> None:
        with self._box:
            self._invocations.append(inv)

    def append_health(self, run_id: int, window: HealthWindow) -> None:
        with self._box:
            self._health.append(window)

    def append_fleet(self, run_id: int, target: str, t_ns: int, state: FleetState) -> None:
        with self._box:
            self._fleet.append((target, t_ns, state))

    def set_scenario_status(self, run_id: int, index: int, status: str | None) -> None:
        with self._box:
            self._statuses.append((index, status))

    def record_deployment(self, run_id: int, target: str, deployment: Mapping[str, Any]) -> None:
        with self._box:
            self._deployments.append((target, deployment))

    def run(self, ref: int | str) -> RunInfo:
        return self._joined

    def invocations(self, run_id: int) -> list[Invocation]:
        """The run's requests as the driver stored them from every worker (see ``_ask``)."""
        return self._ask()

    def take(self) -> dict[str, list[Any]]:
        """Everything appended since the last ``take``."""
        with self._box:
            batch: dict[str, list[Any]] = {
                "invocations": self._invocations,
                "health": self._health,
                "fleet": self._fleet,
                "statuses": self._statuses,
                "deployments": self._deployments,
            }
            self._invocations, self._health, self._fleet, self._statuses = [], [], [], []
            self._deployments = []
        return batch


class Quota:
    """This worker's share of ``max_requests``, in the shape of the counter shards share.

    The runner stops sending once the counter reaches ``max_requests``; starting it at
    ``max_requests - share`` lets this worker send exactly its share, so the workers together
    send the plan's budget without a round trip per request.
    """

    def __init__(self, value: int) -> None:
        self.value = value
        self._lock = threading.Lock()

    def get_lock(self) -> threading.Lock:
        return self._lock


def share(total: int, k: int, n: int) -> int:
    """Worker ``k`` of ``n``'s part of ``total`` (the first ``total % n`` get one more): the
    split every loop deals its slots with."""
    return split(k, n, total)[0]


def missing_plugins(needs: Mapping[str, Mapping[str, str | None]]) -> list[str]:
    """Which of ``{group: {name: distribution}}`` cannot be loaded here, said for a person."""
    from .._plugins import provider_class, workload_class

    load = {"gpubench.providers": provider_class, "gpubench.workloads": workload_class}
    missing = []
    for group, names in needs.items():
        for name, dist in names.items():
            try:
                load[group](name)
            except Exception as exc:
                found = [ep for ep in importlib.metadata.entry_points(group=group, name=name)]
                what = f"distribution {dist!r}" if dist else f"the {group} plugin {name!r}"
                if not found:
                    missing.append(f"{what} is not installed (no {group} entry point {name!r})")
                else:
                    missing.append(f"{what} is installed but fails to load: {redact(str(exc))}")
    return missing


class LoadWorker:
    """The Ray actor's class (made remote by the driver); see the module's docstring."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._opener = Opener()
        self._cond = threading.Condition()
        self._gen = 0  # barriers this worker reached
        self._waiting: int | None = None  # the barrier it waits at
        self._released: dict[int, int | None] = {}  # barrier -> start instant (driver clock)
        self._broken = False
        self._offset = ClockOffset(0, 0, 0)
        self._runner: Runner | None = None
        self._store: OutboxStore | None = None
        self._tmp: str | None = None
        self._portal: Any = None
        self._thread: threading.Thread | None = None
        self._pending_stop: str | None = None
        self._aborted = False
        self._state = "idle"  # idle -> ready -> running -> done
        self._outcome: dict[str, Any] = {}
        self._asking: int | None = None  # the barrier after which this worker asks for results
        self._answer: tuple[int, list[Invocation]] | None = None  # (barrier, the driver's)

    def hello(self) -> dict[str, Any]:
        """Who and where this worker is, and the public key the driver seals its plan to."""
        import ray

        return {
            "name": self.name,
            "public_key": self._opener.public,
            "node_ip": ray.util.get_node_ip_address(),  # type: ignore[no-untyped-call]
            "node_id": ray.get_runtime_context().get_node_id(),
            "host": socket.gethostname(),
            "pid": os.getpid(),
        }

    def check(self, needs: Mapping[str, Mapping[str, str | None]]) -> list[str]:
        return missing_plugins(needs)

    def clocks(self) -> tuple[int, int]:
        return clocks()

    def prepare(
        self,
        sealed: bytes,
        run: RunInfo,
        shard: int,
        shards: int,
        offset: ClockOffset,
        otlp_endpoint: str | None = None,
    ) -> None:
        """Open the sealed plan and secrets, build the runner and join the driver's run."""
        opened = self._opener.open(sealed)
        os.environ.update(opened["env"])  # this actor's own process: read by api_key_env
        for value in opened["env"].values():
            remember(value)  # masked in whatever this worker reports or logs
        config = parse_config(opened["plan"])
        self._offset = offset
        # On this worker's clock: samples land on the driver's timeline.
        joined = dataclasses.replace(run, origin_ns=offset.to_worker(run.origin_ns))
        self._tmp = tempfile.mkdtemp(prefix="gpubench-ray-")
        self._store = OutboxStore(Path(self._tmp) / "outbox.sqlite", joined, self._results)
        instruments = None
        if otlp_endpoint:
            from ..telemetry import configure

            instruments = configure(otlp_endpoint=otlp_endpoint).instruments()
        runner = build_run(
            config, store=self._store, instruments=instruments, budget_share=1 / shards
        )
        budget = config.run.max_requests
        quota = None if budget is None else Quota(budget - share(budget, shard, shards))
        runner.join(joined, shard, shards, sync=self._sync, abort=self._abort, sent=quota)
        runner.check_resources()
        self._runner = runner
        self._state = "ready"

    def start(self) -> None:
        if self._runner is None:
            raise ConfigError("ray worker", self.name, "prepare() before start()")
        self._state = "running"
        self._thread = threading.Thread(target=self._main, name=f"gpubench-{self.name}")
        self._thread.start()

    def _main(self) -> None:
        runner = self._runner
        assert runner is not None
        try:
            with anyio.from_thread.start_blocking_portal(
                "asyncio", backend_options=loop_options()
            ) as portal:
                self._portal = portal
                if self._pending_stop is not None:
                    portal.call(runner.stop, self._pending_stop)
                result = portal.call(runner.run)
                self._outcome = {
                    "status": result.status,
                    "stop_reason": result.stop_reason,
                    "sent": result.requests,
                }
        except BaseException as exc:  # reported to the driver, which names this worker
            self._outcome = {"status": "failed", "error": redact(f"{type(exc).__name__}: {exc}")}
        finally:
            self._portal = None
            self._state = "done"

    def poll(self) -> tuple[dict[str, list[Any]], dict[str, Any]]:
        """What the run produced since the last poll, and where this worker stands."""
        # Where it stands is read before take: "done" then means this batch is the last, and
        # "waiting at barrier g" that the batch holds every request sent before barrier g.
        state_now, waiting, asking = self._state, self._waiting, self._asking
        batch = self._store.take() if self._store is not None else {}
        state = {
            "state": state_now,
            "waiting": waiting,
            "asking": asking,
            "aborted": self._aborted,
            "stop_reason": None if self._runner is None else self._runner._stop_reason,
            **self._outcome,
        }
        return batch, state

    def release(self, gen: int, start_ns: int | None) -> None:
        """Let this worker pass barrier ``gen`` at ``start_ns`` (driver clock); None: broken."""
        with self._cond:
            self._released[gen] = start_ns
            self._cond.notify_all()

    def answer(self, gen: int, invocations: list[Invocation]) -> None:
        """The driver's answer to ``_results`` after barrier ``gen``."""
        with self._cond:
            self._answer = (gen, invocations)
            self._cond.notify_all()

    def stop(self, reason: str) -> None:
        self._pending_stop = reason
        with self._cond:
            self._broken = True
            self._cond.notify_all()
        portal, runner = self._portal, self._runner
        if portal is not None and runner is not None:
            with contextlib.suppress(RuntimeError):  # the portal closed: the run has ended
                portal.call(runner.stop, reason)

    def close(self) -> None:
        if self._thread is not None:
            self._thread.join(timeout=30)
        if self._store is not None:
            self._store.close()
        if self._tmp is not None:
            shutil.rmtree(self._tmp, ignore_errors=True)

    def _sync(self) -> None:
        """The runner's barrier: wait for the driver's release, then for the start instant."""
        with self._cond:
            self._gen += 1
            gen = self._gen
            self._waiting = gen
            while gen not in self._released and not self._broken:
                self._cond.wait(0.5)
            self._waiting = None
            start = self._released.pop(gen, None)
            if self._broken or start is None:
                raise threading.BrokenBarrierError
        delay_ns = self._offset.to_worker(start) - time.perf_counter_ns()
        if delay_ns > 0:
            time.sleep(delay_ns / 1e9)

    def _results(self) -> list[Invocation]:
        """Every worker's requests of the current scenario, from the driver's store, as they
        were after the last barrier this worker passed (one ask per barrier: a shape reading
        each target's results in turn asks once). Empty once the run is stopping."""
        with self._cond:
            gen = self._gen
            if self._answer is not None and self._answer[0] == gen:
                return list(self._answer[1])
            self._asking = gen
            while (self._answer is None or self._answer[0] != gen) and not self._broken:
                self._cond.wait(0.5)
            self._asking = None
            if self._answer is None or self._answer[0] != gen:
                return []  # stopped: the shape sees no results and ends (load.stopped())
            return list(self._answer[1])

    def _abort(self) -> None:
        """The runner stops early: the driver learns it from ``poll`` and stops the others."""
        self._aborted = True
        with self._cond:
            self._broken = True
            self._cond.notify_all()
