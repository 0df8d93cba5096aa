"""Queue-style jobs: submit, poll with backoff, read the result, cancel what is abandoned.

A provider whose API queues work (RunPod's ``/run`` + ``/status``, Replicate's predictions,
fal's queue, Baseten's ``async_predict``) writes the four calls its protocol has, as a ``Job``,
and ``run_job`` does the rest the same way for every one of them:

- polls with one backoff (``Polling``: first delay, factor, cap), at once when the submit's
  answer carries no state;
- retries a poll that fails in passing (429, an HTTP 5xx, a reset or refused connection) up
  to ``Polling.retries`` times in a row, waiting ``Retry-After`` (seconds or an HTTP date,
  read by ``as_provider_error``) or the backoff's cap, never past the deadline;
- keeps the request's deadline (``timeout_s``): a job still running then is a
  ``RequestTimeoutError``;
- names the job (``request_id``) in every error raised once the job exists, whatever raised
  it, so a failed poll can be traced to its job;
- cancels a job it leaves unfinished (a failure, the deadline, the task's cancellation):
  shielded from the cancellation, bounded by ``Polling.cancel_grace_s``, best effort; a
  cancellation that lands while the submit is on its way first waits for the submit's answer
  (within the same grace), since the job may exist already and only that answer names it.
"""

from __future__ import annotations

import abc
import asyncio
import contextlib
import math
from collections.abc import Callable, Collection, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, Generic, TypeVar

import anyio

from .._base._errors import (
    InvalidResponseError,
    ProviderError,
    RequestTimeoutError,
    ServerHTTPError,
    ThrottledError,
    TransportError,
)
from .._base._types import Result
from .._transport._client import as_provider_error

S = TypeVar("S")


@dataclass(frozen=True, slots=True)
class Polling:
    """How ``run_job`` follows a job: the delay before each poll starts at ``interval_s`` and
    grows ``backoff`` times per poll up to ``max_interval_s``; ``retries`` passing errors in a
    row are outlived; an abandoned job's cancel may take ``cancel_grace_s``."""

    interval_s: float = 0.05
    max_interval_s: float = 1.0
    backoff: float = 1.5
    retries: int = 3
    cancel_grace_s: float = 5.0

    def delays(self) -> Iterator[float]:
        """The backoff's delays, without end (also for loops of a plugin's own, such as
        waiting for a fleet to scale to zero)."""
        delay_s = self.interval_s
        while True:
            yield delay_s
            delay_s = min(delay_s * self.backoff, self.max_interval_s)


class Job(abc.ABC, Generic[S]):
    """One remote job of a queue-style API, from its submit to its result.

    ``S`` is whatever the plugin reads as the job's state (usually the status body as a dict).
    Create one per request, holding what the calls need (the payload, URLs from the submit's
    answer), and hand it to ``run_job``. The calls may simply let an ``httpx`` error escape
    (``raise_for_status()``, a failed ``json()``): ``run_job`` maps every error with
    ``as_provider_error``.
    """

    id: str | None = None
    """The job's id: set it in ``submit`` as soon as the provider has accepted the job (or
    before sending it, where the client chooses the id): from then on every error names it
    and an unfinished job is cancelled, even one whose submit goes on (a stream to read)."""

    terminal: ClassVar[Collection[str]] = ()
    """The ``status`` values that end a job (success or failure), for the default
    ``finished``: a state that is a mapping (a status body, as ``job_state`` checks it) whose
    ``status`` is one of them is final. A job whose end reads otherwise overrides
    ``finished``."""

    @abc.abstractmethod
    async def submit(self) -> S | None:
        """Create the job and set ``id``; return its state where the answer carries one (the
        first poll then waits the first delay), else ``None`` (the first poll follows at once)."""

    @abc.abstractmethod
    async def status(self) -> S:
        """Read the job's state once (an idempotent read: a passing failure is retried)."""

    def finished(self, state: S) -> bool:
        """Whether ``state`` is final, success or failure: by default, whether its ``status``
        is one of ``terminal``."""
        return isinstance(state, Mapping) and state.get("status") in self.terminal

    @abc.abstractmethod
    async def result(self, state: S) -> Result:
        """The ``Result`` of a finished job, or raise the error its end stands for (e.g. a
        ``ServerHTTPError`` for a job that failed)."""

    async def cancel(self) -> None:
        """Ask the provider to stop the job; called at most once, only while it runs."""


