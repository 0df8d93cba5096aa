"""A serverless fleet whose workers each run up to ``per_worker`` jobs at once, for the proof
of advise's concurrency options (tests/test_advise_concurrency.py).

The testing kit's ``SimulatedFleet`` runs one job per worker; platforms with a per-worker
concurrency setting (Cloud Run, Modal, Baseten, RunPod's concurrent handlers) run several. This
fleet is the same kind of platform with that setting: FIFO queue, a worker booted when the
queue outgrows the free slots of the workers already booting, idle workers stopped after the
idle timeout (above ``min_workers``), and a job given to the worker whose slot freed most
recently (``policy="most_recently_idle"``, the simulator's rule: ties to the worker started
first) or to a random worker with a free slot (``"random"``). A job runs
``execution_s x (1 + slowdown x (level - 1))``, ``level`` being how many jobs its worker runs
once it has started: the slowdown a shared GPU shows; ``execution_s`` is one number, or
samples drawn at random per job (a replay of executions some run measured). It offers what
RunPod's emulator (``gpubench_runpod.emulator.make_app``) uses of a fleet, so the real plugin
measures it over loopback HTTP, and it runs in virtual time (``VirtualTimeLoop``) for replays.
"""

from __future__ import annotations

import asyncio
import itertools
import random
import uuid
from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from gpubench_sdk import ScalingSettings
from gpubench_sdk.cost import WorkerInterval
from gpubench_sdk.testing import Duration, FaultPlan, FleetCounts, Job, JobStatus, JobTruth


@dataclass(eq=False)
class _Worker:
    id: str
    started_s: float
    ready_s: float | None = None
    stopped_s: float | None = None
    running: int = 0
    jobs_done: int = 0
    idle_since_s: float = 0.0
    busy: list[tuple[float, float]] = field(default_factory=list)  # merged busy spells
    busy_since_s: float = 0.0
    freed_s: float = 0.0  # when a slot last freed (or the worker became ready)


