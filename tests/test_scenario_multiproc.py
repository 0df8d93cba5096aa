"""Every new shape sharded over processes: each request sent once, the adaptive ones taking
the same decisions in every process (they read all processes' requests after a barrier)."""

from __future__ import annotations

import functools
from pathlib import Path

from _scenario_fleet import require_fair_measurement
from conftest import EchoProvider

from gpubench_sdk import (
    Concurrency,
    EchoProbe,
    MaxRate,
    Replay,
    Runner,
    Stage,
    Stages,
    Store,
    Sweep,
    metrics,
)
from gpubench_sdk._runner._multiproc import run_processes
from gpubench_sdk._scenarios import SEQ_BLOCK

SLO = MaxRate(p95_ms=500, error_rate=0.05, start_rps=20, max_rps=40, trial_s=1.0)


def build(url: str, store: str, trace: str) -> Runner:
    """Module level, so spawned processes can unpickle it."""
    return Runner(
        {"a": EchoProvider(url=url), "b": EchoProvider(url=url)},
        EchoProbe(sleep_ms=5),
        [
            Stages(
                stages=(Stage(30, 0.5), Stage(30, 0.5))
            ),  # integral 7.5 + 15 = 22.5: arrivals 0..22
            Concurrency(concurrency=3, duration_s=0.5),
            Sweep(duration_s=0.5, rates=1, max_concurrency=4),
            SLO,
            Replay(path=trace, time_column="t", loops=2),
        ],
        store=store,
    )


def test_new_shapes_shard_over_two_processes(external_server: str, tmp_path: Path) -> None:
    trace = tmp_path / "trace.csv"
    trace.write_text("t\n0\n0.1\n0.15\n0.4\n")
    store = str(tmp_path / "mp.sqlite")
    result = run_processes(functools.partial(build, external_server, store, str(trace)), 2)
    assert result.status == "completed"
    with Store(store) as s:
        invs = s.invocations(result.run_id)
        swept = metrics.run_sweep(s, result.run_id, 2, "a")
        found = metrics.run_max_rate(s, result.run_id, 3, "a")
        searches = {t: metrics.run_max_rate(s, result.run_id, 3, t).trials for t in ("a", "b")}
    assert all(i.ok for i in invs)

    def seqs(target: str, scenario: int) -> list[int]:
        return sorted(i.seq for i in invs if i.target == target and i.scenario == scenario)

    for t in ("a", "b"):
        assert seqs(t, 0) == list(range(23))  # stages: the whole schedule, once
        closed = seqs(t, 1)
        assert len(closed) == len(set(closed)) >= 6  # concurrency: no seq twice
        assert seqs(t, 4) == list(range(8))  # replay: 4 rows, twice
        # sweep: 3 steps; the constant-rate step sends its whole schedule, once
        steps = {s // SEQ_BLOCK for s in seqs(t, 2)}
        assert steps == {0, 1, 2}
        rate_step = [s - 2 * SEQ_BLOCK for s in seqs(t, 2) if s // SEQ_BLOCK == 2]
        assert rate_step == list(range(len(rate_step))) and rate_step
        # max_rate: both processes ran the same trials: each trial's schedule whole, once
        tried: list[tuple[float, bool]] = []
        for step, (_, verdict) in enumerate(searches[t]):
            rps = SLO.next_rate(tried)  # the rate the search chose for this step
            assert rps is not None
            sent = [s - step * SEQ_BLOCK for s in seqs(t, 3) if s // SEQ_BLOCK == step]
            assert sent == list(range(len(SLO.trial_offsets(rps))))
            tried.append((rps, verdict.passed))
        assert SLO.next_rate(tried) is None  # and stopped where the search ends
    assert len(swept.steps) == 3
    require_fair_measurement(result)  # on a machine not starved, the echo server holds 40/s
    assert [round(r) for r, _ in found.trials] == [20, 40] and found.max_rate_rps > 39
