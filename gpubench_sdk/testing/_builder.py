"""An emulator declared by its routes: ``Emulator`` builds the app and brings what every
emulator needs around them.

- the optional-import guard: building one without starlette fails with the install hint;
- the key check run before each route (``KeyCheck``: the provider's header and scheme, its
  401 or 403 and its words), or any check of the emulator's own;
- ``Reject``: raised anywhere below a route, it answers at once with the protocol's error body;
- the fault routes: each route names its ``FaultPlan`` route (``"submit"``, ``"poll"``...), so
  ``FaultInjector``'s classifier is the route table itself;
- the fleet's lifespan, with start and stop hooks and background tasks cancelled at the end;
- small readers (``read_json``, ``submit``, ``set_scaling``) that reject in the usual ways.

A route's handler returns a response (``emu.json``, ``emu.text``, ``emu.stream``...) or any
JSON value, sent as a 200::

    emu = Emulator(fleet, name="Acme", check=KeyCheck(api_key, schemes=("Bearer",)))

    @emu.route("/v1/predict", "POST", fault="submit")
    async def predict(request):
        job = emu.submit(await emu.read_json(request))
        await job.done.wait()
        return {"id": job.id, "output": job.result}

    app = emu.app()
"""

from __future__ import annotations

import contextlib
import hmac
import json
import time
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Iterable, Mapping
from dataclasses import dataclass, field
from types import EllipsisType
from typing import TYPE_CHECKING, Any

from .._base._types import ScalingSettings
from .._contract._provider import _SCHEMES, KeyScheme
from ._emulator import hold
from ._faults import ASGIApp, ErrorRenderer, FaultInjector, Scope, json_error
from ._fleet import SimulatedFleet
from ._harness import require
from ._jobs import Job, JobStatus, QueueFull

if TYPE_CHECKING:
    import asyncio

    from starlette.requests import Request
    from starlette.responses import Response

FaultRoute = str | Callable[[Scope], "str | None"] | None
Handler = Callable[["Request"], Awaitable[Any]]
Check = Callable[["Request"], None]
_ABSENT: Any = object()


class Reject(Exception):
    """Raised by a handler, or anything it calls: the request is answered at once with the
    route's error body for ``status`` and ``message`` (plus ``headers``), or with
    ``response`` when one is given (a body of another shape)."""

    def __init__(
        self,
        status: int,
        message: str = "",
        headers: Mapping[str, str] | None = None,
        *,
        response: Any = None,
    ) -> None:
        super().__init__(f"{status} {message}")
        self.status, self.message = status, message
        self.headers = dict(headers or {})
        self.response = response


def plain_text(status: int, message: str) -> tuple[bytes, str]:
    """An error body that is the message as plain text (proxies' and front ends' errors)."""
    return message.encode(), "text/plain; charset=utf-8"


def sse_event(
    data: Any,
    *,
    event: str | None = None,
    event_id: int | str | None = None,
    compact: bool = False,
) -> bytes:
    """One server-sent event: its ``event:`` and ``id:`` lines when given, then ``data:`` and
    a blank line. ``data`` that is not a str is written as JSON; ``compact``: no spaces at all
    (``data:{"a":1}``), as text-generation-inference writes its events (axum's
    ``Event::json_data``)."""
    if not isinstance(data, str):
        data = json.dumps(data, separators=(",", ":")) if compact else json.dumps(data)
    lines = [] if event is None else [f"event: {event}"]
    if event_id is not None:
        lines.append(f"id: {event_id}")
    lines.append(f"data:{data}" if compact else f"data: {data}")
    return ("\n".join(lines) + "\n\n").encode()


