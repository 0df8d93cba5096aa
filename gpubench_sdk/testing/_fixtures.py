"""Fixture factories for a plugin's protocol tests: its ``fleet`` and its ``served`` emulator,
each declared in one assignment instead of a fixture function written again in every module.

Built on pytest: ``gpubench_sdk.testing`` imports this module only when one is used.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from ._faults import ASGIApp
from ._fleet import SimulatedFleet, quick_fleet
from ._harness import ServedApp, serve


def fleet_fixture(cold_start_s: float, **config: Any) -> Any:
    """A pytest fixture giving each test a fresh ``quick_fleet(cold_start_s, **config)``.
    The fixture takes the name it is assigned to:
    ``fleet = fleet_fixture(0.3, max_workers=1, idle_timeout_s=2)``."""

    @pytest.fixture
    def fleet() -> SimulatedFleet:
        return quick_fleet(cold_start_s, **config)

    return fleet


def served_fixture(make_app: Callable[..., ASGIApp], **options: Any) -> Any:
    """A pytest fixture serving ``make_app(fleet, **options)`` on loopback for the test, where
    ``fleet`` is the module's ``fleet`` fixture:
    ``served = served_fixture(make_app, api_key=KEY)``."""

    @pytest.fixture
    def served(fleet: SimulatedFleet) -> Iterator[ServedApp]:
        with serve(make_app(fleet, **options)) as app:
            yield app

    return served