class ConcurrentFleet:
    def __init__(
        self,
        *,
        boot: Duration,
        execution_s: float | Sequence[float],
        per_worker: int,
        slowdown: float = 0.0,
        min_workers: int = 0,
        max_workers: int = 2,
        idle_timeout_s: float = 0.25,
        policy: str = "most_recently_idle",
        seed: int = 5,
    ) -> None:
        self.policy = policy
        self.boot, self.per_worker = boot, per_worker
        self._executions = [execution_s] if isinstance(execution_s, float | int) else execution_s
        self.slowdown = slowdown
        self._scaling = ScalingSettings(min_workers, max_workers, idle_timeout_s)
        self._rng = random.Random(seed)
        self._boot_rng = random.Random(seed + 1)
        self._execution_rng = random.Random(seed + 2)
        self._workers: list[_Worker] = []
        self._gone: list[_Worker] = []
        self._queue: deque[Job] = deque()
        self._jobs: dict[str, Job] = {}
        self._seq = itertools.count()
        self._ids = itertools.count(1)
        self._tasks: set[asyncio.Task[None]] = set()
        self.faults = FaultPlan()  # none: the emulator's fault middleware asks

    # what the RunPod emulator uses
    async def __aenter__(self) -> ConcurrentFleet:
        self._scale()
        return self

    async def __aexit__(self, *exc: object) -> None:
        for t in list(self._tasks):
            t.cancel()

    @property
    def scaling(self) -> ScalingSettings:
        return self._scaling

    def set_scaling(self, s: ScalingSettings) -> ScalingSettings:
        old = self._scaling
        self._scaling = ScalingSettings(
            old.min_workers if s.min_workers is None else s.min_workers,
            old.max_workers if s.max_workers is None else s.max_workers,
            old.idle_timeout_s if s.idle_timeout_s is None else s.idle_timeout_s,
        )
        for w in list(self._workers):
            if w.ready_s is not None and w.running == 0:
                self._watch_idle(w)
        self._scale()
        return self._scaling

    def job(self, job_id: str) -> Job | None:
        return self._jobs.get(job_id)

    def cancel(self, job_id: str) -> bool:
        return False

    def truths(self) -> list[JobTruth]:
        return [j.truth() for j in self._jobs.values()]

    def counts(self) -> FleetCounts:
        ready = [w for w in self._workers if w.ready_s is not None]
        done = sum(1 for j in self._jobs.values() if j.status is JobStatus.COMPLETED)
        return FleetCounts(
            idle=sum(1 for w in ready if w.running == 0),
            initializing=len(self._workers) - len(ready),
            running=sum(1 for w in ready if w.running),
            queued=len(self._queue),
            completed=done,
        )

    def submit(
        self, payload: Mapping[str, Any], *, execution_timeout_s: float | None = None
    ) -> Job:
        job = Job(uuid.uuid4().hex, next(self._seq), payload, self._now())
        self._jobs[job.id] = job
        self._queue.append(job)
        self._dispatch()
        self._scale()
        return job

    # the billing the cost module prices
    def worker_intervals(self, now_s: float) -> list[WorkerInterval]:
        out = []
        for w in self._gone + self._workers:
            end = w.stopped_s if w.stopped_s is not None else now_s
            ready = w.ready_s if w.ready_s is not None else end
            out.append(WorkerInterval(w.id, "cold_boot", w.started_s, ready))
            cursor = ready
            spells = [*w.busy, *([(w.busy_since_s, end)] if w.running else [])]
            for a, b in spells:
                if a > cursor:
                    out.append(WorkerInterval(w.id, "idle", cursor, a))
                out.append(WorkerInterval(w.id, "execution", a, b))
                cursor = b
            if end > cursor:
                out.append(WorkerInterval(w.id, "idle", cursor, end))
        return [iv for iv in out if iv.end_s > iv.start_s]

    # the platform
    def _now(self) -> float:
        return asyncio.get_running_loop().time()

    def _spawn(self, coro: Any) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _dispatch(self) -> None:
        while self._queue:
            free = [
                w for w in self._workers if w.ready_s is not None and w.running < self.per_worker
            ]
            if not free:
                return
            if self.policy == "random":
                w = free[self._rng.randrange(len(free))]
            else:  # the latest freed; ties: the worker started first (``free`` is in start order)
                w = max(free, key=lambda w: (w.freed_s, -free.index(w)))
            self._start(w, self._queue.popleft())

    def _scale(self) -> None:
        s = self._scaling
        assert s.min_workers is not None and s.max_workers is not None
        booting = sum(1 for w in self._workers if w.ready_s is None)
        want = max(s.min_workers - len(self._workers), 0)
        if len(self._queue) > booting * self.per_worker:
            want = max(want, 1)
        for _ in range(min(want, s.max_workers - len(self._workers))):
            w = _Worker(f"worker-{next(self._ids)}", self._now())
            self._workers.append(w)
            self._spawn(self._boot(w))

    async def _boot(self, w: _Worker) -> None:
        await asyncio.sleep(self.boot.sample_s(self._boot_rng))
        w.ready_s = w.idle_since_s = w.freed_s = self._now()
        self._dispatch()
        if w.running == 0:
            self._watch_idle(w)
        self._scale()

    def _start(self, w: _Worker, job: Job) -> None:
        now = self._now()
        if w.running == 0:
            w.busy_since_s = now
        w.running += 1
        job.status, job.started_s, job.worker_id = JobStatus.RUNNING, now, w.id
        assert w.ready_s is not None
        # cold: it waited for this worker's boot (several may, one per slot, as the simulator
        # counts them)
        job.cold = now == w.ready_s and w.ready_s > job.submitted_s
        w.jobs_done += 1
        alone_s = float(self._execution_rng.choice(self._executions))
        self._spawn(self._run(w, job, alone_s * (1 + self.slowdown * (w.running - 1))))

    async def _run(self, w: _Worker, job: Job, seconds: float) -> None:
        await asyncio.sleep(seconds)
        job.finished_s = self._now()
        job.status, job.output = JobStatus.COMPLETED, {"echo": job.input.get("echo")}
        job.done.set()
        w.running -= 1
        w.freed_s = job.finished_s
        if self._queue:
            self._dispatch()
        if w.running == 0:
            w.busy.append((w.busy_since_s, job.finished_s))
            w.idle_since_s = job.finished_s
            self._watch_idle(w)
        self._scale()

    def _watch_idle(self, w: _Worker) -> None:
        since = w.idle_since_s

        async def watch() -> None:
            assert self._scaling.idle_timeout_s is not None
            await asyncio.sleep(max(0.0, since + self._scaling.idle_timeout_s - self._now()))
            assert self._scaling.min_workers is not None
            if (
                w in self._workers
                and w.running == 0
                and w.idle_since_s == since
                and len(self._workers) > self._scaling.min_workers
            ):
                w.stopped_s = since + self._scaling.idle_timeout_s
                self._workers.remove(w)
                self._gone.append(w)

        self._spawn(watch())
