"""The results store against real files and real processes: round trips, crashes, contention."""

from __future__ import annotations

import csv
import io
import itertools
import json
import math
import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import threading
import time
import uuid
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from gpubench_sdk._base._errors import ConfigError, StoreError
from gpubench_sdk._base._monitor import HealthWindow
from gpubench_sdk._base._types import Invocation, Outcome, Phase
from gpubench_sdk._store._export import EXPORT_FIELDS
from gpubench_sdk._store._store import RunInfo, ScenarioRecord, Store, TargetRecord

ROOT = Path(__file__).resolve().parents[1]
WALL0 = 1_700_000_000_123_456_789
TARGETS = (
    TargetRecord("a", "local", {"url": "http://x"}, ("stream",)),
    TargetRecord("b", "runpod", {}, ()),
)
SCENARIOS = (ScenarioRecord("steady", {"rps": 5.0}), ScenarioRecord("burst", {"n": 10}))


def make_inv(i: int, *, target: str = "a", **changes: Any) -> Invocation:
    """A realistic invocation: an hour-long run, 36-char request ids, 12-char worker ids."""
    sched = i * 18_000_000
    start = sched + 40_000 + (i % 7) * 1_000
    first = start + 80_000_000 + (i % 13) * 1_000_000
    inv = Invocation(
        target=target,
        scenario=i % 2,
        seq=i,
        phase=Phase.MEASURE,
        scheduled_ns=sched,
        start_ns=start,
        end_ns=first + 20_000_000,
        wall_start_ns=WALL0 + start + 1_234,
        outcome=Outcome.OK,
        first_byte_ns=first,
        http_status=200,
        request_id=str(uuid.UUID(int=i)),
        queue_ms=3.0 + (i % 5) / 3,
        execution_ms=81.234 + (i % 100) / 7,
        cold=i % 100 == 0,
        input_units=128,
        output_units=256 + i % 50,
        worker_id=f"wkr-{i % 16:08d}",
    )
    return replace(inv, **changes)


def begin(store: Store, name: str = "r") -> RunInfo:
    return store.begin_run(
        name=name,
        config={"seed": 1, "when": Path("/x")},
        targets=TARGETS,
        scenarios=SCENARIOS,
        origin_ns=123_456,
        started_wall_ns=WALL0,
    )


def begin_with(store: Store, invs: list[Invocation]) -> RunInfo:
    """A run holding ``invs``, committed."""
    run = begin(store)
    for inv in invs:
        store.append(run.id, inv)
    store.flush()
    return run


def exported(path: Path, invs: list[Invocation]) -> tuple[list[dict[str, Any]], str]:
    """A run holding ``invs`` in a new store at ``path``, exported: its JSON lines, parsed, and
    its CSV text."""
    with Store(path) as s:
        run = begin_with(s, invs)
        jsonl, text = io.StringIO(), io.StringIO()
        s.export_jsonl(run.id, jsonl)
        s.export_csv(run.id, text)
    return [json.loads(line) for line in jsonl.getvalue().splitlines()], text.getvalue()


def every_variant() -> list[Invocation]:
    """Every Outcome x Phase x cold, all-None optionals, awkward text and extreme numbers."""
    invs = [
        make_inv(k, target="ab"[k % 2], outcome=o, phase=p, cold=c, cold_confirmed=c is True)
        for k, (o, p, c) in enumerate(itertools.product(Outcome, Phase, (None, True, False)))
    ]
    bare: dict[str, Any] = dict.fromkeys(("first_byte_ns", "http_status", "request_id"), None)
    bare |= dict.fromkeys(("queue_ms", "execution_ms", "setup_ms", "input_units"), None)
    bare["output_units"] = None
    invs.append(make_inv(100, worker_id=None, cold=None, **bare))
    invs.append(make_inv(101, error='boom, "quoted"\nnew line, ünïcödé', setup_ms=0.1 + 0.2))
    invs.append(make_inv(102, scheduled_ns=2**62, start_ns=2**62 + 1, end_ns=2**62 + 2))
    invs.append(make_inv(103, queue_ms=12.0, execution_ms=1e-9, wall_start_ns=WALL0 - 5))
    invs.append(make_inv(104, outcome=Outcome.THROTTLED, http_status=429, retry_after_s=2.5))
    return invs


def run_py(code: str, *args: str) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "tests")])}
    return subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(code), *args],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def test_round_trip_every_field(tmp_path: Path) -> None:
    invs = every_variant()
    with Store(tmp_path / "r.sqlite") as s:
        run = begin_with(s, invs)
        assert s.invocations(run.id) == invs
    with Store(tmp_path / "r.sqlite", readonly=True) as s:
        assert s.invocations(run.id) == invs
        assert s.run(run.id).samples == len(invs)


