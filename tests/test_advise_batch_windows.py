"""Batch windows on a synthetic store (written through the public Store API): how hours and
days are counted, how windows are scored and ranked, and what happens where a target was not
measured in some hours. The proof on real runs is tests/test_advise_batch.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpubench_sdk import Invocation, Objectives, Outcome, Phase, Store, advise_batch
from gpubench_sdk._advise._batch import _ranked_windows, _samples
from gpubench_sdk._advise._concurrency import levels
from gpubench_sdk._base._errors import ConfigError

DAY0_NS = 1_767_225_600 * 10**9  # 2026-01-01T00:00Z
HOUR_NS = 3_600 * 10**9
MS = 1_000_000
PLAN = {
    "run": {"name": "synthetic"},
    "workload": {"kind": "probe"},
    "targets": [
        {"name": "a", "provider": "local", "price_per_s_usd": 0.001},
        {"name": "b", "provider": "local", "price_per_s_usd": 0.002},
    ],
    "scenarios": [{"kind": "cold_starts", "n": 3}],
}


def _run(store: Store, day: int, hour: int, boot_ms: dict[str, float]) -> int:
    """A run at ``hour`` of ``day``: per target in ``boot_ms``, three cold starts with that
    boot, each followed by two warm requests; a target left out only fails."""
    from gpubench_sdk._store._store import ScenarioRecord, TargetRecord

    wall0 = DAY0_NS + day * 24 * HOUR_NS + hour * HOUR_NS
    run = store.begin_run(
        name=f"d{day}h{hour}", config=PLAN,
        targets=(TargetRecord("a", "local"), TargetRecord("b", "local")),
        scenarios=(ScenarioRecord("cold_starts", {}),), origin_ns=0, started_wall_ns=wall0,
    )  # fmt: skip
    seq = 0
    for target in ("a", "b"):
        for i in range(3):
            for j in range(3):
                t = (i * 60_000 + j * 5_000) * MS
                boot = boot_ms.get(target)
                cold = j == 0 and boot is not None
                took = (boot or 0.0) + 100.0 if cold else 100.0
                store.append(run.id, Invocation(
                    target=target, scenario=0, seq=seq, phase=Phase.MEASURE, scheduled_ns=t,
                    start_ns=t, end_ns=t + int(took * MS), wall_start_ns=wall0 + t,
                    outcome=Outcome.OK if target in boot_ms else Outcome.HTTP_5XX,
                    cold=cold, cold_confirmed=cold, execution_ms=100.0,
                    setup_ms=boot if cold else None,
                ))  # fmt: skip
                seq += 1
    store.end_run(run.id, "completed")
    return run.id


@pytest.fixture
def store_path(tmp_path: Path) -> Path:
    path = tmp_path / "synthetic.sqlite"
    with Store(path) as store:
        for day in range(3):
            _run(store, day, 2, {"a": 300, "b": 400})  # night: fast boots
            _run(store, day, 14, {"a": 2_000, "b": 2_500})  # afternoon: slow
        _run(store, 0, 20, {"a": 1_000})  # b not measured at 20:00
    return path


def test_hours_days_and_window_scores(store_path: Path) -> None:
    with Store(store_path, readonly=True) as store:
        runs = [r.id for r in store.runs()]
        advice = advise_batch(
            store, runs, 500, 3, Objectives(latency_s=2.0), resamples=5, windows=3,
            scale_down_s=(5.0, 60.0),
        )  # fmt: skip
        samples = _samples(store, runs)
    slots = {s.hour: s for s in advice.slots}
    assert sorted(slots) == [2, 14, 20]
    assert (slots[2].days, slots[14].days, slots[20].days) == (3, 3, 1)
    assert slots[2].cold_starts == 18 and slots[20].cold_starts == 3  # b failed at 20:00
    assert slots[2].cold_start_p50_s == pytest.approx(0.35)
    # the night window first: its cold starts are a fraction of each target's all-day median
    assert advice.windows[0].start_hour == 0 and [s.hour for s in advice.windows[0].slots] == [2]
    assert advice.best is advice.windows[0], advice.reason
    assert advice.windows[0].fewest_days == 3
    assert not any("fewer than 3 days" in n for n in advice.notes if "00:00" in n)
    # 20:00 measured target a only (b failed): that window is scored on a, and not priced,
    # as b has no cold start there; a note says so, and the next window is priced instead
    ranked = _ranked_windows(samples, _placed_hours(store_path), 3)
    assert [start for _, start, _ in ranked] == [0, 18, 12], ranked
    assert [w.start_hour for w in advice.windows] == [0, 12]
    assert any("18:00-21:00 not priced" in n and "b" in n for n in advice.notes), advice.notes
    json = advice.to_json()
    assert json["best"] == "00:00-03:00" and json["hour_slots"][0]["days"] == 3


def _placed_hours(path: Path) -> dict[int, tuple[int, str]]:
    from gpubench_sdk._advise._batch import _placed

    with Store(path, readonly=True) as store:
        return _placed(store, [r.id for r in store.runs()], 0.0)


def test_bad_batch_input_names_the_field(store_path: Path) -> None:
    with Store(store_path, readonly=True) as store:
        runs = [r.id for r in store.runs()]
        for jobs, hours, field in ((500, 0, "--batch-hours"), (500, 25, "--batch-hours"),
                                   (0, 3, "--batch"), (10**6, 3, "--batch")):  # fmt: skip
            with pytest.raises(ConfigError, match=field):
                advise_batch(store, runs, jobs, hours, Objectives(latency_s=2.0))


def test_levels_count_the_requests_a_worker_was_running_when_each_began() -> None:
    import numpy as np

    # worker w1: 0-100, 50-150, 60-160 ms; worker w2: 0-100; one with no worker id
    begin = np.array([0, 50, 60, 0, 0], dtype=np.float64) * MS
    exec_ms = np.array([100, 100, 100, 100, 100], dtype=np.float64)
    got = levels(["w1", "w1", "w1", "w2", None], begin, exec_ms)
    assert got.tolist() == [1, 2, 3, 1, 0]
