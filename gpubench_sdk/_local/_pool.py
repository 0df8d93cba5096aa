"""The worker pool: spawning, FIFO queueing, dispatch, idle scale-down and failure handling.

Everything here runs on one event loop and mutates state only in plain (non-async) methods, so a
decision (pick a worker, pop the queue, spawn) is never split by an ``await``.
"""

from __future__ import annotations

import asyncio
import collections
import logging
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from ._config import LocalRuntimeConfig
from ._process import start_worker, stop_worker, worker_env
from ._protocol import FrameError, encode_job, read_frame

logger = logging.getLogger("gpubench.local")

WorkerState = Literal["starting", "idle", "busy", "stopping"]
RETRY_AFTER_S = 1


@dataclass(slots=True)
class Reply:
    """What the gateway sends back for one request."""

    status: int
    body: dict[str, Any]
    headers: dict[str, str] = field(default_factory=dict)


@dataclass(eq=False, slots=True)
class _Job:
    id: str
    payload_json: bytes
    arrived_ns: int
    future: asyncio.Future[Reply]
    worker: _Worker | None = None
    dispatched_ns: int = 0
    cold: bool = False


@dataclass(eq=False, slots=True)
class _Worker:
    id: str
    spawned_ns: int
    state: WorkerState = "starting"
    proc: asyncio.subprocess.Process | None = None
    boot: dict[str, float] | None = None
    jobs_done: int = 0
    job: _Job | None = None
    idle_since: float = 0.0
    # While idle: the idle timer. While starting: the boot deadline (boot_timeout_s).
    timer: asyncio.TimerHandle | None = None
    task: asyncio.Task[None] | None = None


