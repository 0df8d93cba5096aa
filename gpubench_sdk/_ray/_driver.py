"""The driver of a Ray run: places the workers, starts them together, and stores what they send.

Order of a run (each step fails with a clear error before anything is sent):

1. connect to the cluster and reserve one bundle per worker in a placement group (SPREAD by
   default; node labels pin it, e.g. to a provider's region);
2. start one ``LoadWorker`` actor per bundle and ask each where it is and for its public key;
3. check every worker can load the plan's provider and workload plugins;
4. measure each worker's clock offset from the driver (best of N round trips);
5. begin the run in the driver's store (the workers and offsets recorded in its config), seal
   the plan and its secrets to each worker, which builds its runner and joins the run as
   shard k of n;
6. poll: every ``poll_interval_s`` each worker hands over what it measured since the last
   poll, which goes to the store at once (so progress, a crash of the driver and the report
   all see every worker); barriers are released here with a common start instant, and a
   worker whose shape decides from every shard's results (``sweep``, ``max_rate``) is
   answered from this store: what every worker stored before the barrier it passed.

A worker that dies is reported by name; what it handed over is kept and the run is recorded as
failed with "partial run" in its error, while the others finish. Ctrl-C stops every worker;
every actor and the placement group are removed when the run ends, however it ends.
"""

from __future__ import annotations

import logging
import signal
import threading
import time
import uuid
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from .._base._errors import ConfigError
from .._base._secrets import redact
from .._base._types import Phase
from .._plan._build import build_run
from .._plan._config import RunConfig
from .._runner._results import RunResult, stored_result
from .._runner._runner import Observer
from .._store._store import Store
from ._clock import ClockOffset, measure
from ._handover import plugin_needs, sealed_payload
from ._place import alive_nodes, feasible
from ._seal import seal
from ._worker import LoadWorker

log = logging.getLogger("gpubench.ray")

NAMESPACE = "gpubench"  # the workers' actors are named gpubench-<run>-w<k> in this namespace
START_MARGIN_S = 0.05  # a barrier's start instant is this far ahead: time for the release
STOP_TIMEOUT_S = 60.0  # how long stopped workers may take to close their providers


def _import_ray() -> Any:
    try:
        import ray
    except ImportError:
        raise ConfigError(
            "execution.backend",
            "ray",
            "Ray installed: pip install 'gpubench-sdk[ray]'",
        ) from None
    return ray


