"""Fault injection: a declarative plan of misbehaviour, applied at the protocol layer.

A ``FaultPlan`` says which requests fail and how (by sequence number, for the next N, or with a
seeded probability). Requests are counted per *route*, a name the emulator gives each request:
``"submit"`` (creates a job), ``"poll"`` (reads a job), ``"control"`` (control plane), and
``"job"`` for faults the fleet itself applies (a handler that raises). ``FaultInjector`` is the
ASGI middleware that applies HTTP faults in front of an emulator.
"""

from __future__ import annotations

import asyncio
import email.utils
import enum
import random
import threading
import time
from collections.abc import Awaitable, Callable, MutableMapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from ._jobs import FleetCounts

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

ROUTES = ("submit", "poll", "control", "job")


class FaultKind(enum.StrEnum):
    THROTTLE = "throttle"  # 429, with Retry-After when retry_after_s is set
    SERVER_ERROR = "server_error"  # a 5xx status
    UNAVAILABLE_WHILE_COLD = "unavailable_while_cold"  # 503 only while no worker is up
    SLOW = "slow"  # the right answer, delay_s late
    TRUNCATED = "truncated"  # headers and half the body, then the connection drops
    RESET = "reset"  # the connection drops before any response byte
    MALFORMED = "malformed"  # 200 with a body that is not valid JSON
    JOB_FAILED = "job_failed"  # the handler raises: the job ends failed (applied by the fleet)


@dataclass(frozen=True, slots=True)
class Fault:
    """One misbehaviour. Build with the class methods, e.g. ``Fault.throttle(retry_after_s=2)``.

    ``body`` replaces the error body an emulator would send (for instance to check that a
    provider echoing the API key back is redacted).
    """

    kind: FaultKind
    status: int = 0
    retry_after_s: float | None = None
    delay_s: float = 0.0
    body: str | None = None
    retry_after_date: bool = False

    @classmethod
    def throttle(
        cls, retry_after_s: float | None = None, body: str | None = None, *, as_date: bool = False
    ) -> Fault:
        """429; ``Retry-After`` in seconds, or with ``as_date`` as the HTTP date that many
        seconds ahead (RFC 9110 section 10.2.3 allows both; whole seconds, rounded down)."""
        kind = FaultKind.THROTTLE
        return cls(kind, 429, retry_after_s=retry_after_s, body=body, retry_after_date=as_date)

    @classmethod
    def server_error(cls, status: int = 500, body: str | None = None) -> Fault:
        if not 500 <= status <= 599:
            raise ValueError(f"Fault.server_error status: got {status}; expected 500..599")
        return cls(FaultKind.SERVER_ERROR, status, body=body)

    @classmethod
    def unavailable_while_cold(cls) -> Fault:
        return cls(FaultKind.UNAVAILABLE_WHILE_COLD, 503)

    @classmethod
    def slow(cls, delay_s: float) -> Fault:
        return cls(FaultKind.SLOW, delay_s=delay_s)

    @classmethod
    def truncated(cls) -> Fault:
        return cls(FaultKind.TRUNCATED)

    @classmethod
    def reset(cls) -> Fault:
        return cls(FaultKind.RESET)

    @classmethod
    def malformed(cls) -> Fault:
        return cls(FaultKind.MALFORMED, 200)

    @classmethod
    def job_failed(cls, message: str = "simulated handler error") -> Fault:
        return cls(FaultKind.JOB_FAILED, body=message)

    @property
    def default_route(self) -> str:
        return "job" if self.kind is FaultKind.JOB_FAILED else "submit"


@dataclass(slots=True)
class _Rule:
    fault: Fault
    route: str
    seqs: frozenset[int] | None = None
    remaining: int | None = None
    probability: float | None = None
    rng: random.Random | None = None

    def matches(self, seq: int) -> bool:
        if self.seqs is not None:
            return seq in self.seqs
        if self.remaining is not None:
            if self.remaining <= 0:
                return False
            self.remaining -= 1
            return True
        assert self.probability is not None and self.rng is not None
        return self.rng.random() < self.probability


@dataclass(frozen=True, slots=True)
class Injected:
    """A fault that was applied: to the ``seq``-th request (0-based) of ``route``."""

    route: str
    seq: int
    fault: Fault


@dataclass
class FaultPlan:
    """Which requests misbehave. Thread-safe: tests edit it while the emulator serves.

    Rules are tried in the order they were added; the first that matches a request applies.
    """

    _rules: list[_Rule] = field(default_factory=list)
    _counts: dict[str, int] = field(default_factory=dict)
    _injected: list[Injected] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def _add(self, rule: _Rule) -> FaultPlan:
        if rule.route not in ROUTES:
            raise ValueError(f"fault route: got {rule.route!r}; expected one of {ROUTES}")
        if (rule.route == "job") != (rule.fault.kind is FaultKind.JOB_FAILED):
            raise ValueError("job_failed faults apply on route 'job' only, and only they do")
        with self._lock:
            self._rules.append(rule)
        return self

    def at(self, *seqs: int, fault: Fault, on: str | None = None) -> FaultPlan:
        """Apply ``fault`` to the requests of route ``on`` with these 0-based numbers."""
        return self._add(_Rule(fault, on or fault.default_route, seqs=frozenset(seqs)))

    def next(self, n: int, fault: Fault, on: str | None = None) -> FaultPlan:
        """Apply ``fault`` to the next ``n`` requests of route ``on``."""
        return self._add(_Rule(fault, on or fault.default_route, remaining=n))

    def with_probability(
        self, p: float, fault: Fault, *, seed: int = 0, on: str | None = None
    ) -> FaultPlan:
        """Apply ``fault`` to each request of route ``on`` with probability ``p`` (seeded)."""
        if not 0.0 <= p <= 1.0:
            raise ValueError(f"fault probability: got {p}; expected 0..1")
        rule = _Rule(fault, on or fault.default_route, probability=p, rng=random.Random(seed))
        return self._add(rule)

    def clear(self) -> None:
        """Drop every rule (counts and the record of injected faults stay)."""
        with self._lock:
            self._rules.clear()

    def draw(self, route: str) -> Fault | None:
        """Count one request of ``route`` and return the fault it gets, if any."""
        with self._lock:
            seq = self._counts.get(route, 0)
            self._counts[route] = seq + 1
            for rule in self._rules:
                if rule.route == route and rule.matches(seq):
                    self._injected.append(Injected(route, seq, rule.fault))
                    return rule.fault
        return None

    def count(self, route: str) -> int:
        """How many requests of ``route`` were seen."""
        with self._lock:
            return self._counts.get(route, 0)

    @property
    def injected(self) -> list[Injected]:
        with self._lock:
            return list(self._injected)


