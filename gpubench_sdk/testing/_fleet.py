"""A simulated serverless fleet: workers that boot, serve one job at a time, idle and stop.

It runs on the asyncio loop of the emulator that serves it (an ASGI app under uvicorn), and
records the ground truth of every job (cold or not, queue, boot and execution time, worker) and
every worker's billable life, so a provider plugin's figures can be checked against what really
happened. Tests may read it, and change its scaling, from their own thread.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import itertools
import random
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from .._base._errors import ConfigError
from .._base._types import ScalingSettings
from ..cost._policy import (
    DEFAULT_WORKER_POLICY,
    WorkerPolicy,
    check_policy,
    choose_worker,
    may_stop,
)
from ._billing import BillingMeter, WorkerBill
from ._faults import FaultKind, FaultPlan
from ._jobs import FleetCounts, Job, JobStatus, JobTruth, QueueFull, WorkerState
from ._timing import Duration

Handler = Callable[[Mapping[str, Any]], Any]
_DEFAULT_COLD_START = Duration.fixed(0.3)  # fast enough for tests, long enough to measure
_INSTANT = Duration.fixed(0.0)


def echo_handler(payload: Mapping[str, Any]) -> Any:
    """The default model: answers ``{"echo": payload["echo"]}`` (what ``EchoProbe`` checks)."""
    return {"echo": payload.get("echo")}


@dataclass(frozen=True, slots=True)
class FleetConfig:
    """How the simulated platform behaves. Every duration is multiplied by ``time_scale``.

    Execution time is the request's ``sleep_ms`` when it has one (``EchoProbe`` sends it), else a
    draw from ``execution``. A request with ``"chunks": n`` streams ``n`` pieces over its
    execution; one with ``"fail": "message"`` ends failed. ``capacity`` is how many GPUs the
    platform has for this endpoint: workers beyond it wait *throttled*. ``max_queue`` makes
    ``submit`` refuse work (``QueueFull``) when that many jobs wait. ``worker_policy`` says
    which idle worker takes a job (``gpubench_sdk.cost`` ``WORKER_POLICIES``; the simulator
    applies the same rule, so the two bill a trace alike). ``false_ready_s`` makes a worker say
    ready that long before it can serve (a health check that answers before the model server has
    loaded): its first job waits the rest, warm by every signal the platform gives.
    """

    cold_start: Duration = _DEFAULT_COLD_START
    execution: Duration = _INSTANT
    min_workers: int = 0
    max_workers: int = 3
    idle_timeout_s: float = 1.0
    capacity: int | None = None
    max_queue: int | None = None
    seed: int = 0
    time_scale: float = 1.0
    handler: Handler = echo_handler
    worker_policy: WorkerPolicy = DEFAULT_WORKER_POLICY  # the simulator's too
    false_ready_s: float = 0.0

    def __post_init__(self) -> None:
        _check_scaling(self.min_workers, self.max_workers, self.idle_timeout_s)
        check_policy(self.worker_policy)
        if not self.false_ready_s >= 0:
            raise ConfigError("fleet.false_ready_s", self.false_ready_s, "seconds >= 0")
        if not self.time_scale > 0:
            raise ConfigError("fleet.time_scale", self.time_scale, "a factor > 0")
        if self.capacity is not None and self.capacity < 1:
            raise ConfigError("fleet.capacity", self.capacity, "an integer >= 1, or None")


def _check_scaling(min_workers: int, max_workers: int, idle_timeout_s: float) -> None:
    if min_workers < 0:
        raise ConfigError("scaling.min_workers", min_workers, "an integer >= 0")
    if max_workers < 1:
        raise ConfigError("scaling.max_workers", max_workers, "an integer >= 1")
    if min_workers > max_workers:
        raise ConfigError("scaling.min_workers", min_workers, f"<= max_workers ({max_workers})")
    if not idle_timeout_s >= 0:
        raise ConfigError("scaling.idle_timeout_s", idle_timeout_s, "seconds >= 0")


@dataclass(eq=False)
class _Worker:
    id: str
    state: WorkerState
    bill: WorkerBill | None = None
    boot_end_s: float | None = None
    idle_since_s: float = 0.0
    jobs_done: int = 0
    task: asyncio.Task[None] | None = None
    assigned: Job | None = None  # the job the policy gave this idle worker, not yet begun


class SimulatedFleet:
    """A serverless endpoint's workers, queue and control plane, simulated on asyncio.

    Use it inside the emulator's event loop (``async with fleet:`` in the app's lifespan):
    ``submit`` a job, ``await job.done.wait()``, ``cancel`` it, read ``counts()``, change
    ``set_scaling``. ``truths()`` and ``billing`` are the ground truth for tests.

    ``clock`` (default ``time.perf_counter``) stamps every job and bill; a virtual-time event
    loop passes its own ``loop.time`` so a day of traffic runs in a moment.
    """

    def __init__(
        self,
        config: FleetConfig | None = None,
        faults: FaultPlan | None = None,
        *,
        clock: Callable[[], float] = time.perf_counter,
    ) -> None:
        self._now = clock
        self.config = config or FleetConfig()
        self.faults = faults if faults is not None else FaultPlan()
        self.billing = BillingMeter(self.config.time_scale)
        c = self.config
        self._scaling = ScalingSettings(c.min_workers, c.max_workers, c.idle_timeout_s)
        self._rng = random.Random(c.seed)
        self._queue: deque[Job] = deque()
        self._jobs: dict[str, Job] = {}
        self._workers: list[_Worker] = []
        self._worker_ids = itertools.count(1)
        self._job_seq = itertools.count()
        self._fates = {s: 0 for s in JobStatus}
        self._wake: asyncio.Event | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._lock = threading.Lock()  # guards reads from other threads against list changes
        self._stopping = False

    # -- lifecycle ------------------------------------------------------------------------

    async def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._wake = asyncio.Event()
        self._scale()

    async def stop(self) -> None:
        self._stopping = True
        tasks = [w.task for w in self._workers if w.task is not None]
        tasks += [j._task for j in self._jobs.values() if j._task is not None]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        self._loop = None
        self._stopping = False

    async def __aenter__(self) -> SimulatedFleet:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    # -- jobs -----------------------------------------------------------------------------

    def submit(
        self,
        payload: Mapping[str, Any],
        *,
        job_id: str | None = None,
        execution_timeout_s: float | None = None,
    ) -> Job:
        """Queue a job (FIFO); a worker takes it when one is free, booting one if needed."""
        self._require_loop()
        if self.config.max_queue is not None and len(self._queue) >= self.config.max_queue:
            raise QueueFull(f"{len(self._queue)} jobs already queued")
        job = Job(
            job_id or uuid.uuid4().hex,
            next(self._job_seq),
            payload,
            self._now(),
            execution_timeout_s,
        )
        fault = self.faults.draw("job")
        if fault is not None and fault.kind is FaultKind.JOB_FAILED:
            job.fail_message = fault.body or "simulated handler error"
        with self._lock:
            self._jobs[job.id] = job
            self._queue.append(job)
        self._dispatch()
        self._scale()
        self._notify()
        return job

    def job(self, job_id: str) -> Job | None:
        return self._jobs.get(job_id)

    def cancel(self, job_id: str) -> bool:
        """Cancel a queued or running job; False if unknown or already finished."""
        if not self._in_loop():
            return bool(self._threadsafe(lambda: self.cancel(job_id)))
        job = self._jobs.get(job_id)
        if job is None or job.status.terminal:
            return False
        if job.status is JobStatus.QUEUED:
            with self._lock:
                if job in self._queue:
                    self._queue.remove(job)
                for w in self._workers:  # given to an idle worker that has not begun it
                    if w.assigned is job:
                        w.assigned = None
            self._finish(job, JobStatus.CANCELLED)
        elif job._task is not None:
            job._task.cancel()
        return True

    def truths(self) -> list[JobTruth]:
        """Every job's ground truth, in submission order."""
        with self._lock:
            jobs = list(self._jobs.values())
        return [j.truth() for j in jobs]

    def truth(self, job_id: str) -> JobTruth:
        return self._jobs[job_id].truth()

    # -- state and control plane -----------------------------------------------------------

    def counts(self) -> FleetCounts:
        with self._lock:
            states = [w.state for w in self._workers]
            queued = len(self._queue)
            fates = dict(self._fates)
        return FleetCounts(
            idle=states.count(WorkerState.IDLE),
            initializing=states.count(WorkerState.INITIALIZING),
            running=states.count(WorkerState.RUNNING),
            throttled=states.count(WorkerState.THROTTLED),
            queued=queued,
            completed=fates[JobStatus.COMPLETED],
            failed=fates[JobStatus.FAILED],
            cancelled=fates[JobStatus.CANCELLED],
            timed_out=fates[JobStatus.TIMED_OUT],
        )

    @property
    def scaling(self) -> ScalingSettings:
        return self._scaling

    def set_scaling(self, settings: ScalingSettings) -> ScalingSettings:
        """Change min/max workers and idle timeout (``None`` keeps a value); returns the result.

        Raises ``ConfigError`` for an impossible combination. Safe from any thread.
        """
        s = self._scaling
        new = ScalingSettings(
            s.min_workers if settings.min_workers is None else settings.min_workers,
            s.max_workers if settings.max_workers is None else settings.max_workers,
            s.idle_timeout_s if settings.idle_timeout_s is None else settings.idle_timeout_s,
        )
        assert new.min_workers is not None and new.max_workers is not None
        assert new.idle_timeout_s is not None
        _check_scaling(new.min_workers, new.max_workers, new.idle_timeout_s)
        self._scaling = new
        if self._loop is not None:
            if self._in_loop():
                self._scale()
                self._notify()
            else:
                self._loop.call_soon_threadsafe(self._rescale)
        return new

    def request_worker(self) -> None:
        """Boot a worker if none is up or booting (what a proxy does on a request to a cold
        endpoint, even when it answers 503)."""
        if self.counts().is_cold and len(self._workers) < self._max():
            self._start_worker()

    def wait_for(self, predicate: Callable[[FleetCounts], bool], timeout_s: float) -> FleetCounts:
        """Block this (non-loop) thread until ``predicate(counts())`` holds; TimeoutError if not."""
        deadline = time.monotonic() + timeout_s
        while True:
            counts = self.counts()
            if predicate(counts):
                return counts
            if time.monotonic() >= deadline:
                raise TimeoutError(f"fleet never reached the expected state; last: {counts}")
            time.sleep(0.01)

    # -- internals ------------------------------------------------------------------------

    def _in_loop(self) -> bool:
        try:
            return asyncio.get_running_loop() is self._loop
        except RuntimeError:
            return False

    def _require_loop(self) -> None:
        if self._loop is None or not self._in_loop():
            raise RuntimeError("use the fleet inside its event loop, after 'await fleet.start()'")

    def _threadsafe(self, fn: Callable[[], Any]) -> Any:
        if self._loop is None:
            return fn()
        future: concurrent.futures.Future[Any] = concurrent.futures.Future()

        def call() -> None:
            try:
                future.set_result(fn())
            except Exception as exc:
                future.set_exception(exc)

        self._loop.call_soon_threadsafe(call)
        return future.result(10)

    def _rescale(self) -> None:
        self._scale()
        self._notify()

    def _notify(self) -> None:
        if self._wake is not None:
            self._wake.set()
            self._wake = asyncio.Event()

    def _max(self) -> int:
        assert self._scaling.max_workers is not None
        return self._scaling.max_workers

    def _scale(self) -> None:
        """Start workers for queued jobs no free or booting worker will take, and up to min."""
        with self._lock:
            states = [w.state for w in self._workers if w.assigned is None]
            count = len(self._workers)
            queued = len(self._queue)
        coming = len(states) - states.count(WorkerState.RUNNING)
        assert self._scaling.min_workers is not None
        want = max(self._scaling.min_workers - count, queued - coming)
        for _ in range(max(0, min(want, self._max() - count))):
            self._start_worker()

    def _start_worker(self) -> None:
        worker = _Worker(f"worker-{next(self._worker_ids)}", WorkerState.THROTTLED)
        with self._lock:
            self._workers.append(worker)
        worker.task = asyncio.get_running_loop().create_task(self._worker_main(worker))

    def _dispatch(self) -> None:
        """Give queued jobs to idle workers, chosen by ``config.worker_policy`` (ties: the
        worker started first). The chosen worker begins the job when it next runs."""
        while self._queue:
            idle = [w for w in self._workers if w.state is WorkerState.IDLE and w.assigned is None]
            if not idle:
                return
            pick = choose_worker(
                [w.idle_since_s for w in idle], self.config.worker_policy, self._rng
            )
            with self._lock:
                idle[pick].assigned = self._queue.popleft()
            self._notify()

    def _has_gpu(self) -> bool:
        capacity = self.config.capacity
        if capacity is None:
            return True
        holding = sum(1 for w in self._workers if w.state is not WorkerState.THROTTLED)
        return holding < capacity

    def _should_stop(self, worker: _Worker, now_s: float) -> float | None:
        """0 to stop now, else seconds until this idle worker's timeout (None: never)."""
        count = len(self._workers)
        if count > self._max():
            return 0.0
        assert self._scaling.min_workers is not None and self._scaling.idle_timeout_s is not None
        if not may_stop(count, self._scaling.min_workers):
            return None
        left = worker.idle_since_s + self._scaling.idle_timeout_s * self.config.time_scale - now_s
        return max(0.0, left)

    async def _wait(self, timeout_s: float | None) -> None:
        assert self._wake is not None
        wake = self._wake
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(wake.wait(), timeout_s)

    async def _worker_main(self, worker: _Worker) -> None:
        try:
            while not self._has_gpu():
                await self._wait(None)
            worker.state = WorkerState.INITIALIZING
            worker.bill = self.billing.started(worker.id, self._now())
            await asyncio.sleep(self.config.cold_start.sample_s(self._rng) * self.config.time_scale)
            worker.boot_end_s = worker.bill.boot_end_s = self._now()
            worker.idle_since_s = worker.boot_end_s
            worker.state = WorkerState.IDLE
            while True:
                self._dispatch()
                if worker.assigned is not None:
                    job, worker.assigned = worker.assigned, None
                    await self._run(worker, job)
                    continue
                wait_s = self._should_stop(worker, self._now())
                if wait_s == 0.0:
                    return
                await self._wait(wait_s)
        finally:
            with self._lock:
                self._workers.remove(worker)
                if worker.assigned is not None:  # cancelled before it began: back in line
                    self._queue.appendleft(worker.assigned)
            if worker.bill is not None:
                worker.bill.stopped_s = self._now()
            if not self._stopping:
                self._scale()
                self._notify()

    async def _run(self, worker: _Worker, job: Job) -> None:
        worker.state = WorkerState.RUNNING
        job.status = JobStatus.RUNNING
        job.started_s = self._now()
        job.worker_id = worker.id
        assert worker.boot_end_s is not None and worker.bill is not None
        job.cold = worker.jobs_done == 0 and worker.boot_end_s > job.submitted_s
        job.boot_ms = (worker.boot_end_s - worker.bill.started_s) * 1e3 if job.cold else None
        # The model loads on the worker's first job, whatever the health check said: a cold
        # job's wait for it is part of its cold start; a warm one's is a false "ready".
        loading_s = self.config.false_ready_s if worker.jobs_done == 0 else 0.0
        job.false_ready = bool(loading_s) and not job.cold
        job.loading_s = loading_s * self.config.time_scale
        job._task = asyncio.get_running_loop().create_task(self._execute(worker, job))
        await asyncio.wait({job._task})
        job._task = None

    async def _execute(self, worker: _Worker, job: Job) -> None:
        """Run the job; its end and the worker's return to idle happen in one step, so no
        observer ever sees a finished job on a worker still marked running."""
        status, output, error = JobStatus.COMPLETED, None, None
        try:
            status, output, error = await self._handle(job)
        except asyncio.CancelledError:
            status = JobStatus.CANCELLED
        finally:
            self._finish(job, status, output=output, error=error)
            assert job.started_s is not None and job.finished_s is not None
            assert worker.bill is not None
            worker.jobs_done += 1
            worker.bill.busy.append((job.started_s, job.finished_s))
            worker.state = WorkerState.IDLE
            worker.idle_since_s = job.finished_s

    async def _handle(self, job: Job) -> tuple[JobStatus, Any, str | None]:
        payload = job.input
        scale = self.config.time_scale
        sleep_ms = payload.get("sleep_ms")
        if isinstance(sleep_ms, int | float) and not isinstance(sleep_ms, bool):
            execution_s = float(sleep_ms) / 1e3 * scale
        else:
            execution_s = self.config.execution.sample_s(self._rng) * scale
        chunks = payload.get("chunks", 0)
        chunks = chunks if isinstance(chunks, int) and chunks > 0 else 0
        try:
            async with asyncio.timeout(job.execution_timeout_s):
                if job.loading_s:
                    await asyncio.sleep(job.loading_s)
                for i in range(chunks):
                    await asyncio.sleep(execution_s / chunks)
                    job.stream.append({"chunk": i, "echo": payload.get("echo")})
                if not chunks:
                    await asyncio.sleep(execution_s)
        except TimeoutError:
            return JobStatus.TIMED_OUT, None, "execution timeout exceeded"
        failure = job.fail_message or payload.get("fail")
        if failure:
            return JobStatus.FAILED, None, str(failure)
        try:
            return JobStatus.COMPLETED, self.config.handler(payload), None
        except Exception as exc:
            return JobStatus.FAILED, None, f"{type(exc).__name__}: {exc}"

    def _finish(
        self, job: Job, status: JobStatus, *, output: Any = None, error: str | None = None
    ) -> None:
        if job.status.terminal:
            return
        job.finished_s = self._now()
        job.status, job.output, job.error = status, output, error
        with self._lock:
            self._fates[status] += 1
        job.done.set()


def quick_fleet(cold_start_s: float, **config: Any) -> SimulatedFleet:
    """A ``SimulatedFleet`` whose cold starts take ``cold_start_s`` exactly
    (``Duration.fixed``); ``config`` is the rest of its ``FleetConfig``."""
    return SimulatedFleet(FleetConfig(cold_start=Duration.fixed(cold_start_s), **config))