class RayRun:
    """One run on a Ray cluster; ``run()`` returns when every worker has finished or is lost."""

    def __init__(
        self,
        config: RunConfig,
        store: str | Path,
        *,
        workers: int | None = None,
        address: str | None = None,
        otlp_endpoint: str | None = None,
        on_progress: Callable[[int], None] | None = None,
        observers: Iterable[Observer] = (),
        poll_interval_s: float = 0.1,
    ) -> None:
        self.config = config
        self.store_path = Path(store)
        self.ray = _import_ray()
        self.n = workers or config.execution.workers or alive_nodes(self.ray)
        self.address = address  # recorded with the run (None: the caller's connection)
        self.otlp_endpoint = otlp_endpoint
        self.on_progress = on_progress
        self.observers = list(observers)
        # every wait for the cluster (placement, a call, a poll) ends after this
        self.timeout_s = config.execution.timeout_s
        self.poll_interval_s = poll_interval_s
        self.tag = uuid.uuid4().hex[:8]
        self.handles: list[Any] = []
        self.where: list[dict[str, Any]] = []
        self.offsets: list[ClockOffset] = []
        self.lost: dict[int, str] = {}
        self.finished: dict[int, dict[str, Any]] = {}
        self.stopping: str | None = None
        self.stored = 0
        self.snapshot: tuple[int, Any] | None = None  # (barrier, ref to its results) see _answer

    def label(self, k: int) -> str:
        w = self.where[k] if k < len(self.where) else {}
        node = w.get("node_ip", "?")
        return f"w{k} (node {node}, host {w.get('host', '?')}, pid {w.get('pid', '?')})"

    # -- setup -------------------------------------------------------------------------------

    def _place(self) -> Any:
        from ray.util.placement_group import placement_group

        ex = self.config.execution
        bundle = {"CPU": ex.num_cpus, **ex.resources}
        labels = [dict(ex.labels)] * self.n if ex.labels else None
        pg = placement_group(
            [bundle] * self.n,
            strategy=ex.placement.upper(),
            name=f"gpubench-{self.tag}",
            bundle_label_selector=labels,
        )
        # A request the cluster can never hold would wait forever: refused at once. One it can
        # hold once other jobs free their resources waits up to execution.timeout_s.
        fits = feasible(self.ray.nodes(), bundle, ex.labels, ex.placement, self.n)
        ready = fits and self.ray.wait([pg.ready()], timeout=self.timeout_s)[0]
        if not ready:
            self.ray.util.remove_placement_group(pg)
            busy = "" if not fits else f"free within execution.timeout_s={self.timeout_s:g} s "
            raise ConfigError(
                "execution.workers",
                self.n,
                f"{self.n} worker(s) of {bundle}"
                + (f" on nodes labelled {ex.labels}" if ex.labels else "")
                + f" with placement {ex.placement!r} that the cluster can hold {busy}"
                f"(it has {self.ray.cluster_resources()}); lower workers or num_cpus, "
                "or add nodes",
            )
        return pg

    def _spawn(self, pg: Any) -> None:
        from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

        ex = self.config.execution
        actor = self.ray.remote(LoadWorker)
        for k in range(self.n):
            self.handles.append(
                actor.options(
                    name=f"gpubench-{self.tag}-w{k}",
                    namespace=NAMESPACE,
                    num_cpus=ex.num_cpus,
                    resources=dict(ex.resources),
                    max_concurrency=4,  # the run's thread plus poll/release/stop
                    max_restarts=0,  # a lost worker is reported, never silently replaced
                    runtime_env=ex.runtime_env,
                    scheduling_strategy=PlacementGroupSchedulingStrategy(
                        pg, placement_group_bundle_index=k
                    ),
                ).remote(f"w{k}")
            )
        self.where = self._answers([h.hello.remote() for h in self.handles], "start")

    def _answers(self, refs: list[Any], what: str) -> list[Any]:
        """Every worker's answer to one call, awaited together: one bound for all, not one
        each (a cluster that cannot reach this driver would take n x timeout_s to say so)."""
        _, silent = self.ray.wait(refs, num_returns=len(refs), timeout=self.timeout_s)
        if silent:
            quiet = [self.label(k) for k, ref in enumerate(refs) if ref in silent]
            raise ConfigError(
                "execution.timeout_s",
                self.timeout_s,
                f"workers that can {what} within it: {', '.join(quiet)} of {self.n} did not "
                f"answer. {unreachable_hint(self.ray)}",
            )
        return [self._call(k, ref, what) for k, ref in enumerate(refs)]

    def _call(self, k: int, ref: Any, what: str) -> Any:
        try:
            return self.ray.get(ref, timeout=self.timeout_s)
        except Exception as exc:
            why = _why(exc)
            if isinstance(exc, self.ray.exceptions.GetTimeoutError):
                why = f"no answer within execution.timeout_s={self.timeout_s:g} s. "
                why += unreachable_hint(self.ray)
            raise ConfigError(
                "execution", f"worker {self.label(k)}", f"a worker that can {what}: {why}"
            ) from None

    def _check_plugins(self) -> None:
        needs = plugin_needs(self.config)
        problems = []
        answers = self._answers([h.check.remote(needs) for h in self.handles], "load plugins")
        for k, missing_ones in enumerate(answers):
            problems += [f"{self.label(k)}: {missing}" for missing in missing_ones]
        if problems:
            raise ConfigError(
                "execution.runtime_env",
                self.config.execution.runtime_env,
                "every worker able to load the plan's plugins; "
                + "; ".join(problems)
                + ". Install them on every node, or let Ray do it: execution.runtime_env = "
                '{pip = ["<distribution>"]} (docs/ray.md)',
            )

    def _asker(self, handle: Any) -> Callable[[], tuple[int, int]]:
        def ask() -> tuple[int, int]:
            perf, wall = self.ray.get(handle.clocks.remote(), timeout=self.timeout_s)
            return int(perf), int(wall)

        return ask

    # -- the run -----------------------------------------------------------------------------

    def run(self) -> RunResult:
        pg = self._place()
        try:
            self._spawn(pg)
            self._check_plugins()
            self.offsets = [measure(self._asker(h)) for h in self.handles]
            return self._drive()
        finally:
            self._teardown(pg)

    def _drive(self) -> RunResult:
        workers = [
            {
                "name": f"w{k}",
                **{x: self.where[k][x] for x in ("node_ip", "node_id", "host", "pid")},
            }
            | self.offsets[k].as_record()
            for k in range(self.n)
        ]
        recorded = {"ray": {"workers": workers, "address": self.address}}
        parent = build_run(self.config, store=self.store_path, recorded=recorded)
        info = parent.begin()
        store = parent.store
        status: str = "failed"
        error: str | None = "the driver failed while its workers ran"
        try:
            payload = sealed_payload(self.config)
            refs = [
                h.prepare.remote(
                    seal(self.where[k]["public_key"], payload),
                    info,
                    k,
                    self.n,
                    self.offsets[k],
                    self.otlp_endpoint,
                )
                for k, h in enumerate(self.handles)
            ]
            self._answers(refs, "build the plan's runner")
            self._answers([h.start.remote() for h in self.handles], "start its load")
            with _signals(self.stop_all):
                self._collect(store, info.id)
            status, error = self._outcome()
        except KeyboardInterrupt:  # a second Ctrl-C: no waiting for the workers to stop
            status, error = "cancelled", "aborted by a second SIGINT"
            raise
        except BaseException as exc:
            error = redact(f"{type(exc).__name__}: {exc}")
            raise
        finally:
            store.end_run(info.id, status, error)
        return stored_result(store, info.id, lambda _final: self._stop_reason())

    def stop_all(self, reason: str) -> None:
        if self.stopping is None:
            self.stopping = reason
        for k, h in enumerate(self.handles):
            if k not in self.lost and k not in self.finished:
                h.stop.remote(reason)

    def _collect(self, store: Store, run_id: int) -> None:
        """Poll every worker each tick; a worker slow to answer (its node failing) keeps its
        poll pending without holding up the others, and is lost after execution.timeout_s."""
        running = set(range(self.n))
        pending: dict[int, tuple[Any, float]] = {}  # worker -> (its poll, when asked)
        waiting: dict[int, int | None] = {}  # the barrier each worker last said it waits at
        asking: dict[int, int | None] = {}  # the barrier after which it asks for results
        answered: dict[int, int] = {}  # the barrier after which it was last answered
        cut: set[int] = set()
        released: set[int] = set()
        stop_deadline: float | None = None
        while running:
            tick = time.monotonic()
            for k in running - pending.keys():
                pending[k] = (self.handles[k].poll.remote(), tick)
            refs = [ref for ref, _ in pending.values()]
            ready, _ = self.ray.wait(refs, num_returns=len(refs), timeout=self.poll_interval_s)
            done = set(ready)
            for k, (ref, asked) in list(pending.items()):
                if ref not in done:
                    if time.monotonic() - asked > self.timeout_s:
                        self._lose(k, f"no answer for {self.timeout_s:g} s", running, pending)
                    continue
                del pending[k]
                try:
                    batch, state = self.ray.get(ref)
                except Exception as exc:
                    self._lose(k, _why(exc), running, pending)
                    continue
                self._store_batch(store, run_id, batch, self.offsets[k].wall_ns, cut)
                waiting[k] = state["waiting"]
                asking[k] = state["asking"]
                if state["state"] == "done":
                    self.finished[k] = state
                    running.discard(k)
                elif state["aborted"] and self.stopping is None:
                    why = state.get("stop_reason") or "stopped"
                    self.stop_all(f"worker {self.label(k)} stopped: {why}")
            for k, gen in asking.items():  # after this tick's batches are all stored
                if gen is not None and answered.get(k) != gen and k in running:
                    answered[k] = gen
                    self.handles[k].answer.remote(gen, self._results_after(store, run_id, gen))
            at = {waiting.get(k) for k in running}
            gen = at.pop() if len(at) == 1 else None
            if gen is not None and gen not in released and self.stopping is None:
                released.add(gen)  # once: a worker still waking must not get a later instant
                start = time.perf_counter_ns() + int(START_MARGIN_S * 1e9)
                for k in running:
                    self.handles[k].release.remote(gen, start)
            if self.on_progress is not None:
                self.on_progress(self.stored)
            if self.stopping is not None:
                stop_deadline = stop_deadline or time.monotonic() + STOP_TIMEOUT_S
                if time.monotonic() > stop_deadline:
                    for k in list(running):
                        self._lose(k, f"did not stop within {STOP_TIMEOUT_S:g} s", running, pending)
                    break
            time.sleep(max(0.0, self.poll_interval_s - (time.monotonic() - tick)))

    def _results_after(self, store: Store, run_id: int, gen: int) -> Any:
        """The current scenario's measured requests, as stored when the first worker asked
        after barrier ``gen``: one answer for every worker asking after it, so all of them take
        the same next step. The barrier was released only once every worker had said it waited
        there, and each said so in a poll whose batch held all it had sent before (the batches
        are stored before any barrier is released), so the answer holds every shard's requests.

        Scenarios run one after another with a barrier between them, so the highest scenario
        index stored is the asking one's (or, when it has stored nothing yet, an earlier one's,
        which ``Load.results`` filters out): only that scenario's requests travel. They are the
        same records the workers sent (no secrets: the runner masks them before storing)."""
        if self.snapshot is None or self.snapshot[0] != gen:
            store.flush()
            invs = store.invocations(run_id)
            now = max((i.scenario for i in invs), default=0)
            measured = [i for i in invs if i.scenario == now and i.phase is Phase.MEASURE]
            self.snapshot = (gen, self.ray.put(measured))  # one copy, whatever the workers
        return self.snapshot[1]

    def _lose(self, k: int, why: str, running: set[int], pending: dict[int, Any]) -> None:
        """Give worker ``k`` up; killed too, in case it is only unreachable: a worker the run
        no longer hears from must not go on sending load nobody records."""
        self.lost[k] = why.rstrip(".")
        running.discard(k)
        pending.pop(k, None)
        log.error("worker %s lost: %s", self.label(k), why)
        try:
            self.ray.kill(self.handles[k], no_restart=True)
        except Exception as exc:  # gone with its node
            log.debug("kill %s: %s", self.label(k), exc)

    def _store_batch(
        self, store: Store, run_id: int, batch: dict[str, Any], wall_ns: int, cut: set[int]
    ) -> None:
        for inv in batch.get("invocations", ()):
            inv.wall_start_ns -= wall_ns  # onto the driver's wall clock, like every timestamp
            store.append(run_id, inv)
            for observer in self.observers:
                try:
                    observer(inv)
                except Exception:  # a progress bar must not cost a measurement
                    log.exception("observer %r failed", observer)
        self.stored += len(batch.get("invocations", ()))
        for window in batch.get("health", ()):
            store.append_health(run_id, window)
        for target, t_ns, state in batch.get("fleet", ()):
            store.append_fleet(run_id, target, t_ns, state)
        for target, deployment in batch.get("deployments", ()):  # sent by worker 0 alone
            store.record_deployment(run_id, target, deployment)
        for index, status in batch.get("statuses", ()):
            if index not in cut:  # every shard cut by the deadline says so: stored once
                cut.add(index)
                store.set_scenario_status(run_id, index, status)

    def _stop_reason(self) -> str | None:
        if self.stopping is not None:
            return self.stopping
        reasons = [s.get("stop_reason") for s in self.finished.values() if s.get("stop_reason")]
        return reasons[0] if reasons else None

    def _outcome(self) -> tuple[str, str | None]:
        failed = {k: s["error"] for k, s in self.finished.items() if s.get("status") == "failed"}
        if self.lost or failed:
            parts = [f"worker {self.label(k)} lost: {why}" for k, why in sorted(self.lost.items())]
            parts += [f"worker {self.label(k)} failed: {e}" for k, e in sorted(failed.items())]
            return "failed", (
                f"partial run: {'; '.join(parts)}. What it measured up to its last batch is "
                f"stored; the other {self.n - len(self.lost) - len(failed)} worker(s) finished"
            )
        statuses = {s.get("status") for s in self.finished.values()}
        if self.stopping is not None or "cancelled" in statuses:
            return "cancelled", self._stop_reason()
        return "completed", self._stop_reason()

    def _teardown(self, pg: Any) -> None:
        """No actor outlives the run: each is closed (briefly), then killed."""
        closing = [h.close.remote() for k, h in enumerate(self.handles) if k not in self.lost]
        if closing:
            self.ray.wait(closing, num_returns=len(closing), timeout=10)
        for h in self.handles:
            try:
                self.ray.kill(h, no_restart=True)
            except Exception as exc:  # already gone with its node
                log.debug("kill: %s", exc)
        try:
            self.ray.util.remove_placement_group(pg)
        except Exception as exc:
            log.debug("remove_placement_group: %s", exc)


