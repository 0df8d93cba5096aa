"""What the emulators of queue-style (job) APIs share: ``QueueEmulator``, an ``Emulator`` that
keeps the jobs its routes submitted and answers for them the way such APIs do.

A job API (RunPod's ``/run`` and ``/status``, fal's queue, Baseten's async predicts, Replicate's
predictions) submits a job, answers its status by id, may hold a synchronous call for a while,
streams what the job yields, cancels it, ends it at a deadline and caps its callers' rates.
``QueueEmulator`` does each of these once; the emulator keeps only its provider's protocol (its
paths, bodies, status words and units)::

    emu = QueueEmulator(fleet, name="Acme", check=KeyCheck(api_key), job_param="job_id",
                        missing="no such job", rate_limits={"run": 10})

    @emu.route("/v1/run", "POST", fault="submit")
    async def run(request):
        emu.throttle("run")                       # 429 beyond 10 a second
        body = await emu.read_input(request)      # {"input": {...}} or 400
        job = emu.submit(body["input"])
        await emu.wait(job, 2.0)                  # held up to 2 s, then answered pending
        return {"id": job.id, "status": job.status.value}

    @emu.route("/v1/status/{job_id}", fault="poll")
    async def status(request):
        job = emu.find(request)                   # 404 "no such job" for an id not submitted here
        return {"id": job.id, "status": job.status.value, "ahead": emu.position(job)}

``WallClock`` writes the fleet's ``perf_counter`` instants as wall-clock times (the kit's
``sse_event`` frames a stream's events).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Literal

from ._builder import Emulator, RateLimit, Reject
from ._emulator import follow, hold
from ._jobs import Job, JobStatus

if TYPE_CHECKING:
    from starlette.requests import Request
    from starlette.responses import Response

FirstOutput = Literal["output", "failed", "hung_up"]
_ANY: Any = object()


class WallClock:
    """Maps the fleet's ``time.perf_counter()`` seconds onto Unix time, once, so every
    timestamp an emulator writes is consistent with the ground truth to the microsecond."""

    def __init__(self) -> None:
        self.offset_s = time.time() - time.perf_counter()

    def unix(self, perf_s: float) -> float:
        """``perf_s`` as Unix seconds."""
        return perf_s + self.offset_s

    def at(self, perf_s: float) -> datetime:
        """``perf_s`` as an aware UTC ``datetime``."""
        return datetime.fromtimestamp(self.unix(perf_s), UTC)

    def iso(self, perf_s: float | None) -> str | None:
        """``perf_s`` in ISO 8601 (``2026-11-29T23:28:56.123456+00:00``); ``None`` stays None."""
        return None if perf_s is None else self.at(perf_s).isoformat()


@dataclass
class QueueEmulator(Emulator):
    """An ``Emulator`` for a job API: it remembers the jobs ``submit`` started and answers for
    them.

    ``job_param`` is the path parameter that names a job (``/status/{job_id}``); ``missing``
    is the rejection for an id not submitted here (a message for a 404, or a ``Reject``).
    ``rate_limits`` caps each operation's requests per ``rate_window_s``; ``throttle`` answers
    beyond it with 429, ``throttled`` (``{operation}`` and ``{limit}`` filled in) and
    ``throttle_headers`` (e.g. ``Retry-After``). ``clock`` writes the jobs' times on the wall.
    """

    job_param: str = "job_id"
    missing: str | Reject = "not found"
    rate_limits: Mapping[str, int] | None = None
    rate_window_s: float = 1.0
    throttled: str = "rate limit exceeded"
    throttle_headers: Mapping[str, str] = field(default_factory=dict)
    clock: WallClock = field(default_factory=WallClock)
    _tags: dict[str, Any] = field(default_factory=dict, init=False, repr=False)
    _ended_by: dict[str, str] = field(default_factory=dict, init=False, repr=False)

    def __post_init__(self) -> None:
        super().__post_init__()
        self._limits = RateLimit(self.rate_limits, self.rate_window_s)

    # ----- jobs ---------------------------------------------------------------------------

    def submit(self, payload: Mapping[str, Any], *, tag: Any = None, **options: Any) -> Job:
        """``Emulator.submit`` (a full queue is a ``Reject``), and the job is remembered with
        ``tag`` (what it was submitted to: an app, a kind of call) for ``find`` and ``jobs``."""
        job = super().submit(payload, **options)
        self._tags[job.id] = tag
        return job

    def find(self, request: Request, *, tag: Any = _ANY) -> Job:
        """The job the request's ``job_param`` names, if ``submit`` started it (with ``tag``,
        when given); else ``missing`` is raised."""
        job_id = request.path_params[self.job_param]
        job = self.fleet.job(job_id)
        if job is None or job_id not in self._tags or tag not in (_ANY, self._tags[job_id]):
            if isinstance(self.missing, str):
                raise Reject(404, self.missing)
            given = self.missing  # raised as a copy: one instance would pile up tracebacks
            raise Reject(given.status, given.message, given.headers, response=given.response)
        return job

    def tag(self, job: Job) -> Any:
        """The ``tag`` ``job`` was submitted with."""
        return self._tags[job.id]

    def jobs(self, *, tag: Any = _ANY) -> list[Job]:
        """The jobs ``submit`` started (with ``tag``, when given), oldest first."""
        found = [self.fleet.job(job_id) for job_id, t in self._tags.items() if tag in (_ANY, t)]
        return [job for job in found if job is not None]

    def position(self, job: Job) -> int:
        """How many queued jobs are ahead of ``job`` in the fleet's FIFO queue."""
        queued = (t for t in self.fleet.truths() if t.status is JobStatus.QUEUED)
        return sum(1 for t in queued if t.seq < job.seq)

    # ----- waiting ------------------------------------------------------------------------

    async def hold(self, request: Request, job: Job) -> bool:
        """``hold(request, job, fleet)``: keep the request open until ``job`` ends (True); a
        client that hangs up first cancels it (False)."""
        return await hold(request, job, self.fleet)

    async def wait(self, job: Job, timeout_s: float) -> bool:
        """Hold a synchronous call until ``job`` ends or ``timeout_s`` passes: whether it
        ended. The job keeps running either way (the caller answers it pending)."""
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(job.done.wait(), timeout_s)
        return job.done.is_set()

    async def first_output(self, job: Job, request: Request | None = None) -> FirstOutput:
        """Wait until a streamed call can start answering: ``"output"`` once ``job`` has
        streamed a piece or completed, ``"failed"`` when it ended otherwise with nothing
        streamed (the caller answers with an error status instead of a stream). With
        ``request``, a client that hangs up first cancels the job: ``"hung_up"``."""
        while not job.stream and not job.done.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(job.done.wait(), 0.01)
            if request is not None and not job.done.is_set() and await request.is_disconnected():
                self.fleet.cancel(job.id)
                return "hung_up"
        if job.done.is_set() and job.status is not JobStatus.COMPLETED and not job.stream:
            return "failed"
        return "output"

    def stream_job(
        self,
        job: Job,
        encode: Callable[[Any, int], bytes],
        *,
        end: Callable[[int], Iterable[bytes]] | None = None,
        cancel_on_hang_up: bool = False,
        media_type: str = "text/event-stream",
        headers: Mapping[str, str] | None = None,
    ) -> Response:
        """Answer with what ``job`` streams, as it comes: each piece as ``encode(piece, n)``
        (``n`` counts from 1), then, once the job has ended, the chunks of ``end(pieces
        sent)`` (a closing event, an error). With ``cancel_on_hang_up``, a client that leaves
        before the job ends cancels it."""

        async def chunks() -> AsyncIterator[bytes]:
            sent = 0
            try:
                async for piece in follow(job):
                    sent += 1
                    yield encode(piece, sent)
                for chunk in end(sent) if end is not None else ():
                    yield chunk
            finally:
                if cancel_on_hang_up and not job.done.is_set():
                    self.fleet.cancel(job.id)

        return self.stream(chunks(), media_type, headers)

    # ----- ending -------------------------------------------------------------------------

    def cancel_after(
        self,
        job: Job,
        after_s: float,
        reason: str | Callable[[Job], str],
        *,
        queued_only: bool = False,
    ) -> None:
        """A deadline the caller set: after ``after_s`` a job still pending (with
        ``queued_only``, one not yet started) is cancelled, and ``ended_by`` tells it
        ``reason`` (a function of the job is asked at that moment)."""

        async def expire() -> None:
            await asyncio.sleep(after_s)
            pending = job.status is JobStatus.QUEUED if queued_only else not job.status.terminal
            if pending:
                self._ended_by[job.id] = reason(job) if callable(reason) else reason
                self.fleet.cancel(job.id)

        self.spawn(expire())

    def ended_by(self, job: Job) -> str | None:
        """The ``reason`` of the ``cancel_after`` deadline that ended ``job``, else None."""
        return self._ended_by.get(job.id)

    # ----- reading ------------------------------------------------------------------------

    async def read_input(
        self,
        request: Request,
        field: str = "input",
        *,
        status: int = 400,
        message: str = "body must be a JSON object with an 'input' object",
    ) -> dict[str, Any]:
        """The request's JSON body, which must be an object whose ``field`` is an object (a
        job's input): else ``Reject(status, message)``; a body that does not parse is
        ``read_json``'s 400."""
        body = await self.read_json(request, not_object=None)
        if not isinstance(body, dict) or not isinstance(body.get(field), dict):
            raise Reject(status, message)
        return body

    def throttle(self, operation: str) -> None:
        """Count one request of ``operation``; over its ``rate_limits`` cap it is
        ``Reject(429, throttled, throttle_headers)``."""
        if self._limits.exceeded(operation):
            limit = self._limits.limits[operation]
            message = self.throttled.format(operation=operation, limit=limit)
            raise Reject(429, message, self.throttle_headers)