@contextlib.contextmanager
def naming_errors(provider: str, request_id: Callable[[], str | None]) -> Iterator[None]:
    """Around the calls of one request whose id is learnt on the way (a job's, a function
    call's): any exception leaves as the ``ProviderError`` it stands for
    (``as_provider_error``), naming ``request_id()`` as it is then, unless it names one
    already; one that is a ``ProviderError`` is raised as it is, its causes kept."""
    try:
        yield
    except Exception as exc:
        error = as_provider_error(exc, provider=provider, request_id=request_id())
        if error is exc:
            raise
        raise error from exc


def transient(error: ProviderError) -> bool:
    """A failure worth another try of an idempotent read: throttling, an HTTP 5xx (not a job
    that ended failed, which has no HTTP status), a broken connection."""
    if isinstance(error, ThrottledError | TransportError):
        return True
    return isinstance(error, ServerHTTPError) and error.status_code is not None


async def run_job(
    job: Job[Any],
    *,
    provider: str,
    timeout_s: float | None = None,
    polling: Polling = Polling(),
) -> Result:
    """Submit ``job``, follow it to its end and return its ``Result`` (module docstring: the
    polling, retries, deadline, error naming and cancel). ``provider`` names the errors;
    ``timeout_s`` is the deadline from now (``None``: none but the caller's own)."""
    loop = asyncio.get_running_loop()
    deadline = None if timeout_s is None else loop.time() + timeout_s
    follow = _Follow(job, provider, math.inf if deadline is None else deadline, polling)
    try:
        async with asyncio.timeout_at(deadline):
            return await follow.run()
    except TimeoutError as exc:  # follow.run raises only ProviderErrors: this is the deadline
        what = f"job {job.id} not finished" if job.id else "no answer to the submit"
        raise RequestTimeoutError(
            f"{what} within timeout_s={timeout_s:g}", provider=provider, request_id=job.id
        ) from exc
    finally:
        if job.id is not None and not follow.finished:  # abandoned: stop paying for it
            with anyio.move_on_after(polling.cancel_grace_s, shield=True):
                with contextlib.suppress(Exception):  # best effort: it may have ended meanwhile
                    await job.cancel()


class _Follow:
    """One ``run_job``'s progress: whether the job has ended."""

    __slots__ = ("deadline", "finished", "job", "polling", "provider")

    def __init__(self, job: Job[Any], provider: str, deadline: float, polling: Polling) -> None:
        self.job, self.provider, self.deadline, self.polling = job, provider, deadline, polling
        self.finished = False

    async def run(self) -> Result:
        with naming_errors(self.provider, lambda: self.job.id):
            return await self._run()

    async def _submit(self) -> Any:
        """``job.submit()``, whose answer is waited for (up to ``cancel_grace_s``) even when the
        task is cancelled or the deadline passes meanwhile: the job may exist by then, and only
        that answer names it, so only with it can the job be cancelled rather than left to run
        (and bill) with nobody waiting for it."""
        submit = asyncio.ensure_future(self.job.submit())
        try:
            return await asyncio.shield(submit)
        except asyncio.CancelledError:
            if not submit.done():
                with anyio.move_on_after(self.polling.cancel_grace_s, shield=True):
                    await asyncio.wait({submit})
            if submit.done():
                if not submit.cancelled():
                    submit.exception()  # retrieved: the cancellation is what propagates
            else:
                submit.cancel()
            raise

    async def _run(self) -> Result:
        job, polling = self.job, self.polling
        state = await self._submit()
        if job.id is None:
            raise InvalidResponseError("the submit named no job", provider=self.provider)
        delays = polling.delays()
        wait_s = 0.0 if state is None else next(delays)
        failures = 0
        while state is None or not job.finished(state):
            if wait_s > 0:
                await asyncio.sleep(wait_s)
            try:
                state = await job.status()
            except Exception as exc:
                error = as_provider_error(exc, provider=self.provider, request_id=self.job.id)
                failures += 1
                if failures > polling.retries or not transient(error):
                    raise
                wait_s = getattr(error, "retry_after_s", None) or polling.max_interval_s
                if asyncio.get_running_loop().time() + wait_s >= self.deadline:
                    raise  # no time left to wait it out: this error is the answer
                continue
            failures = 0
            wait_s = next(delays)
        self.finished = True
        return await job.result(state)