class FaultedFleet(Protocol):
    """What ``FaultInjector`` needs of a fleet (a ``SimulatedFleet`` has it): its plan, its
    counts (to tell a cold fleet) and a way to wake a worker, as a proxy's 503 does."""

    @property
    def faults(self) -> FaultPlan: ...

    def counts(self) -> FleetCounts: ...

    def request_worker(self) -> None: ...


ErrorRenderer = Callable[[int, str], tuple[bytes, str]]
RouteOf = Callable[[Scope], "str | None"]


def json_error(status: int, message: str) -> tuple[bytes, str]:
    """The default error body: ``{"error": message}``."""
    import json

    return json.dumps({"error": message}).encode(), "application/json"


class FaultInjector:
    """ASGI middleware applying ``fleet.faults`` to HTTP requests before ``app`` sees them.

    ``route`` names each request (``"submit"``, ``"poll"``, ``"control"`` or ``None`` for
    requests never faulted); ``render_error`` builds the protocol's error body for a status.
    Serve it outermost (directly under uvicorn): resets need uvicorn's own ``send``.
    """

    def __init__(
        self,
        app: ASGIApp,
        fleet: FaultedFleet,
        route: RouteOf,
        render_error: ErrorRenderer = json_error,
    ) -> None:
        self.app = app
        self.fleet = fleet
        self.route = route
        self.render_error = render_error

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        route = self.route(scope) if scope["type"] == "http" else None
        fault = self.fleet.faults.draw(route) if route is not None else None
        if fault is None:
            await self.app(scope, receive, send)
            return
        kind = fault.kind
        if kind is FaultKind.SLOW:
            await asyncio.sleep(fault.delay_s)
            await self.app(scope, receive, send)
        elif kind is FaultKind.UNAVAILABLE_WHILE_COLD:
            if not self.fleet.counts().is_cold:
                await self.app(scope, receive, send)
                return
            self.fleet.request_worker()  # like a real proxy: the 503 still wakes a worker up
            await self._error(send, 503, fault, "no worker ready; one is starting")
        elif kind is FaultKind.THROTTLE:
            headers = []
            if fault.retry_after_s is not None:
                headers.append((b"retry-after", _retry_after(fault).encode()))
            await self._error(send, 429, fault, "too many requests", headers)
        elif kind is FaultKind.SERVER_ERROR:
            await self._error(send, fault.status, fault, "internal server error")
        elif kind is FaultKind.MALFORMED:
            await self._raw(send, 200, b'{"id": "job-trunc', b"application/json")
        elif kind is FaultKind.RESET:
            await _drop(send)
        elif kind is FaultKind.TRUNCATED:
            await self.app(scope, receive, _Truncating(send))

    async def _error(
        self,
        send: Send,
        status: int,
        fault: Fault,
        message: str,
        headers: list[tuple[bytes, bytes]] | None = None,
    ) -> None:
        if fault.body is not None:
            body, ctype = fault.body.encode(), "application/json"
        else:
            body, ctype = self.render_error(status, message)
        await self._raw(send, status, body, ctype.encode(), headers)

    @staticmethod
    async def _raw(
        send: Send,
        status: int,
        body: bytes,
        ctype: bytes,
        headers: list[tuple[bytes, bytes]] | None = None,
    ) -> None:
        head = [(b"content-type", ctype), (b"content-length", str(len(body)).encode())]
        await send(
            {"type": "http.response.start", "status": status, "headers": head + (headers or [])}
        )
        await send({"type": "http.response.body", "body": body})


def _retry_after(fault: Fault) -> str:
    assert fault.retry_after_s is not None
    if fault.retry_after_date:
        return email.utils.formatdate(time.time() + fault.retry_after_s, usegmt=True)
    return f"{fault.retry_after_s:g}"


async def _drop(send: Send) -> None:
    """Close the client's connection abruptly (uvicorn's transport, reached through ``send``)."""
    transport = getattr(getattr(send, "__self__", None), "transport", None)
    if transport is None:
        raise RuntimeError("FaultInjector must be served directly by uvicorn to drop connections")
    transport.abort()
    for _ in range(3):  # let the server notice the disconnect before the app returns
        await asyncio.sleep(0)


class _Truncating:
    """Passes the response through, but only half of its first body chunk, then drops."""

    def __init__(self, send: Send) -> None:
        self._send = send
        self._done = False

    async def __call__(self, message: Message) -> None:
        if self._done:
            return
        if message["type"] == "http.response.body":
            body = bytes(message.get("body", b""))
            await self._send(
                {"type": "http.response.body", "body": body[: len(body) // 2], "more_body": True}
            )
            self._done = True
            await _drop(self._send)
            return
        await self._send(message)