@dataclass(frozen=True, slots=True)
class KeyCheck:
    """The provider's API key check, run before a route (a check is called with the request).

    ``header`` carries the key after one of ``schemes`` (``Authorization: Bearer <key>``);
    with ``bare`` the key alone is accepted too, with no ``schemes`` the header is the key.
    A tuple of headers carries ``<first>:<second>`` (Modal's ``Modal-Key``/``Modal-Secret``).
    Refused: ``status`` with ``message``, or ``missing`` when no credential came at all.
    With ``key=None`` every request passes.
    """

    key: str | None
    header: str | tuple[str, ...] = "authorization"
    schemes: tuple[str, ...] = ("Bearer",)
    bare: bool = False
    status: int = 401
    message: str = "Unauthorized"
    missing: str | None = None

    @classmethod
    def sent_as(cls, scheme: KeyScheme, key: str | None, **fields: Any) -> KeyCheck:
        """The check of ``key`` as a provider whose ``key_scheme`` is ``scheme`` sends it
        (``key_headers``): ``Authorization: Bearer|Api-Key|Key <key>``, Modal's
        ``Modal-Key``/``Modal-Secret`` pair, or nothing to check (``none``); ``fields`` as
        the class takes them (``message``, ``missing``)."""
        if scheme == "modal":
            return cls(key, ("modal-key", "modal-secret"), **fields)
        if scheme == "none":
            return cls(None, **fields)
        return cls(key, schemes=(_SCHEMES[scheme],), **fields)

    def given(self, headers: Mapping[str, str]) -> str | None:
        """The credential ``headers`` carry ("" for one in the wrong scheme), None if none."""
        if isinstance(self.header, tuple):
            parts = [headers.get(name, "") for name in self.header]
            return ":".join(parts) if all(parts) else None
        value = headers.get(self.header, "").strip()
        if not value:
            return None
        scheme, _, rest = value.partition(" ")
        if scheme in self.schemes:
            return rest.strip()
        return value if self.bare or not self.schemes else ""

    def accepts(self, headers: Mapping[str, str]) -> bool:
        if self.key is None:
            return True
        given = self.given(headers)
        return bool(given) and hmac.compare_digest(str(given).encode(), self.key.encode())

    def __call__(self, request: Request) -> None:
        if not self.accepts(request.headers):
            absent = self.missing is not None and self.given(request.headers) is None
            raise Reject(self.status, self.missing if absent and self.missing else self.message)


class RateLimit:
    """Sliding-window caps: ``limits`` maps an operation to its most requests per
    ``window_s``; an operation without a limit is never over it."""

    def __init__(self, limits: Mapping[str, int] | None, window_s: float = 1.0) -> None:
        self.limits = dict(limits or {})
        self.window_s = window_s
        self._seen: dict[str, deque[float]] = {}

    def exceeded(self, operation: str) -> bool:
        """Count one request of ``operation``: True (and not counted) when over its limit."""
        limit = self.limits.get(operation)
        if limit is None:
            return False
        now = time.monotonic()
        window = self._seen.setdefault(operation, deque())
        while window and window[0] <= now - self.window_s:
            window.popleft()
        if len(window) >= limit:
            return True
        window.append(now)
        return False


def scaling_patch(body: Mapping[str, Any], fields: Mapping[str, str]) -> ScalingSettings:
    """The ``ScalingSettings`` a control-plane PATCH asks for: ``fields`` maps the provider's
    field (``workersMin``) to a setting (``min_workers``); each given must be an integer >= 0,
    else ``Reject(400)``. Fields not sent stay ``None`` (unchanged)."""
    changes: dict[str, int] = {}
    for name, setting in fields.items():
        if name in body:
            value = body[name]
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                raise Reject(400, f"{name} must be a non-negative integer")
            changes[setting] = value
    return ScalingSettings(**changes)


@dataclass(slots=True)
class _Route:
    path: str
    methods: tuple[str, ...]
    handler: Handler
    fault: FaultRoute | EllipsisType
    check: bool
    errors: ErrorRenderer | None


