"""What every emulator repeats: holding a request open while its job runs (and cancelling the
job when the client hangs up), and the command line (where to listen, which key to require, the
simulated fleet's cold start, worker cap and idle timeout under the provider's own names).

An emulator's ``main`` adds its own options and builds its app::

    parser = EmulatorParser(__doc__, port=8787, idle_flag="--keep-alive-s")
    parser.add_argument("--model", default="m")
    args = parser.parse(argv)
    serve_forever(make_app(args.fleet(), api_key=args.api_key), host=args.host, port=args.port)
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
from collections.abc import AsyncIterator, Callable
from typing import Any, Protocol

from ._faults import Receive
from ._fleet import FleetConfig, SimulatedFleet
from ._jobs import Job
from ._timing import Duration


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
    finished = asyncio.ensure_future(job.done.wait())
    hung_up = asyncio.ensure_future(_disconnected(request.receive))
    try:
        await asyncio.wait({finished, hung_up}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for waiter in (finished, hung_up):
            waiter.cancel()
    if job.done.is_set():
        return True
    fleet.cancel(job.id)
    return False


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
    max_workers: int
    idle_timeout_s: float

    def fleet(self, **config: Any) -> SimulatedFleet:
        """A fleet with the cold start, worker cap and idle timeout given; ``config`` sets any
        other ``FleetConfig`` field (e.g. ``min_workers``)."""
        return SimulatedFleet(
            FleetConfig(
                cold_start=Duration.fixed(self.cold_start_s),
                max_workers=self.max_workers,
                idle_timeout_s=self.idle_timeout_s,
                **config,
            )
        )


class EmulatorParser(argparse.ArgumentParser):
    """``--host``, ``--port``, ``--api-key-env`` and the fleet's three sizes.

    The flags keep the provider's vocabulary (fal's ``--keep-alive-s``, Baseten's
    ``--max-replicas``); what they set is always ``cold_start_s``, ``max_workers`` and
    ``idle_timeout_s``. ``--api-key-env`` names an environment variable, so the key never
    shows in a process list; one that is not set is refused with its name.
    """

    def __init__(
        self,
        doc: str | None,
        *,
        port: int,
        cold_flag: str = "--cold-start-s",
        workers_flag: str = "--max-workers",
        idle_flag: str = "--idle-timeout-s",
        max_workers: int = 3,
        key_help: str = "require the key in this environment variable",
    ) -> None:
        super().__init__(description=(doc or "").split("\n", 1)[0])
        self.add_argument("--host", default="127.0.0.1")
        self.add_argument("--port", type=int, default=port, help="0 picks a free port")
        self.add_env_argument("--api-key-env", dest="api_key", help=key_help)
        fleet = self.add_argument_group("the simulated fleet")
        fleet.add_argument(
            cold_flag, dest="cold_start_s", type=float, default=0.5, metavar="S",
            help="how long a new worker takes to start (default 0.5)",
        )  # fmt: skip
        fleet.add_argument(
            workers_flag, dest="max_workers", type=int, default=max_workers, metavar="N",
            help=f"the most workers at once (default {max_workers})",
        )  # fmt: skip
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


def _from_env(name: str) -> str:
    value = os.environ.get(name)
    if not value:
        raise argparse.ArgumentTypeError(f"environment variable {name!r} is not set or empty")
    return value
