"""What both emulators share: the prediction object built from a simulated fleet's job, with
ISO-8601 timestamps on the wall clock and ``metrics`` in seconds, as Replicate and Cog send them.
"""

from __future__ import annotations

from typing import Any

from gpubench_sdk.testing import Job, JobStatus, WallClock

from . import _prediction as p

_STATUS = {
    JobStatus.QUEUED: p.STARTING,  # waiting for an instance, or for its setup
    JobStatus.RUNNING: p.PROCESSING,
    JobStatus.COMPLETED: p.SUCCEEDED,
    JobStatus.FAILED: p.FAILED,
    JobStatus.CANCELLED: p.CANCELED,
    JobStatus.TIMED_OUT: p.CANCELED,
}


def api_time(clock: WallClock, perf_s: float) -> str:
    """A fleet instant as the APIs write it (UTC, microseconds, ``Z``)."""
    return p.iso_time(clock.unix(perf_s))


def prediction_body(
    job: Job, clock: WallClock, *, status: str | None = None, **extra: Any
) -> dict[str, Any]:
    """The prediction object for ``job``; ``status`` overrides the mapped one (``aborted``)."""
    body: dict[str, Any] = {
        "id": job.id,
        "input": dict(job.input),
        "output": None,
        "logs": "",
        "error": job.error,
        "status": status or _STATUS[job.status],
        "created_at": api_time(clock, job.submitted_s),
        "started_at": None if job.started_s is None else api_time(clock, job.started_s),
        "completed_at": None,
        "metrics": {},
        **extra,
    }
    if job.status.terminal and job.finished_s is not None:
        body["completed_at"] = api_time(clock, job.finished_s)
    if job.status is JobStatus.COMPLETED:
        body["output"] = job.result
    if job.execution_ms is not None and job.finished_s is not None:
        body["metrics"] = {
            "predict_time": round(job.execution_ms / 1e3, 6),  # seconds, as the APIs send
            "total_time": round(job.finished_s - job.submitted_s, 6),
        }
    return body
