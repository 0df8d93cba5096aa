"""What every emulator repeats around its routes: waiting on a job while the client may hang up
(``hold``, ``watch``), following what a job streams (``follow``), polling for what the fleet
signals no event for (``until``), and the command line (where to listen, which key to require,
the simulated fleet's cold start, worker cap and idle timeout under the provider's own names).

An emulator's ``main`` adds its own options and builds its app::

    parser = EmulatorParser(__doc__, port=8787, idle_flag="--keep-alive-s")
    parser.add_argument("--model", default="m")
    parser.serve(make_app, argv)  # make_app(fleet, api_key=..., model=...)
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
from collections.abc import AsyncIterator, Callable
from typing import Any, Literal, Protocol

from ._faults import ASGIApp, Receive
from ._fleet import FleetConfig, SimulatedFleet
from ._harness import serve_forever
from ._jobs import Job, JobStatus
from ._timing import Duration

Watched = Literal["done", "hung_up", "timed_out"]


class _Request(Protocol):  # a Starlette Request, or anything else holding the ASGI receive
    @property
    def receive(self) -> Receive: ...


def fleet_lifespan(
    fleet: SimulatedFleet,
) -> Callable[[Any], contextlib.AbstractAsyncContextManager[None]]:
    """The app's ``lifespan`` (Starlette's ``lifespan=``): ``fleet`` runs while the app is
    served, so ``serve`` and ``serve_forever`` start and stop it with the server."""

    @contextlib.asynccontextmanager
    async def lifespan(app: Any) -> AsyncIterator[None]:
        async with fleet:
            yield

    return lifespan


async def hold(request: _Request, job: Job, fleet: SimulatedFleet) -> bool:
    """Keep ``request`` open until ``job`` ends: True. False when the client hangs up first;
    the job is then cancelled, as a platform's front end ends the request its client left.

    Call it once the request's body is read: it watches the ASGI ``receive`` channel, so a
    hang-up is seen the moment it happens, without polling.
    """
    if await watch(request, job) == "done":
        return True
    fleet.cancel(job.id)
    return False


async def watch(
    request: _Request, job: Job, *, timeout_s: float | None = None, started: bool = False
) -> Watched:
    """Wait until ``job`` ends (with ``started``: until it leaves the queue), the client hangs
    up, or ``timeout_s`` passes: ``"done"``, ``"hung_up"`` or ``"timed_out"``, in that order of
    precedence. Nothing is cancelled: ``hold`` is this plus the cancel."""

    def ready() -> bool:
        return job.done.is_set() or (started and job.status is not JobStatus.QUEUED)

    finished = asyncio.ensure_future(until(ready) if started else job.done.wait())
    hung_up = asyncio.ensure_future(_disconnected(request.receive))
    try:
        await asyncio.wait({finished, hung_up}, timeout=timeout_s,
                           return_when=asyncio.FIRST_COMPLETED)  # fmt: skip
    finally:
        for waiter in (finished, hung_up):
            waiter.cancel()
    if ready():
        return "done"
    return "hung_up" if hung_up.done() and not hung_up.cancelled() else "timed_out"


async def until(condition: Callable[[], bool], interval_s: float = 0.002) -> None:
    """Return once ``condition()`` holds, checking every ``interval_s``: for what the fleet
    signals no event for (a job's start, its last worker's stop)."""
    while not condition():  # noqa: ASYNC110
        await asyncio.sleep(interval_s)


async def follow(job: Job, interval_s: float = 0.01) -> AsyncIterator[Any]:
    """Each piece ``job`` streams, as it comes, until the job ends (however it ends: read
    ``job.status`` after the loop). Pieces streamed before the end are all yielded."""
    sent = 0
    while True:
        finished = job.done.is_set()  # read first: every piece before the end is there by now
        while sent < len(job.stream):
            sent += 1
            yield job.stream[sent - 1]
        if finished:
            return
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(job.done.wait(), interval_s)


async def _disconnected(receive: Receive) -> None:
    while (await receive())["type"] != "http.disconnect":
        pass


class EmulatorArgs(argparse.Namespace):
    """What ``EmulatorParser.parse`` read: the shared options under fixed names (whatever the
    flags are called), plus the emulator's own."""

    host: str
    port: int
    api_key: str | None  # the value of the variable --api-key-env named, not its name
    cold_start_s: float
    min_workers: int
    max_workers: int
    idle_timeout_s: float

    def fleet(self, **config: Any) -> SimulatedFleet:
        """A fleet with the cold start, worker floor and cap and idle timeout given; ``config``
        sets (or overrides) any other ``FleetConfig`` field."""
        sizes: dict[str, Any] = {"cold_start": Duration.fixed(self.cold_start_s),
                                 "min_workers": self.min_workers, "max_workers": self.max_workers,
                                 "idle_timeout_s": self.idle_timeout_s}  # fmt: skip
        return SimulatedFleet(FleetConfig(**{**sizes, **config}))

    def own(self, *, exclude: tuple[str, ...] = ()) -> dict[str, Any]:
        """The emulator's own options (all but the shared ones, and ``exclude``) by name: the
        keywords of its ``make_app`` when each option's ``dest`` is the parameter's name."""
        skip = {*EmulatorArgs.__annotations__, *exclude}  # the shared options are declared
        return {name: value for name, value in vars(self).items() if name not in skip}

    def serve(self, app: ASGIApp, *, path: str = "", tls: tuple[str, str] | None = None) -> None:
        """``serve_forever(app)`` on the ``--host`` and ``--port`` given."""
        serve_forever(app, host=self.host, port=self.port, path=path, tls=tls)