class WorkerPool:
    """Serverless-style workers for one handler: on demand, reused warm, scaled to zero."""

    def __init__(self, config: LocalRuntimeConfig) -> None:
        self.config = config
        self.min_workers = config.min_workers
        self.max_workers = config.max_workers
        self.idle_timeout_s = config.idle_timeout_s
        self._env = worker_env(config)
        self._workers: dict[str, _Worker] = {}  # in service: starting, idle or busy
        self._live: set[_Worker] = set()  # every worker whose process may still exist
        self._stop_tasks: set[asyncio.Task[None]] = set()  # strong references, or they vanish
        self._queue: collections.deque[_Job] = collections.deque()
        self._spawned = 0
        self._completed = 0
        self._failed = 0
        self._load_failed = False  # stops min_workers from respawning a handler that cannot load
        self._last_boot: dict[str, Any] | None = None
        self._closing = False

    # ----- requests -------------------------------------------------------------------------

    async def submit(self, payload_json: bytes, arrived_ns: int) -> Reply:
        """Queue one validated JSON payload and wait for its reply, at most request_timeout_s."""
        request_id = uuid.uuid4().hex
        if self._closing:
            return Reply(503, {"error": "runtime is shutting down", "request_id": request_id})
        if len(self._queue) >= self.config.max_queue and not self._idle_workers():
            message = f"queue full ({len(self._queue)} requests waiting); retry later"
            return Reply(429, {"error": message}, {"Retry-After": str(RETRY_AFTER_S)})
        loop = asyncio.get_running_loop()
        job = _Job(request_id, payload_json, arrived_ns, loop.create_future())
        self._queue.append(job)
        self._pump()
        deadline_s = self.config.request_timeout_s - (time.monotonic_ns() - arrived_ns) / 1e9
        try:
            await asyncio.wait((job.future,), timeout=max(deadline_s, 0.0))
        except asyncio.CancelledError:  # the client went away: a job still waiting is dropped
            if job.worker is None and not job.future.done():
                self._queue.remove(job)
            raise
        if not job.future.done():
            self._time_out(job)
        return job.future.result()

    def _time_out(self, job: _Job) -> None:
        limit = self.config.request_timeout_s
        if job.worker is None:
            self._queue.remove(job)
            message = f"no worker became free within request_timeout_s={limit:g}"
            self._finish(job, Reply(504, {"error": message, "stage": "queue"}))
            return
        worker = job.worker
        message = f"handler did not finish within request_timeout_s={limit:g}; worker stopped"
        self._finish(job, Reply(504, {"error": message, "stage": "execution"}))
        # The handler is still running and cannot be interrupted safely: replace the worker.
        worker.job = None
        self._stop(worker, graceful=False)

    def _finish(self, job: _Job, reply: Reply) -> None:
        if job.future.done():
            return
        if reply.status == 200:
            self._completed += 1
        else:
            self._failed += 1
            reply.body.setdefault("request_id", job.id)
            if job.worker is not None:
                reply.body.setdefault("worker_id", job.worker.id)
        job.future.set_result(reply)

    def _fail_queued(self, status: int, message: str) -> None:
        while self._queue:
            self._finish(self._queue.popleft(), Reply(status, {"error": message}))

    # ----- scheduling -----------------------------------------------------------------------

    def _pump(self) -> None:
        """Give queued jobs to idle workers, most recently used first; scale out for the rest."""
        while self._queue and (idle := self._idle_workers()):
            self._dispatch(max(idle, key=lambda w: w.idle_since), self._queue.popleft())
        if self._closing:
            return
        starting = sum(1 for w in self._workers.values() if w.state == "starting")
        while len(self._queue) > starting and len(self._workers) < self.max_workers:
            self._spawn()
            starting += 1

    def _idle_workers(self) -> list[_Worker]:
        return [w for w in self._workers.values() if w.state == "idle"]

    def _dispatch(self, worker: _Worker, job: _Job) -> None:
        assert worker.proc is not None and worker.proc.stdin is not None
        self._cancel_timer(worker)
        worker.state = "busy"
        worker.job = job
        job.worker = worker
        job.dispatched_ns = time.monotonic_ns()
        job.cold = worker.jobs_done == 0 and worker.spawned_ns >= job.arrived_ns
        # No drain: one job per worker means at most one frame is ever buffered. A dead pipe
        # surfaces as end of stream in the worker's reader task, which fails the job with 502.
        worker.proc.stdin.write(encode_job(job.id, job.payload_json))

    def _on_idle(self, worker: _Worker) -> None:
        worker.state = "idle"
        worker.idle_since = time.monotonic()
        if self._closing:
            return
        if self._queue:
            self._dispatch(worker, self._queue.popleft())
        elif len(self._workers) > self.max_workers:  # max_workers was lowered meanwhile
            self._stop(worker)
        else:
            self._arm_idle_timer(worker, self.idle_timeout_s)

    def _arm_idle_timer(self, worker: _Worker, delay_s: float) -> None:
        self._set_timer(worker, delay_s, self._idle_expired)

    def _set_timer(
        self, worker: _Worker, delay_s: float, expired: Callable[[_Worker], None]
    ) -> None:
        """The worker's one timer (idle, or boot deadline), replacing any it had."""
        self._cancel_timer(worker)
        loop = asyncio.get_running_loop()
        worker.timer = loop.call_later(max(delay_s, 0.0), expired, worker)

    @staticmethod
    def _cancel_timer(worker: _Worker) -> None:
        if worker.timer is not None:
            worker.timer.cancel()
            worker.timer = None

    def _idle_expired(self, worker: _Worker) -> None:
        worker.timer = None
        if worker.state == "idle" and len(self._workers) > self.min_workers:
            logger.debug("worker %s idle for %.3g s: stopping", worker.id, self.idle_timeout_s)
            self._stop(worker)

    def _boot_expired(self, worker: _Worker) -> None:
        worker.timer = None
        if worker.state != "starting":
            return
        limit = self.config.boot_timeout_s
        why = (
            f"was not ready within boot_timeout_s={limit:g} (its interpreter or the handler's"
            " load hung; raise boot_timeout_s for a slower load)"
        )
        logger.error("worker %s %s: stopping it", worker.id, why)
        self._load_failed = True  # as for a load that failed: min_workers does not respawn it
        self._fail_queued(503, f"worker {worker.id} {why}")
        self._stop(worker, graceful=False)

    def _ensure_min(self) -> None:
        if self._closing or self._load_failed:
            return
        while len(self._workers) < self.min_workers:
            self._spawn()

    # ----- worker lifecycle -----------------------------------------------------------------

    def _spawn(self) -> None:
        self._spawned += 1
        worker = _Worker(id=f"w{self._spawned}", spawned_ns=time.monotonic_ns())
        self._workers[worker.id] = worker
        self._live.add(worker)
        worker.task = asyncio.get_running_loop().create_task(self._run(worker))
        worker.task.add_done_callback(lambda _: self._live.discard(worker))

    async def _run(self, worker: _Worker) -> None:
        """Start the worker process and read its frames until it exits."""
        try:
            worker.proc = await start_worker(self.config, self._env, worker.spawned_ns)
        except OSError as exc:
            self._on_exit(worker, None, f"could not start {self.config.python!r}: {exc}")
            return
        proc = worker.proc
        assert proc.stdout is not None
        if worker.state == "stopping":  # stopped while the process was being created
            await stop_worker(proc, graceful=False)
        else:
            self._set_timer(worker, self.config.boot_timeout_s, self._boot_expired)
        detail = ""
        try:
            while True:
                self._on_frame(worker, await read_frame(proc.stdout))
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        except FrameError as exc:
            detail = f"broke the frame protocol ({exc})"
            logger.error("worker %s %s: stopping it", worker.id, detail)
            await stop_worker(proc, graceful=False)
        self._on_exit(worker, await proc.wait(), detail)

    def _on_frame(self, worker: _Worker, frame: dict[str, Any]) -> None:
        kind = frame["type"]
        if kind == "ready":
            ready_ns = time.monotonic_ns()
            worker.boot = {
                "boot_ms": (ready_ns - worker.spawned_ns) / 1e6,
                "startup_ms": float(frame["startup_ms"]),
                "import_ms": float(frame["import_ms"]),
                "load_ms": float(frame["load_ms"]),
            }
            self._last_boot = {"worker_id": worker.id, **worker.boot}
            self._load_failed = False
            logger.info(
                "worker %s (pid %s) ready in %.1f ms: interpreter %.1f, imports %.1f, load %.1f",
                worker.id,
                frame.get("pid"),
                worker.boot["boot_ms"],
                worker.boot["startup_ms"],
                worker.boot["import_ms"],
                worker.boot["load_ms"],
            )
            if worker.state == "starting":
                self._on_idle(worker)
        elif kind == "load_error":
            self._load_failed = True
            self._workers.pop(worker.id, None)
            worker.state = "stopping"  # the worker exits by itself
            logger.error("worker %s failed to load the handler:\n%s", worker.id, frame["traceback"])
            self._fail_queued(503, f"handler failed to load: {frame['error']}")
        elif kind in ("result", "error"):
            job = worker.job
            if job is None or job.id != frame.get("id"):
                return  # the answer to a job that already timed out
            worker.job = None
            worker.jobs_done += 1
            self._finish(job, self._reply(worker, job, frame))
            if worker.state == "busy":
                self._on_idle(worker)

    def _reply(self, worker: _Worker, job: _Job, frame: dict[str, Any]) -> Reply:
        execution_ms = float(frame["execution_ms"])
        if frame["type"] == "error":
            logger.warning("handler error in worker %s: %s", worker.id, frame["error"])
            logger.debug("handler traceback:\n%s", frame["traceback"])
            return Reply(500, {"error": frame["error"], "execution_ms": execution_ms})
        queue_ms = (job.dispatched_ns - job.arrived_ns) / 1e6
        boot_ms = worker.boot["boot_ms"] if job.cold and worker.boot else None
        body = {
            "output": frame.get("output"),
            "request_id": job.id,
            "worker_id": worker.id,
            "queue_ms": queue_ms,
            "execution_ms": execution_ms,
            "cold": job.cold,
            "boot_ms": boot_ms,
        }
        headers = {
            "x-request-id": job.id,
            "x-gpubench-queue-ms": f"{queue_ms:.3f}",
            "x-gpubench-execution-ms": f"{execution_ms:.3f}",
        }
        return Reply(200, body, headers)

    def _on_exit(self, worker: _Worker, code: int | None, detail: str = "") -> None:
        self._workers.pop(worker.id, None)
        self._cancel_timer(worker)
        was = worker.state
        worker.state = "stopping"
        why = detail or f"exited with code {code}"
        if worker.job is not None:
            logger.warning("worker %s %s during request %s", worker.id, why, worker.job.id)
            message = f"worker {worker.id} {why} during the request"
            self._finish(worker.job, Reply(502, {"error": message}))
            worker.job = None
        elif was == "starting":  # died before 'ready' or 'load_error': a failed boot all the same
            self._load_failed = True
            logger.error("worker %s failed to start: %s", worker.id, why)
            self._fail_queued(503, f"worker failed to start: {why}; see the runtime's stderr")
        elif was != "stopping":
            logger.warning("worker %s %s while idle", worker.id, why)
        self._ensure_min()
        self._pump()

    def _stop(self, worker: _Worker, *, graceful: bool = True) -> None:
        """Take a worker out of service now; its process is stopped in the background."""
        self._workers.pop(worker.id, None)
        self._cancel_timer(worker)
        worker.state = "stopping"
        if worker.proc is None:  # still being created: _run stops it once it exists
            return
        task = asyncio.get_running_loop().create_task(stop_worker(worker.proc, graceful=graceful))
        self._stop_tasks.add(task)
        task.add_done_callback(self._stop_tasks.discard)

    # ----- control --------------------------------------------------------------------------

    def start(self) -> None:
        """Start the ``min_workers`` warm workers. Call on the running loop."""
        self._ensure_min()

    def scale_to_zero(self) -> None:
        """Stop every idle worker; busy and starting ones finish and then obey the idle timeout."""
        for worker in [w for w in self._workers.values() if w.state == "idle"]:
            self._stop(worker)
        self._ensure_min()

    def scaling(self) -> dict[str, Any]:
        return {
            "min_workers": self.min_workers,
            "max_workers": self.max_workers,
            "idle_timeout_s": self.idle_timeout_s,
        }

    def set_scaling(self, settings: dict[str, Any]) -> None:
        """Apply validated settings: idle timers restart from each worker's last use."""
        self.min_workers = settings["min_workers"]
        self.max_workers = settings["max_workers"]
        self.idle_timeout_s = settings["idle_timeout_s"]
        self._load_failed = False
        now = time.monotonic()
        idle = sorted(
            (w for w in self._workers.values() if w.state == "idle"), key=lambda w: w.idle_since
        )
        for worker in idle:  # least recently used first, should max_workers have shrunk
            if len(self._workers) > self.max_workers:
                self._stop(worker)
            else:
                self._arm_idle_timer(worker, self.idle_timeout_s - (now - worker.idle_since))
        self._ensure_min()
        self._pump()

    def health(self) -> dict[str, Any]:
        counts = {"starting": 0, "idle": 0, "busy": 0}
        for worker in self._workers.values():
            counts[worker.state] += 1
        stopping = sum(1 for w in self._live if w.state == "stopping")
        return {
            "workers": {**counts, "stopping": stopping},
            "queue": len(self._queue),
            "jobs": {"completed": self._completed, "failed": self._failed},
            "scaling": self.scaling(),
            "pool": [
                {
                    "id": w.id,
                    "pid": w.proc.pid if w.proc is not None else None,
                    "state": w.state,
                    "jobs": w.jobs_done,
                    "boot_ms": w.boot["boot_ms"] if w.boot else None,
                }
                for w in self._workers.values()
            ],
            "last_boot": self._last_boot,
        }

    async def close(self) -> None:
        """Answer every waiting request 503 and stop every worker, leaving no process behind."""
        self._closing = True
        self._fail_queued(503, "runtime is shutting down")
        workers = list(self._live)
        for worker in workers:
            graceful = worker.state == "idle"
            if worker.job is not None:
                self._finish(worker.job, Reply(503, {"error": "runtime is shutting down"}))
                worker.job = None
            self._stop(worker, graceful=graceful)
        await asyncio.gather(*self._stop_tasks, return_exceptions=True)
        await asyncio.gather(*(w.task for w in workers if w.task), return_exceptions=True)
