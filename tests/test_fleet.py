"""The runner records a target's fleet over the run: scale-out under a burst, as data."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from gpubench_sdk import Burst, ColdStarts, EchoProbe, FleetState, LocalProvider, Store, run
from gpubench_sdk._store._store import ScenarioRecord, StoreError, TargetRecord

pytestmark = pytest.mark.anyio


async def test_burst_scale_out_is_recorded(tmp_path: Path) -> None:
    provider = LocalProvider(
        handler="gpubench_sdk.demo:echo", load="", max_workers=3, idle_timeout_s=30
    )
    result = await run(
        {"loc": provider},
        EchoProbe(sleep_ms=30),
        [ColdStarts(1, warm_after=0), Burst(total=120, concurrency=6)],
        store=tmp_path / "f.sqlite",
        fleet_interval_s=0.05,
    )
    assert result.status == "completed"
    with Store(tmp_path / "f.sqlite") as s:
        fleet = s.fleet(result.run_id, target="loc")
    assert len(fleet["t_ns"]) >= 10
    assert np.all(np.diff(fleet["t_ns"]) >= 0)
    running = fleet["ready"] + fleet["busy"] + fleet["starting"]
    assert running.max() == 3  # scaled out to max_workers, never beyond
    assert fleet["starting"].max() >= 1  # workers were seen booting
    assert fleet["queued"].max() >= 1  # 6 concurrent on 3 workers: requests queued


def test_fleet_round_trip_and_unknown_target(tmp_path: Path) -> None:
    with Store(tmp_path / "s.sqlite") as s:
        info = s.begin_run(
            name="f",
            config={},
            targets=[TargetRecord("a", "x")],
            scenarios=[ScenarioRecord("burst")],
            origin_ns=0,
            started_wall_ns=0,
        )
        s.append_fleet(info.id, "a", 5, FleetState(ready=2, busy=None, starting=1, queued=0))
        with pytest.raises(StoreError, match="no target 'b'"):
            s.append_fleet(info.id, "b", 6, FleetState())
        s.flush()
        fleet = s.fleet(info.id)
    assert {k: v.tolist() for k, v in fleet.items()} == {
        "target": [0],
        "t_ns": [5],
        "ready": [2],
        "busy": [-1],
        "starting": [1],
        "queued": [0],
    }


async def test_a_runtime_the_provider_starts_itself_is_its_endpoint() -> None:
    provider = LocalProvider(handler="gpubench_sdk.demo:echo", load="", max_workers=1)
    assert provider.endpoint is None  # not started yet
    async with provider:
        assert provider.endpoint == provider.url and provider.url.startswith("http://127.0.0.1:")
