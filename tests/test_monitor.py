"""The runner flags the stretches of a run where the client, not the provider, was the limit."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from conftest import EchoProvider

from gpubench_sdk import Burst, EchoProbe, Rate, Store, run

pytestmark = pytest.mark.anyio


async def test_saturated_client_is_flagged(external_server: str, tmp_path: Path) -> None:
    # An instant endpoint at 128 concurrent: the client spends all its CPU on HTTP and
    # bookkeeping, so the limit is the client, and the run must say so.
    result = await run(
        {"a": EchoProvider(url=external_server)},
        EchoProbe(),
        [Burst(total=100_000, concurrency=128, deadline_s=5)],  # the deadline ends it
        store=tmp_path / "r.sqlite",
    )
    assert result.client_bound_s >= 1
    with Store(tmp_path / "r.sqlite") as s:
        health = s.health(result.run_id)
    bound = health["client_bound"] == 1
    assert bound.sum() >= 1
    # each flagged window shows why: timers fired late (repeatedly), or the process used a core
    assert np.all((health["loop_lag_ms"][bound] > 20) | (health["cpu_pct"][bound] > 90))


async def test_light_load_is_not_flagged(external_server: str, tmp_path: Path) -> None:
    result = await run(
        {"a": EchoProvider(url=external_server)},
        EchoProbe(sleep_ms=5),
        [Rate(rps=20, duration_s=2.5)],
        store=tmp_path / "r.sqlite",
    )
    assert len(result.health) >= 2
    assert result.client_bound_s == 0
    assert all(w.cpu_pct < 50 for w in result.health)
