"""The records of a simulated fleet: jobs with their ground truth, and counts by state."""

from __future__ import annotations

import asyncio
import enum
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any


class QueueFull(Exception):
    """``submit`` refused a job: ``FleetConfig.max_queue`` jobs are already waiting."""


class JobStatus(enum.StrEnum):
    QUEUED = "queued"
    RUNNING = "running"
    COMPLETED = "completed"
    FAILED = "failed"
    CANCELLED = "cancelled"
    TIMED_OUT = "timed_out"

    @property
    def terminal(self) -> bool:
        return self not in (JobStatus.QUEUED, JobStatus.RUNNING)


class WorkerState(enum.StrEnum):
    THROTTLED = "throttled"
    INITIALIZING = "initializing"
    IDLE = "idle"
    RUNNING = "running"


@dataclass(eq=False)
class Job:
    """One unit of work and its ground truth. Times are ``time.perf_counter()`` seconds."""

    id: str
    seq: int
    input: Mapping[str, Any]
    submitted_s: float
    execution_timeout_s: float | None = None
    status: JobStatus = JobStatus.QUEUED
    output: Any = None
    error: str | None = None
    stream: list[Any] = field(default_factory=list)
    worker_id: str | None = None
    cold: bool | None = None
    boot_ms: float | None = None
    false_ready: bool = False  # warm, yet its worker's first: it waited for the model to load
    loading_s: float = 0.0  # that wait (FleetConfig.false_ready_s on a worker's first job)
    started_s: float | None = None
    finished_s: float | None = None
    fail_message: str | None = None
    done: asyncio.Event = field(default_factory=asyncio.Event, repr=False)
    _task: asyncio.Task[None] | None = field(default=None, repr=False)

    @property
    def queue_ms(self) -> float | None:
        """Submitted to picked up by a worker: includes waiting for a worker to boot."""
        if self.started_s is None:
            return None
        return (self.started_s - self.submitted_s) * 1e3

    @property
    def execution_ms(self) -> float | None:
        if self.started_s is None or self.finished_s is None:
            return None
        return (self.finished_s - self.started_s) * 1e3

    @property
    def result(self) -> Any:
        """What a platform returns for the finished job: the list of what it streamed (a
        generator's aggregate), else its output."""
        return list(self.stream) if self.stream else self.output

    def truth(self) -> JobTruth:
        return JobTruth(
            self.id,
            self.seq,
            self.status,
            self.worker_id,
            self.cold,
            self.queue_ms,
            self.boot_ms,
            self.execution_ms,
            len(self.stream),
            self.false_ready,
        )


@dataclass(frozen=True, slots=True)
class JobTruth:
    """What really happened to a job. ``cold``: it waited for its worker to boot and was that
    worker's first job; ``boot_ms`` is that boot (``None`` when warm). ``false_ready``: it was
    warm (its worker had said ready before it arrived) and its worker's first, so it waited for
    the model to load (``FleetConfig.false_ready_s``): a request a lying health check hurts."""

    job_id: str
    seq: int
    status: JobStatus
    worker_id: str | None
    cold: bool | None
    queue_ms: float | None
    boot_ms: float | None
    execution_ms: float | None
    chunks: int
    false_ready: bool = False


@dataclass(frozen=True, slots=True)
class FleetCounts:
    """Workers by state and jobs by fate, at one moment."""

    idle: int = 0
    initializing: int = 0
    running: int = 0
    throttled: int = 0
    queued: int = 0
    completed: int = 0
    failed: int = 0
    cancelled: int = 0
    timed_out: int = 0

    @property
    def workers(self) -> int:
        return self.idle + self.initializing + self.running + self.throttled

    @property
    def ready(self) -> int:
        """Workers booted and able to take a job now (idle or running one)."""
        return self.idle + self.running

    @property
    def is_cold(self) -> bool:
        """No worker is up or coming up: the next job must wait for a boot."""
        return self.idle + self.initializing + self.running == 0
