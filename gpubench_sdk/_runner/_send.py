"""The per-request hot path of the runner: one request sent, timed, classified and recorded.

``RequestSender`` holds what every request goes through: the budget (``max_requests``, the
cost guard's caps) and ``_send``, which times one ``invoke``, turns its result or error into an
``Invocation`` and hands that to the store, the telemetry and the observers. It is separate from
the orchestration (``_runner``) and the loops that call it (``_drivers``) so the code whose
cost is paid per request reads on its own. ``Runner`` sets the state declared below.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager
from typing import Any, Protocol

import anyio
import httpx
import sniffio

from .._base._monitor import Monitor
from .._base._types import ColdCheck, Invocation, Outcome, Phase, Request, Result
from .._contract._workload import Workload
from .._scenarios._base import with_fields
from .._store._store import Store
from .._transport._client import record_calls
from .._transport._client import retry_after_s as header_retry_after_s
from ..cost._meter import BudgetGuard
from ._deadlines import Deadlines
from ._results import Target, classify
from ._telemetry import Instruments

log = logging.getLogger("gpubench.runner")

Observer = Callable[[Invocation], None]


class SharedCounter(Protocol):
    """A ``multiprocessing.Value`` of an integer, as the shards share it."""

    value: int

    def get_lock(self) -> AbstractContextManager[Any]: ...


BUDGET_SPENT = "max_requests reached"


class LiveTarget:
    """Per-target state during a run: the open provider, its deadline and span attributes."""

    __slots__ = ("attrs", "deadline_s", "deadlines", "name", "provider")

    def __init__(self, target: Target) -> None:
        self.name = target.name
        self.provider = target.provider
        self.deadline_s = target.provider.options.timeout_s
        self.deadlines = Deadlines(self.deadline_s)  # on asyncio (one per run: its loop's)
        self.attrs: dict[str, Any] = {}


class RequestSender:
    """Sends one request and records it, within the run's budget (a base of ``Runner``)."""

    _workload: Workload
    _store: Store
    _run_id: int
    _origin_ns: int  # perf_counter_ns at the run's start: every stored time is relative to it
    _instruments: Instruments
    _observers: list[Observer]
    _guard: BudgetGuard | None
    _budget: int | None  # max_requests
    _sent: int  # requests this process sent
    _shared_sent: SharedCounter | None  # requests all shards sent, when several processes run
    _inflight: int
    _stop_reason: str | None
    _scenario_scope: anyio.CancelScope | None
    _native_timer: bool | None = None  # deadlines by asyncio.timeout (decided at first send)
    _tracing = False  # spans recorded: the transport notes each call's (Runner.run sets)
    _monitor: Monitor | None = None  # notes each request's send delay (Runner.run sets)

    def _take(self, lt: LiveTarget | None = None) -> bool:
        """Reserve one request of the budget; False once ``max_requests`` went out, or when
        ``lt``'s next request could pass a ``max_cost_usd`` cap (that target stops)."""
        if self._guard is not None and lt is not None:
            refused = self._guard.allow(lt.name, lt.deadline_s)
            if refused is not None:
                self._stop_reason = self._stop_reason or refused
                return False
        if self._budget is not None:
            shared = self._shared_sent
            if shared is None:
                spent = self._sent >= self._budget
            else:
                with shared.get_lock():
                    spent = shared.value >= self._budget
                    if not spent:
                        shared.value += 1
            if spent:
                self._stop_reason = self._stop_reason or BUDGET_SPENT
                if self._guard is not None and lt is not None:
                    self._guard.release(lt.name)  # the cost reservation was not used
                return False
        self._sent += 1
        return True

    def _spent(self) -> bool:
        """Whether the budget is used up, without taking from it."""
        if self._budget is None:
            return False
        sent = self._sent if self._shared_sent is None else self._shared_sent.value
        if sent >= self._budget:
            self._stop_reason = self._stop_reason or BUDGET_SPENT
            return True
        return False

    async def _send(
        self,
        lt: LiveTarget,
        sidx: int,
        seq: int,
        phase: Phase,
        scheduled_ns: int,
        expect_cold: bool | None = None,
        check: ColdCheck | None = None,
        extra: Mapping[str, Any] | None = None,
    ) -> None:
        request = self._workload.request(seq)
        if extra:  # per-request inputs of a shape (a replayed trace's prompt size, body fields)
            request = with_fields(request, extra)
        self._inflight += 1
        wall = time.time_ns()
        start = time.perf_counter_ns()
        scheduled_ns = min(scheduled_ns, start)  # a timer may fire a hair early
        result: Result | None = None
        status = error = failed_id = None
        outcome = Outcome.OK
        cancelled: BaseException | None = None
        retry_after: float | None = None
        # the transport notes when the bytes left, any resend, and (tracing) each call's span
        calls = record_calls(self._tracing)
        try:
            timed_out, result = await self._invoke_within(lt, request)
            if timed_out:
                outcome, error = Outcome.TIMEOUT, f"no answer within timeout_s={lt.deadline_s:g}"
            elif not isinstance(result, Result):
                raise TypeError(f"invoke returned {type(result).__name__}, not Result")
        except anyio.get_cancelled_exc_class() as exc:
            cancelled, result = exc, None
            outcome, error = Outcome.CANCELLED, self._stop_reason or self._cancel_reason()
        except Exception as exc:
            retry_after = retry_after_s(exc)
            result = None
            outcome, status, error = classify(exc, lt.provider.name)
            failed_id = getattr(exc, "request_id", None)  # the job a failed poll was about
        end = time.perf_counter_ns()
        # The log stays this task's context variable: calls after this invocation (a cold
        # check, the next scenario's set-up) must not add spans to it, only live ones.
        spans, calls.spans = calls.spans, None
        self._inflight -= 1
        wall_of = wall - start  # + a perf_counter_ns reading: its time.time_ns
        sent = calls.sent_ns
        if sent is not None and start < sent <= end:
            # The request's start is when its bytes were handed to the socket: the work and
            # the loop's queue before that are the client's, never the provider's latency.
            wall += sent - start
            start = sent
        if self._monitor is not None:  # the saturation flag rises on the send delay's tail
            self._monitor.note_send(start - scheduled_ns)
        units: tuple[int | None, int | None] = (None, None)
        cold = fb = None
        origin = self._origin_ns
        tokens: list[int] | None = None
        detail = request.detail  # what the workload chose; the provider's and the read's join
        if outcome is not Outcome.THROTTLED or result is not None:
            retry_after = None
        if result is not None:
            status = result.http_status
            units = (result.input_units, result.output_units)
            if result.detail:
                detail = {**(detail or {}), **result.detail}
            try:
                if units == (None, None):
                    units = self._workload.read(result.output)
                if outcome is Outcome.OK:
                    # Both kept: the provider's (e.g. the variant that served) and the
                    # workload's (e.g. a GPU probe's figures); the workload's wins a clash.
                    read = self._workload.detail(result.output)
                    if read:
                        detail = {**(detail or {}), **read}
                    # where each count came from (token workloads: server, tokenizer, words)
                    units, sources = self._workload.count(request, result, units)
                    if sources:
                        detail = {**(detail or {}), **sources}
            except Exception as exc:
                outcome, _, error = classify(exc, lt.provider.name)
            cold = result.cold
            fb = result.first_byte_ns
            if fb is not None and not start <= fb <= end:
                fb = None  # not on our clock (a plugin used time.time_ns?): drop, never guess
            times = result.token_times_ns
            # len(), not truth: a plugin may hand a numpy array. Off our clock: dropped.
            if times is not None and len(times) and start <= min(times) and max(times) <= end:
                tokens = [t - origin for t in times]
        resent = calls.retries
        if resent:  # the request went out again on a fresh connection: say so with it
            detail = {**(detail or {}), "transport_retries": resent}
        # Confirmed only on evidence: the provider reported it as a fact, or the target was
        # verified cold just before this request. A timing-based guess stays inferred.
        confirmed = cold is True and result is not None and result.cold_confirmed
        if expect_cold is not None:
            if cold is None:
                cold = expect_cold
            if cold and expect_cold and check is not None and check.confirmed:
                confirmed = True
        inv = Invocation(
            target=lt.name,
            scenario=sidx,
            seq=seq,
            phase=phase,
            scheduled_ns=scheduled_ns - origin,
            start_ns=start - origin,
            end_ns=end - origin,
            wall_start_ns=wall,
            outcome=outcome,
            first_byte_ns=None if fb is None else fb - origin,
            http_status=status,
            error=error,
            request_id=failed_id if result is None else result.request_id,
            queue_ms=None if result is None else result.queue_ms,
            execution_ms=None if result is None else result.execution_ms,
            setup_ms=None if result is None else result.setup_ms,
            cold=cold,
            cold_confirmed=confirmed,
            input_units=units[0],
            output_units=units[1],
            worker_id=None if result is None else result.worker_id,
            token_times_ns=tokens,
            detail=detail,
            retry_after_s=retry_after,
        )
        self._store.append(self._run_id, inv)
        if self._guard is not None:
            self._guard.record(inv)  # the live cost meter: a few float additions
        if spans:  # the HTTP calls' spans, under the invocation's (tracing on)
            made = [
                (c.name, c.attributes, c.more, wall_of + c.start_ns, wall_of + (c.end_ns or end),
                 c.status)
                for c in spans
            ]  # fmt: skip
            self._instruments.record(inv, lt.attrs, made)
        else:
            self._instruments.record(inv, lt.attrs)
        for observer in self._observers:
            try:
                observer(inv)
            except Exception:  # a progress bar must not cost a measurement
                log.exception("observer %r failed", observer)
        if cancelled is not None:
            raise cancelled

    async def _invoke_within(self, lt: LiveTarget, request: Request) -> tuple[bool, Any]:
        """Invoke ``lt``'s provider with its deadline: (whether the deadline passed first, what
        ``invoke`` returned).

        On asyncio, the target's ``Deadlines`` (one timer for all its requests) rather than an
        anyio cancel scope (8% of the client's time per request, profiled) or an
        ``asyncio.timeout`` each (7%). Either way a timed-out invoke is cancelled where it
        waits and reported as a timeout.
        """
        if self._native_timer is None:
            self._native_timer = sniffio.current_async_library() == "asyncio"
        if not self._native_timer:
            result = None
            with anyio.move_on_after(lt.deadline_s) as scope:
                result = await lt.provider.invoke(request)
            return scope.cancelled_caught, result
        return await lt.deadlines.run(lt.provider.invoke(request))

    def _cancel_reason(self) -> str:
        scope = self._scenario_scope
        if scope is not None and scope.cancel_called:
            return "cancelled: the scenario's deadline_s passed"
        return "cancelled"


def retry_after_s(exc: BaseException) -> float | None:
    """How long a throttled request was told to wait: ``ThrottledError.retry_after_s``, or an
    ``httpx`` 429's ``Retry-After`` header (read by the transport's parser)."""
    given = getattr(exc, "retry_after_s", None)
    if isinstance(given, int | float) and math.isfinite(given) and given >= 0:
        return float(given)
    if not isinstance(exc, httpx.HTTPStatusError):
        return None
    return header_retry_after_s(exc.response)