def test_runs_and_references(tmp_path: Path) -> None:
    with Store(tmp_path / "r.sqlite") as s:
        first, second = begin(s, "first"), begin(s, "second")
        assert first.status == "running" and first.ended_wall_ns is None
        assert first.targets == TARGETS and first.scenarios == SCENARIOS
        assert first.config == {"seed": 1, "when": "/x"} and first.origin_ns == 123_456
        s.append(first.id, make_inv(1))
        s.end_run(first.id, "failed", "it broke")
        assert [r.name for r in s.runs()] == ["second", "first"]
        done = s.run(first.id)
        assert (done.status, done.error, done.samples) == ("failed", "it broke", 1)
        assert done.ended_wall_ns is not None and done.ended_wall_ns >= WALL0
        for ref in (second.id, second.uuid, second.uuid[:4], second.uuid.upper(), "latest", "last"):
            assert s.run(ref).id == second.id
        if not any(r.uuid.startswith(str(first.id)) for r in s.runs()):
            assert s.run(str(first.id)).id == first.id
        with pytest.raises(StoreError, match="gpubench results list"):
            s.run("zzzz")
        with pytest.raises(StoreError, match="gpubench results list"):
            s.run(999)
        with pytest.raises(ValueError, match="status"):
            s.end_run(first.id, "running")
        with pytest.raises(StoreError, match="no target 'nope'"):
            s.append(first.id, make_inv(1, target="nope"))
        with pytest.raises(StoreError, match="gpubench results list"):
            s.append(999, make_inv(1))


def test_columns_filters_and_derived_values(tmp_path: Path) -> None:
    invs = every_variant()
    with Store(tmp_path / "r.sqlite") as s:
        run = begin_with(s, invs)
        all_cols = s.columns(run.id, phase=None, text=True)
        measured = s.columns(run.id)
        only_b = s.columns(run.id, target="b", scenario=1, phase=Phase.WARMUP)
        with pytest.raises(StoreError, match="no target"):
            s.columns(run.id, target="zz")
    assert all(len(v) == len(invs) for v in all_cols.values())
    assert all_cols["scheduled_ns"].dtype == np.int64 and all_cols["queue_ms"].dtype == np.float64
    assert list(all_cols["target"]) == [["a", "b"].index(i.target) for i in invs]
    assert list(all_cols["outcome"]) == [i.outcome.code for i in invs]
    assert list(all_cols["wall_start_ns"]) == [i.wall_start_ns for i in invs]
    assert list(all_cols["cold"]) == [-1 if i.cold is None else int(i.cold) for i in invs]
    assert list(all_cols["http_status"]) == [i.http_status or -1 for i in invs]
    assert list(all_cols["worker_id"]) == [i.worker_id for i in invs]
    np.testing.assert_allclose(all_cols["latency_ms"], [i.latency_ms for i in invs])
    ttfb = [math.nan if i.ttfb_ms is None else i.ttfb_ms for i in invs]
    np.testing.assert_allclose(all_cols["ttfb_ms"], ttfb)
    assert np.isnan(all_cols["queue_ms"][invs.index(next(i for i in invs if i.queue_ms is None))])
    assert len(measured["seq"]) == sum(i.phase is Phase.MEASURE for i in invs)
    assert "request_id" not in measured
    expect = [i.seq for i in invs if (i.target, i.scenario, i.phase) == ("b", 1, Phase.WARMUP)]
    assert list(only_b["seq"]) == expect and expect


def test_columns_and_health_of_empty_run(tmp_path: Path) -> None:
    with Store(tmp_path / "r.sqlite") as s:
        run = begin(s)
        cols, health = s.columns(run.id), s.health(run.id)
    assert cols["seq"].shape == (0,) and cols["latency_ms"].shape == (0,)
    assert health["t_ns"].shape == (0,)


def test_health_round_trip(tmp_path: Path) -> None:
    with Store(tmp_path / "r.sqlite") as s:
        run = begin(s)
        later = HealthWindow(2_000_000_000, 1000.0, 0.5, 12.5, 3, False)
        first = HealthWindow(1_000_000_000, 1000.0, 40.0, 99.0, 64, True)
        s.append_health(run.id, later)
        s.append_health(run.id, first)
        s.flush()
        h = s.health(run.id)
        assert s.health_windows(run.id) == [first, later]
    assert list(h["t_ns"]) == [1_000_000_000, 2_000_000_000]
    assert list(h["window_ms"]) == [1000.0, 1000.0]
    assert list(h["loop_lag_ms"]) == [40.0, 0.5] and list(h["cpu_pct"]) == [99.0, 12.5]
    assert list(h["inflight"]) == [64, 3] and list(h["client_bound"]) == [True, False]


