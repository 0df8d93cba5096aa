"""pytest fixtures of the testing kit, registered through the ``pytest11`` entry point.

- ``simulated_fleet``: a fresh ``SimulatedFleet`` with fast defaults (0.3 s cold starts,
  1 s idle timeout, 3 workers); ``fleet_config`` can be overridden by a test module.
- ``serve_app``: call it with an ASGI app to serve it on loopback until the test ends.
- ``gpubench_cli``: a ``CliEndToEnd`` in the test's ``tmp_path``: start emulators as their own
  processes, run a plan through ``gpubench run``, read what it stored; the emulators stop
  when the test ends.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from ._end_to_end import CliEndToEnd
from ._faults import ASGIApp
from ._fleet import FleetConfig, SimulatedFleet
from ._harness import ServedApp, serve


@pytest.fixture
def fleet_config() -> FleetConfig:
    """The configuration ``simulated_fleet`` uses; override this fixture to change it."""
    return FleetConfig()


@pytest.fixture
def simulated_fleet(fleet_config: FleetConfig) -> SimulatedFleet:
    return SimulatedFleet(fleet_config)


@pytest.fixture
def serve_app() -> Iterator[Callable[[ASGIApp], ServedApp]]:
    with contextlib.ExitStack() as stack:

        def start(app: ASGIApp) -> ServedApp:
            return stack.enter_context(serve(app))

        yield start


@pytest.fixture
def gpubench_cli(tmp_path: Path) -> Iterator[CliEndToEnd]:
    harness = CliEndToEnd(tmp_path)
    try:
        yield harness
    finally:
        harness.close()