def unreachable_hint(ray: Any) -> str:
    """The likely causes of a cluster that does not answer, with this driver's own address
    (the one its nodes must reach back to for every result and argument it owns)."""
    try:
        here = ray.util.get_node_ip_address()
    except Exception:
        here = "unknown"
    return (
        f"This driver's node address is {here}: every node of the cluster must reach it (and "
        "Ray's ports on it). If that is an interface they cannot reach, run the driver on a "
        "cluster node, or `ray start --node-ip-address` with a reachable one here; check too "
        "that RAY_ADDRESS names this cluster and, if it requires one, its token "
        "(RAY_AUTH_TOKEN); raise execution.timeout_s for a slow cluster"
    )


def _why(exc: BaseException) -> str:
    """A Ray error in one line, without the remote traceback and with secrets masked."""
    cause = getattr(exc, "cause", None)
    if isinstance(cause, BaseException):
        exc = cause
    text = str(exc).strip().splitlines()
    return redact(f"{type(exc).__name__}: {text[-1] if text else ''}")


class _signals:
    """SIGINT/SIGTERM stop every worker gracefully; a second SIGINT aborts at once."""

    def __init__(self, stop: Callable[[str], None]) -> None:
        self.stop = stop
        self.previous: dict[int, Any] = {}

    def __enter__(self) -> None:
        if threading.current_thread() is not threading.main_thread():
            return

        def handler(signum: int, _frame: object) -> None:
            self.stop(f"stopped by {signal.Signals(signum).name}")
            signal.signal(signal.SIGINT, signal.default_int_handler)

        for sig in (signal.SIGINT, signal.SIGTERM):
            self.previous[sig] = signal.signal(sig, handler)

    def __exit__(self, *exc: object) -> None:
        for sig, handler in self.previous.items():
            signal.signal(sig, handler)