def _from_text(field: str, value: Any) -> Any:
    if value is None or value == "":
        return None
    if field == "phase":
        return Phase(value)
    if field == "outcome":
        return Outcome(value)
    if field in ("cold", "cold_confirmed"):
        return value if isinstance(value, bool) else value == "true"
    if field in ("queue_ms", "execution_ms", "setup_ms", "retry_after_s"):
        return float(value)
    if field in ("target", "error", "request_id", "worker_id"):
        return value
    return int(value)


def test_export_jsonl_and_csv_parse_back(tmp_path: Path) -> None:
    invs = every_variant()
    rows, text = exported(tmp_path / "r.sqlite", invs)
    assert rows[0]["outcome"] == "ok" and rows[0]["target"] == "a"
    derived = ("latency_ms", "scenario_kind")
    for r in rows:
        assert r.pop("scenario_kind") == ["steady", "burst"][r["scenario"]]
        assert r.pop("latency_ms") == pytest.approx((r["end_ns"] - r["scheduled_ns"]) / 1e6)
    assert [Invocation(**{k: _from_text(k, v) for k, v in r.items()}) for r in rows] == invs
    reader = csv.DictReader(io.StringIO(text))
    assert reader.fieldnames is not None and tuple(reader.fieldnames[-2:]) == derived
    parsed = [
        Invocation(**{k: _from_text(k, v) for k, v in r.items() if k not in derived})
        for r in reader
    ]
    # CSV cannot tell an empty error string from None; every_variant has none of those.
    assert parsed == [replace(i, cold_confirmed=i.cold_confirmed) for i in invs]


