"""Multi-process load generation: one run, several processes, merged exactly in the store."""

from __future__ import annotations

import functools
from pathlib import Path

from conftest import EchoProvider

from gpubench_sdk import Burst, EchoProbe, Outcome, Phase, Rate, Runner, Store
from gpubench_sdk._multiproc import run_processes


def build(url: str, store: str) -> Runner:
    """Module level, so spawned processes can unpickle it."""
    return Runner(
        {"a": EchoProvider(url=url), "b": EchoProvider(url=url)},
        EchoProbe(sleep_ms=2),
        [Burst(total=101, concurrency=6, warmup=3), Rate(rps=80, duration_s=1.0)],
        store=store,
        name="two-procs",
    )


def test_two_processes_share_one_run(external_server: str, tmp_path: Path) -> None:
    store = str(tmp_path / "mp.sqlite")
    progress: list[int] = []
    result = run_processes(
        functools.partial(build, external_server, store), 2, on_progress=progress.append
    )
    assert result.status == "completed"
    with Store(store) as s:
        (run,) = s.runs()
        invs = s.invocations(run.id)
    assert run.id == result.run_id and run.status == "completed"
    assert all(i.outcome is Outcome.OK for i in invs)
    for target in ("a", "b"):
        burst = [
            i.seq
            for i in invs
            if i.target == target and i.scenario == 0 and i.phase is Phase.MEASURE
        ]
        warm = [
            i.seq
            for i in invs
            if i.target == target and i.scenario == 0 and i.phase is Phase.WARMUP
        ]
        rate = [i.seq for i in invs if i.target == target and i.scenario == 1]
        assert sorted(burst) == list(range(101))  # every request exactly once across processes
        assert sorted(warm) == [-3, -2, -1]
        assert sorted(rate) == list(range(80))
    assert result.requests == len(invs) == 2 * (101 + 3 + 80)
    assert progress and max(progress) <= len(invs)
    assert len(result.health) >= 2  # both processes' monitors wrote their windows