class EmulatorParser(argparse.ArgumentParser):
    """``--host``, ``--port``, ``--api-key-env`` and the fleet's sizes.

    The flags keep the provider's vocabulary (fal's ``--keep-alive-s``, Baseten's
    ``--max-replicas``); what they set is always ``cold_start_s``, ``max_workers`` and
    ``idle_timeout_s``, and with ``min_flag`` ``min_workers`` (else 0). ``idle_flag=None``
    leaves the idle timeout to the emulator (1 s unless it passes one to ``fleet``).
    ``--api-key-env`` names an environment variable, so the key never shows in a process
    list; one that is not set is refused with its name. ``key_help=None`` leaves it out.
    """

    def __init__(
        self,
        doc: str | None,
        *,
        port: int,
        cold_flag: str = "--cold-start-s",
        workers_flag: str = "--max-workers",
        idle_flag: str | None = "--idle-timeout-s",
        min_flag: str | None = None,
        max_workers: int = 3,
        key_help: str | None = "require the key in this environment variable",
    ) -> None:
        super().__init__(description=(doc or "").split("\n", 1)[0])
        self.set_defaults(api_key=None, min_workers=0, idle_timeout_s=1.0)
        self.add_argument("--host", default="127.0.0.1")
        self.add_argument("--port", type=int, default=port, help="0 picks a free port")
        if key_help is not None:
            self.add_env_argument("--api-key-env", dest="api_key", help=key_help)
        fleet = self.add_argument_group("the simulated fleet")
        if min_flag is not None:
            fleet.add_argument(min_flag, dest="min_workers", type=int, default=0, metavar="N",
                               help="workers kept up (default 0)")  # fmt: skip
        fleet.add_argument(
            cold_flag, dest="cold_start_s", type=float, default=0.5, metavar="S",
            help="how long a new worker takes to start (default 0.5)",
        )  # fmt: skip
        fleet.add_argument(
            workers_flag, dest="max_workers", type=int, default=max_workers, metavar="N",
            help=f"the most workers at once (default {max_workers})",
        )  # fmt: skip
        if idle_flag is not None:
            fleet.add_argument(
                idle_flag, dest="idle_timeout_s", type=float, default=1.0, metavar="S",
                help="how long an idle worker stays up (default 1.0)",
            )  # fmt: skip

    def add_env_argument(self, flag: str, *, dest: str, help: str) -> None:
        """An option naming an environment variable; ``dest`` gets the variable's value, so a
        secret stays out of the process list. A variable that is not set is refused by name."""
        self.add_argument(flag, dest=dest, type=_from_env, metavar="NAME", help=help)

    def parse(self, argv: list[str] | None = None) -> EmulatorArgs:
        """``parse_args`` into an ``EmulatorArgs``."""
        return self.parse_args(argv, namespace=EmulatorArgs())

    def serve(self, make_app: Callable[..., ASGIApp], argv: list[str] | None = None) -> None:
        """An emulator's whole ``main()``: parse ``argv`` and serve ``make_app(fleet,
        api_key=..., **own options)`` until interrupted (each option's ``dest`` the name of
        a ``make_app`` keyword). Anything else: ``parse``, then ``EmulatorArgs.serve``."""
        args = self.parse(argv)
        args.serve(make_app(args.fleet(), api_key=args.api_key, **args.own()))


def _from_env(name: str) -> str:
    value = os.environ.get(name)
    if not value:
        raise argparse.ArgumentTypeError(f"environment variable {name!r} is not set or empty")
    return value