def test_to_pandas(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with Store(tmp_path / "r.sqlite") as s:
        run = begin(s)
        for inv in every_variant():
            s.append(run.id, inv)
        s.flush()
        with monkeypatch.context() as m:
            m.setitem(sys.modules, "pandas", None)  # import fails as if not installed
            with pytest.raises(StoreError, match="pip install pandas"):
                s.to_pandas(run.id)
        pytest.importorskip("pandas")
        df = s.to_pandas(run.id)
    assert len(df) == len(every_variant()) and set(df["target"]) == {"a", "b"}
    assert df["outcome"].iloc[0] == "ok" and df["http_status"].isna().sum() == 1


def test_committed_within_flush_interval_without_flush(tmp_path: Path) -> None:
    path = tmp_path / "r.sqlite"
    with Store(path, flush_interval_s=0.1) as s:
        run = begin(s)
        s.append(run.id, make_inv(1))
        reader = sqlite3.connect(path)
        deadline = time.monotonic() + 5
        while reader.execute("SELECT count(*) FROM invocations").fetchone()[0] == 0:
            assert time.monotonic() < deadline, "not committed within 5 s"
            time.sleep(0.02)
        reader.close()


def test_flush_interval_zero_commits_each_request_as_it_ends(tmp_path: Path) -> None:
    path = tmp_path / "r.sqlite"
    reader = sqlite3.connect(path)
    with Store(path, flush_interval_s=0) as s:  # a 60 s window would hold them for a minute
        run = begin(s)
        for i in range(3):
            s.append(run.id, make_inv(i))
            deadline = time.monotonic() + 5
            query = "SELECT count(*) FROM invocations"
            while reader.execute(query).fetchone()[0] < i + 1:
                assert time.monotonic() < deadline, f"request {i} not committed within 5 s"
                time.sleep(0.005)
    reader.close()


@pytest.mark.parametrize("bad", [-0.1, float("nan"), float("inf"), 61, "0.5"])
def test_flush_interval_is_checked(tmp_path: Path, bad: Any) -> None:
    with pytest.raises(ConfigError, match="flush_interval_s"):
        Store(tmp_path / "r.sqlite", flush_interval_s=bad)


def test_parquet_export_has_every_column(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    invs = every_variant()
    with Store(tmp_path / "r.sqlite") as s:
        run = begin_with(s, invs)
        with monkeypatch.context() as m:
            m.setitem(sys.modules, "pyarrow", None)  # import fails as if not installed
            with pytest.raises(StoreError, match=r"gpubench-sdk\[parquet\]"):
                s.export_parquet(run.id, tmp_path / "x.parquet")
        pq = pytest.importorskip("pyarrow.parquet")
        s.export_parquet(run.id, tmp_path / "r.parquet")
    table = pq.read_table(tmp_path / "r.parquet")
    assert table.column_names == list(EXPORT_FIELDS)
    rows = table.to_pylist()
    assert [r["seq"] for r in rows] == [i.seq for i in invs]
    assert [r["outcome"] for r in rows] == [i.outcome.value for i in invs]
    assert [r["latency_ms"] for r in rows] == [i.latency_ms for i in invs]
    assert [r["scenario_kind"] for r in rows] == [SCENARIOS[i.scenario].kind for i in invs]
    assert [r["retry_after_s"] for r in rows] == [i.retry_after_s for i in invs]
    assert [r["error"] for r in rows] == [i.error for i in invs]


def test_readers_start_no_writer_and_refuse_writes(tmp_path: Path) -> None:
    path = tmp_path / "r.sqlite"
    with Store(path) as s:
        run = begin(s)
    before = threading.active_count()
    with Store(path, readonly=True) as ro, Store(path) as rw:
        ro.runs(), rw.runs(), rw.columns(run.id), ro.invocations(run.id)
        assert threading.active_count() == before
        with pytest.raises(StoreError, match="read-only"):
            ro.append(run.id, make_inv(1))
        with pytest.raises(StoreError, match="read-only"):
            begin(ro)


def test_close_is_idempotent_and_final(tmp_path: Path) -> None:
    s = Store(tmp_path / "r.sqlite")
    run = begin(s)
    s.append(run.id, make_inv(1))
    s.close()
    s.close()
    with pytest.raises(StoreError, match="closed"):
        s.append(run.id, make_inv(2))
    with Store(tmp_path / "r.sqlite") as again:
        assert again.run(run.id).samples == 1


def test_newer_schema_version_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "r.sqlite"
    Store(path).close()
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE meta SET value = '99' WHERE key = 'schema_version'")
    conn.close()
    for readonly in (False, True):
        with pytest.raises(StoreError, match=r"version 99 .*upgrade gpubench"):
            Store(path, readonly=readonly)


def test_foreign_garbage_and_missing_files_are_refused(tmp_path: Path) -> None:
    garbage = tmp_path / "garbage.sqlite"
    garbage.write_bytes(os.urandom(8192))
    with pytest.raises(StoreError, match=r"garbage\.sqlite"):
        Store(garbage)
    foreign = tmp_path / "foreign.sqlite"
    with sqlite3.connect(foreign) as conn:
        conn.execute("CREATE TABLE t (x)")
    conn.close()
    with pytest.raises(StoreError, match=r"foreign\.sqlite.*not a gpubench results store"):
        Store(foreign)
    with pytest.raises(StoreError, match=r"missing\.sqlite"):
        Store(tmp_path / "missing.sqlite", readonly=True)


class _TinyDisk(Store):
    """A store whose writer connection runs out of space: SQLite's real disk-full path."""

    full = False

    def _connect(self) -> sqlite3.Connection:
        conn = super()._connect()
        if self.full:
            pages = conn.execute("PRAGMA page_count").fetchone()[0]
            conn.execute(f"PRAGMA max_page_count = {pages + 2}")
        return conn


def test_disk_full_surfaces_as_store_error_without_raising_in_append(tmp_path: Path) -> None:
    s = _TinyDisk(tmp_path / "r.sqlite", flush_interval_s=60)  # the writer waits for flush()
    run = begin(s)
    s.full = True
    for i in range(5_000):
        s.append(run.id, make_inv(i))
    with pytest.raises(StoreError, match="full"):
        s.flush()
    with pytest.raises(StoreError, match="full"):
        s.end_run(run.id, "completed")
    failed = s.run(run.id)
    assert failed.status == "failed" and "full" in (failed.error or "")
    with pytest.raises(StoreError, match="full"), s:
        pass


def test_bytes_per_sample_is_small(tmp_path: Path) -> None:
    path, n = tmp_path / "r.sqlite", 20_000
    with Store(path) as s:
        run = begin(s)
        for i in range(n):
            s.append(run.id, make_inv(i * 10, target="ab"[i % 2]))
    assert not Path(f"{path}-wal").exists() or Path(f"{path}-wal").stat().st_size == 0
    assert path.stat().st_size / n <= 300


def test_sigkill_keeps_every_flushed_row(tmp_path: Path) -> None:
    path = tmp_path / "r.sqlite"
    proc = run_py(
        """
        import sys
        from gpubench_sdk._store._store import Store
        from test_store import begin, make_inv
        s = Store(sys.argv[1], flush_interval_s=0.05)
        run, n = begin(s), 0
        while True:
            for _ in range(250):
                s.append(run.id, make_inv(n, target="ab"[n % 2]))
                n += 1
            s.flush()
            print(n, flush=True)
        """,
        str(path),
    )
    assert proc.stdout is not None
    flushed, deadline = 0, time.monotonic() + 20
    while flushed < 5_000:
        line = proc.stdout.readline()
        assert line, f"writer process died: {proc.stderr.read() if proc.stderr else ''}"
        flushed = int(line)
        assert time.monotonic() < deadline
    proc.send_signal(signal.SIGKILL)
    rest, _ = proc.communicate(timeout=10)
    flushed = max([flushed, *(int(x) for x in rest.split())])
    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    conn.close()
    with Store(path, readonly=True) as s:
        (run,) = s.runs()
        assert run.status == "interrupted" and run.samples >= flushed
        invs = s.invocations(run.id)
        assert [i.seq for i in invs] == list(range(len(invs)))
        assert invs[:3] == [make_inv(n, target="ab"[n % 2]) for n in range(3)]


def test_forgotten_close_still_commits_at_exit(tmp_path: Path) -> None:
    path = tmp_path / "r.sqlite"
    proc = run_py(
        """
        import sys
        from gpubench_sdk._store._store import Store
        from test_store import begin, make_inv
        s = Store(sys.argv[1], flush_interval_s=30)
        run = begin(s)
        for n in range(1_000):
            s.append(run.id, make_inv(n))
        """,
        str(path),
    )
    _, err = proc.communicate(timeout=20)
    assert proc.returncode == 0, err
    with Store(path, readonly=True) as s:
        assert s.run("latest").samples == 1_000


def test_two_processes_append_to_one_run(tmp_path: Path) -> None:
    path, per = tmp_path / "r.sqlite", 20_000
    with Store(path) as s:
        run = begin(s)
    go = tmp_path / "go"
    code = """
        import pathlib, sys, time
        from gpubench_sdk._store._store import Store
        from test_store import make_inv
        run_id, first = int(sys.argv[2]), int(sys.argv[3])
        with Store(sys.argv[1], flush_interval_s=0.01) as s:
            pathlib.Path(f"{sys.argv[5]}.{first}").touch()
            while not pathlib.Path(sys.argv[5]).exists():  # start together, to contend
                time.sleep(0.001)
            for n in range(first, first + int(sys.argv[4])):
                s.append(run_id, make_inv(n, target="ab"[n % 2]))
                if n % 500 == 0:
                    s.flush()
        """
    procs = [
        run_py(code, str(path), str(run.id), str(k * per), str(per), str(go)) for k in range(2)
    ]
    deadline = time.monotonic() + 30
    while not all(Path(f"{go}.{k * per}").exists() for k in range(2)):
        assert time.monotonic() < deadline and all(p.poll() is None for p in procs)
        time.sleep(0.01)
    go.touch()
    for p in procs:
        _, err = p.communicate(timeout=60)
        assert p.returncode == 0, err
    with Store(path, readonly=True) as s:
        seqs = [i.seq for i in s.invocations(run.id)]
        assert sorted(seqs) == list(range(2 * per))
        writer = [seq >= per for seq in seqs]  # in commit order: the two writers interleaved
        assert sum(a != b for a, b in itertools.pairwise(writer)) > 2
        assert s.columns(run.id, phase=None)["target"].tolist().count(1) == per


def test_a_known_secret_pasted_anywhere_in_the_plan_is_masked_in_the_file(tmp_path: Path) -> None:
    from gpubench_sdk._base._secrets import remember

    secret = "hf_pasted_into_a_header_0042"
    remember(secret)  # as reading api_key_env does
    path = tmp_path / "s.sqlite"
    with Store(path) as store:
        info = store.begin_run(
            name="r",
            config={"targets": [{"name": "a", "headers": {"X-Trace": secret}}]},
            targets=[TargetRecord("a", "http", {"headers": {"X-Trace": secret}}, ())],
            scenarios=SCENARIOS,
            origin_ns=0,
            started_wall_ns=time.time_ns(),
        )
        assert store.run(info.id).config["targets"][0]["headers"]["X-Trace"] == "***"
    for f in tmp_path.iterdir():  # the database and any WAL or journal beside it
        assert secret.encode() not in f.read_bytes(), f