@dataclass
class Emulator:
    """One emulator app over ``fleet``: declare routes with ``route``, then build ``app()``.

    ``name`` is the provider's (for the install hint); ``check`` runs before every route
    declared with ``check=True`` (a ``KeyCheck``, or a function raising ``Reject``);
    ``error_body`` renders rejections and, unless ``fault_body`` is given, injected faults;
    ``fault`` is the fault route of routes that name none and of requests no route takes;
    with ``not_found`` set, a path no route serves (404, with this message) or a method it does
    not (405) is answered with ``error_body`` too, not Starlette's plain text.
    """

    fleet: SimulatedFleet
    name: str
    check: Check | None = None
    error_body: ErrorRenderer = json_error
    fault_body: ErrorRenderer | None = None
    fault: FaultRoute = "control"
    not_found: str | None = None
    on_start: list[Callable[[], None]] = field(default_factory=list)
    on_stop: list[Callable[[], None]] = field(default_factory=list)
    _routes: list[_Route] = field(default_factory=list)
    _tasks: set[asyncio.Task[Any]] = field(default_factory=set)
    _timers: set[asyncio.TimerHandle] = field(default_factory=set)

    def __post_init__(self) -> None:
        self._responses = require("starlette.responses", f"the {self.name} emulator")

    # ----- declaring ----------------------------------------------------------------------

    def route(
        self,
        path: str,
        *methods: str,
        fault: FaultRoute | EllipsisType = ...,
        check: bool = True,
        errors: ErrorRenderer | None = None,
    ) -> Callable[[Handler], Handler]:
        """Serve the decorated handler at ``path`` (Starlette's syntax, ``{id}``) for
        ``methods`` (GET by default). ``fault``: its ``FaultPlan`` route, ``None`` for never
        faulted, or a function of the ASGI scope; ``check=False`` skips the emulator's
        check; ``errors`` renders this route's rejections (e.g. ``plain_text``)."""

        def declare(handler: Handler) -> Handler:
            verbs = methods or ("GET",)
            self._routes.append(_Route(path, verbs, handler, fault, check, errors))
            return handler

        return declare

    def static(
        self, path: str, body: Any, *, fault: FaultRoute | EllipsisType = ..., check: bool = True
    ) -> None:
        """Serve ``body`` (a JSON value) at ``GET path``, the same every time: a server's
        metadata or a health route that reads no state (``fault`` and ``check`` as for
        ``route``)."""

        async def answer(request: Request) -> Any:
            return body

        self.route(path, fault=fault, check=check)(answer)

    def spawn(self, coro: Coroutine[Any, Any, Any]) -> asyncio.Task[Any]:
        """Run ``coro`` in the background (a deadline, a drain); cancelled when the app stops."""
        import asyncio

        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    def later(
        self, delay_s: float, callback: Callable[..., object], *args: Any
    ) -> asyncio.TimerHandle:
        """Call ``callback(*args)`` in ``delay_s`` (a scale-out policy acting, an unclaimed
        result given up); cancelled when the app stops first. Cancel the handle to call it off."""
        import asyncio

        def fire() -> None:
            self._timers.discard(handle)
            callback(*args)

        handle = asyncio.get_running_loop().call_later(delay_s, fire)
        self._timers.add(handle)
        return handle

    def app(self, **state: Any) -> ASGIApp:
        """The ASGI app: the routes behind ``FaultInjector``, the fleet run by its lifespan;
        ``state`` is set on the Starlette app's ``state``."""
        routing = require("starlette.routing", f"the {self.name} emulator")
        starlette = require("starlette.applications", f"the {self.name} emulator")
        table = [
            routing.Route(r.path, self._endpoint(r), methods=list(r.methods)) for r in self._routes
        ]
        handlers = {}
        if self.not_found is not None:
            exceptions = require("starlette.exceptions", f"the {self.name} emulator")
            handlers[exceptions.HTTPException] = self._not_routed
        inner = starlette.Starlette(
            routes=table, lifespan=self._lifespan, exception_handlers=handlers
        )
        for name, value in state.items():
            setattr(inner.state, name, value)
        faults = [self.fault if r.fault is ... else r.fault for r in self._routes]
        return FaultInjector(
            inner, self.fleet, _classifier(table, faults, self.fault, routing.Match),
            self.fault_body or self.error_body,
        )  # fmt: skip

    def _endpoint(self, route: _Route) -> Callable[[Request], Awaitable[Response]]:
        errors = route.errors or self.error_body

        async def endpoint(request: Request) -> Response:
            try:
                if route.check and self.check is not None:
                    self.check(request)
                answer = await route.handler(request)
            except Reject as rejected:
                if rejected.response is not None:
                    given: Response = rejected.response
                    return given
                body, ctype = errors(rejected.status, rejected.message)
                return self.reply(body, rejected.status, media_type=ctype,
                                  headers=rejected.headers)  # fmt: skip
            if isinstance(answer, self._responses.Response):
                response: Response = answer
                return response
            return self.json(answer)

        return endpoint

    async def _not_routed(self, request: Request, exc: Exception) -> Response:
        status = getattr(exc, "status_code", 500)
        detail = self.not_found if status == 404 else str(getattr(exc, "detail", ""))
        return self.error(status, detail or "")

    @contextlib.asynccontextmanager
    async def _lifespan(self, app: Any) -> AsyncIterator[None]:
        async with self.fleet:
            for hook in self.on_start:
                hook()
            try:
                yield
            finally:
                for task in list(self._tasks):
                    task.cancel()
                for timer in list(self._timers):
                    timer.cancel()
                for hook in self.on_stop:
                    hook()

    # ----- answers ------------------------------------------------------------------------

    def json(
        self, body: Any, status: int = 200, headers: Mapping[str, str] | None = None
    ) -> Response:
        return self._answer("JSONResponse", body, status, headers=headers)

    def text(
        self, text: str, status: int = 200, headers: Mapping[str, str] | None = None
    ) -> Response:
        return self._answer("PlainTextResponse", text, status, headers=headers)

    def reply(
        self,
        content: bytes | str | None = None,
        status: int = 200,
        *,
        media_type: str | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> Response:
        """Any other answer: a body of ``media_type`` (none: no body, no content type)."""
        return self._answer("Response", content, status, headers=headers, media_type=media_type)

    def stream(
        self,
        chunks: AsyncIterator[bytes] | AsyncIterator[str],
        media_type: str = "text/event-stream",
        headers: Mapping[str, str] | None = None,
        *,
        on_close: Callable[[], object] | None = None,
    ) -> Response:
        """A streamed answer: its headers go out at once, then each chunk as it comes.
        ``on_close`` runs once the stream ends, however it ends: the last chunk sent, the
        client gone, the generator failed (``lambda: fleet.cancel(job.id)`` stops the job a
        client left, as a server stops generating)."""
        if on_close is not None:
            chunks = _closing(chunks, on_close)
        return self._answer("StreamingResponse", chunks, media_type=media_type, headers=headers)

    def sse(
        self,
        events: AsyncIterator[Any],
        *,
        compact: bool = False,
        end: str | None = None,
        headers: Mapping[str, str] | None = None,
        on_close: Callable[[], object] | None = None,
    ) -> Response:
        """``events`` (JSON values) streamed as server-sent events (``sse_event``), then
        ``data: <end>`` when given (OpenAI's ``[DONE]``); ``on_close`` as for ``stream``."""

        async def framed() -> AsyncIterator[bytes]:
            try:
                async for event in events:
                    yield sse_event(event, compact=compact)
                if end is not None:
                    yield sse_event(end)
            finally:
                await _aclose(events)

        return self.stream(framed(), headers=headers, on_close=on_close)

    def _answer(self, kind: str, *args: Any, **kwargs: Any) -> Response:
        response: Response = getattr(self._responses, kind)(*args, **kwargs)
        return response

    def error(
        self, status: int, message: str, headers: Mapping[str, str] | None = None
    ) -> Response:
        """The emulator's error body for ``status`` and ``message``, as an answer."""
        body, ctype = self.error_body(status, message)
        return self.reply(body, status, media_type=ctype, headers=headers)

    # ----- reading ------------------------------------------------------------------------

    async def read_json(
        self,
        request: Request,
        *,
        status: int = 400,
        invalid: str = "body is not valid JSON",
        not_object: str | None = "body must be a JSON object",
        empty: Any = _ABSENT,
    ) -> Any:
        """The request's JSON body; ``Reject(status)`` with ``invalid`` when it does not parse,
        with ``not_object`` when it is not an object (``None``: any JSON value). An empty body
        is ``empty`` when given."""
        import json

        raw = await request.body()
        if not raw and empty is not _ABSENT:
            return empty
        try:
            body = json.loads(raw)
        except ValueError:
            raise Reject(status, invalid) from None
        if not_object is not None and not isinstance(body, dict):
            raise Reject(status, not_object)
        return body

    def submit(
        self,
        payload: Mapping[str, Any],
        *,
        full: str = "queue is full: {exc}",
        status: int = 429,
        headers: Mapping[str, str] | None = None,
        **options: Any,
    ) -> Job:
        """``fleet.submit``; a full queue is ``Reject(status, full)`` (``{exc}`` is the fleet's
        reason). ``options``: ``job_id``, ``execution_timeout_s``."""
        try:
            return self.fleet.submit(payload, **options)
        except QueueFull as exc:
            raise Reject(status, full.format(exc=exc), headers) from None

    def job(self, job_id: str, missing: str = "not found") -> Job:
        """``fleet.job(job_id)``; an unknown id is ``Reject(404, missing)``."""
        job = self.fleet.job(job_id)
        if job is None:
            raise Reject(404, missing)
        return job

    async def finished(
        self,
        request: Request,
        job: Job,
        failed: str | Callable[[Job], Reject],
        *,
        headers: Mapping[str, str] | None = None,
    ) -> Job:
        """Hold ``request`` until ``job`` ends and return it, completed. A job that did not
        complete is ``Reject(500, failed)`` (``{error}`` is the job's error, ``headers`` go
        with it), or ``failed(job)`` when that is a function. A client that hangs up first is
        answered 499 and its job cancelled (``hold``), as a front end ends what its client
        left."""
        if not await hold(request, job, self.fleet):
            raise Reject(499, response=self.reply(status=499))
        if job.status is JobStatus.COMPLETED:
            return job
        if callable(failed):
            raise failed(job)
        raise Reject(500, failed.format(error=job.error), headers)

    async def call(self, request: Request, *, full: str = "too many requests") -> Response:
        """A direct call as a container platform's front end serves one: the JSON body (any
        other JSON value as ``{"input": value}``) runs as a job while the request is held;
        the answer is its result with ``x-request-id``, or 500 ``container error: ...``, or
        499 when the client hung up first (the job is then cancelled)."""
        payload = await self.read_json(request, not_object=None)
        job = self.submit(payload if isinstance(payload, dict) else {"input": payload}, full=full)
        headers = {"x-request-id": job.id}
        await self.finished(request, job, "container error: {error}", headers=headers)
        return self.json(job.result, headers=headers)

    def calls(
        self,
        path: str = "/{path:path}",
        *,
        check: Check | None = None,
        full: str = "too many requests",
        fault: FaultRoute = "submit",
    ) -> None:
        """Serve ``call`` at ``path`` as a container platform's front end does: ``POST`` only
        (any other method is a 405 ``method not allowed``), ``check`` run instead of the
        emulator's (the front end's own auth), every error in plain text (``plain_text``)."""

        async def front_end(request: Request) -> Response:
            if request.method != "POST":
                raise Reject(405, "method not allowed")
            if check is not None:
                check(request)
            return await self.call(request, full=full)

        self.route(path, "GET", "POST", fault=fault, check=False, errors=plain_text)(front_end)

    def set_scaling(self, settings: ScalingSettings) -> None:
        """``fleet.set_scaling``; settings it refuses (min above max) are ``Reject(400)``."""
        try:
            self.fleet.set_scaling(settings)
        except ValueError as exc:
            raise Reject(400, str(exc)) from None


async def _closing(
    chunks: AsyncIterator[bytes] | AsyncIterator[str], on_close: Callable[[], object]
) -> AsyncIterator[Any]:
    try:
        async for chunk in chunks:
            yield chunk
    finally:
        try:
            await _aclose(chunks)  # the inner generator's own clean-up runs first
        finally:
            on_close()


async def _aclose(iterator: AsyncIterator[Any]) -> None:
    """Close ``iterator`` now if it is a generator (leaving an ``async for`` does not)."""
    close = getattr(iterator, "aclose", None)
    if close is not None:
        await close()


def _classifier(
    table: Iterable[Any], faults: list[FaultRoute], unrouted: FaultRoute, match: Any
) -> Callable[[Scope], str | None]:
    """A request's fault route: that of the route taking it (its path and method), else of
    one with its path (another method), else ``unrouted``."""
    routes = list(zip(table, faults, strict=True))

    def resolve(fault: FaultRoute, scope: Scope) -> str | None:
        return fault(scope) if callable(fault) else fault

    def route_of(scope: Scope) -> str | None:
        partial: FaultRoute | EllipsisType = ...
        for route, fault in routes:
            found, _ = route.matches(scope)
            if found is match.FULL:
                return resolve(fault, scope)
            if found is match.PARTIAL and partial is ...:
                partial = fault
        return resolve(unrouted if partial is ... else partial, scope)

    return route_of
