"""Store schema v2: per-token times and ``detail`` round trip, v1 files migrate or read as-is,
and the runner fills both from a provider's Result (or the workload's ``detail``)."""

from __future__ import annotations

import csv
import io
import json
import math
import sqlite3
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import anyio
import numpy as np
import pytest
from rich.console import Console
from test_store import begin, begin_with, exported, make_inv

from gpubench_sdk import Burst, Provider, Request, Result, run
from gpubench_sdk._base._errors import StoreError
from gpubench_sdk._base._types import Invocation, Outcome
from gpubench_sdk._contract._workload import EchoProbe
from gpubench_sdk._report._summary import render, summarize
from gpubench_sdk._store._schema import DDL, INSERT_INVOCATION, decode_token_times
from gpubench_sdk._store._store import Store
from gpubench_sdk.metrics import SLO, run_stream_metrics, run_throughput

pytestmark = pytest.mark.anyio

# The v1 DDL is today's without the columns v2, v3 and v4 added (checked below, so it cannot
# drift).
V1_DDL = (
    DDL.replace(",\n    token_us BLOB,\n    detail TEXT,\n    retry_after_s REAL\n", "\n")
    .replace("    status TEXT,\n", "")
    .replace("    deployment_json TEXT,\n", "")
)
V1_INSERT = INSERT_INVOCATION.replace(", token_us, detail, retry_after_s", "").replace(
    ", ?, ?, ?)", ")"
)


def with_tokens(i: int, n_tokens: int, **changes: Any) -> Invocation:
    """An invocation whose tokens arrive 20 ms apart after its first byte, on whole us."""
    inv = make_inv(i, **changes)
    assert inv.first_byte_ns is not None
    tokens = [inv.first_byte_ns + k * 20_000_000 for k in range(n_tokens)]
    end = max(inv.end_ns, tokens[-1] + 1_000) if tokens else inv.end_ns
    detail = {"tflops": 123.5 + i, "gpu": "H100", "per_layer_ms": [1.0, 2.5]}
    return replace(inv, end_ns=end, token_times_ns=tokens or None, detail=detail)


def test_tokens_and_detail_round_trip(tmp_path: Path) -> None:
    invs = [with_tokens(i, n, target="ab"[i % 2]) for i, n in enumerate((5, 0, 1, 300, 7))]
    with Store(tmp_path / "r.sqlite") as s:
        run_ = begin_with(s, invs)
        assert s.invocations(run_.id) == invs
    with Store(tmp_path / "r.sqlite", readonly=True) as s:
        assert s.invocations(run_.id) == invs
        cols = s.columns(run_.id, target="a")
        times = s.token_times(run_.id, target="a")
        assert len(times) == cols["seq"].size == 3
        for seq, arr in zip(cols["seq"], times, strict=True):
            expected = invs[int(seq)].token_times_ns or []
            assert arr.dtype == np.int64 and arr.tolist() == list(expected)
        assert [a.size for a in s.token_times(run_.id, scenario=1)] == [0, 300]


def test_token_times_are_floored_to_microseconds_and_off_clock_ones_are_not_stored(
    tmp_path: Path,
) -> None:
    base = make_inv(0)
    fb = base.first_byte_ns
    assert fb is not None
    ragged = replace(base, token_times_ns=[fb + 1_999, fb + 5_000_123])
    before_start = replace(make_inv(1), token_times_ns=[base.start_ns - 10_000])
    with Store(tmp_path / "r.sqlite") as s:
        run_ = begin_with(s, [ragged, before_start])
        got = s.invocations(run_.id)
    floor = [
        base.start_ns + (t - base.start_ns) // 1000 * 1000 for t in [fb + 1_999, fb + 5_000_123]
    ]
    assert got[0].token_times_ns == floor
    assert got[1].token_times_ns is None


def test_a_token_read_with_the_headers_is_never_read_back_before_them(tmp_path: Path) -> None:
    # The transport times the headers and a token of the same socket read alike (ns). Floored
    # to the format's microsecond, that token read back up to 999 ns before the first byte: a
    # TTFT below the TTFB, and a record whose first token preceded its response (CI, once).
    base = make_inv(0)
    assert base.first_byte_ns is not None
    fb = base.first_byte_ns + 761  # off the microsecond grid of start_ns
    tokens = [fb, fb + 1_999, fb + 5_000_123]
    early = replace(make_inv(1), token_times_ns=[make_inv(1).start_ns + 2_500])  # before its fb
    with Store(tmp_path / "r.sqlite") as s:
        run_ = begin_with(s, [replace(base, first_byte_ns=fb, token_times_ns=tokens), early])
        got = s.invocations(run_.id)
        arrays = s.token_times(run_.id, scenario=None)
    floor = [base.start_ns + (t - base.start_ns) // 1000 * 1000 for t in tokens]
    assert floor[0] < fb  # what the format holds
    assert got[0].token_times_ns == [fb, *floor[1:]]
    assert arrays[0].tolist() == [fb, *floor[1:]]
    # a token the provider timed before the first byte (far from it) is read as stored
    assert got[1].token_times_ns == [make_inv(1).start_ns + 2_000]
    assert arrays[1].tolist() == [make_inv(1).start_ns + 2_000]


def test_blob_is_the_documented_encoding(tmp_path: Path) -> None:
    inv = with_tokens(3, 4)
    with Store(tmp_path / "r.sqlite") as s:
        begin_with(s, [inv])
    conn = sqlite3.connect(tmp_path / "r.sqlite")
    start, blob, n, detail = conn.execute(
        "SELECT start_ns, token_us, length(token_us) / 4, detail FROM invocations"
    ).fetchone()
    conn.close()
    assert n == 4 and isinstance(blob, bytes)
    offsets_us = np.frombuffer(blob, "<u4")  # what a tool without gpubench would do
    assert (start + offsets_us.astype(np.int64) * 1000).tolist() == inv.token_times_ns
    assert decode_token_times(start, blob).tolist() == inv.token_times_ns
    assert json.loads(detail) == inv.detail


def test_exports_carry_tokens_and_detail(tmp_path: Path) -> None:
    invs = [with_tokens(0, 3), make_inv(1)]
    rows, text = exported(tmp_path / "r.sqlite", invs)
    assert rows[0]["token_times_ns"] == invs[0].token_times_ns
    assert rows[0]["detail"] == invs[0].detail
    assert rows[1]["token_times_ns"] is None and rows[1]["detail"] is None
    first, second = list(csv.DictReader(io.StringIO(text)))
    assert [int(t) for t in first["token_times_ns"].split()] == invs[0].token_times_ns
    assert json.loads(first["detail"]) == invs[0].detail
    assert second["token_times_ns"] == second["detail"] == ""


def make_v1_file(path: Path, invs: list[Invocation]) -> None:
    """A results file exactly as gpubench 1 wrote it: its DDL, its meta, its 22-column rows."""
    assert V1_DDL != DDL and "token_us" not in V1_DDL and "token_us" not in V1_INSERT
    assert "retry_after_s" not in V1_DDL and "status TEXT,\n    PRIMARY" not in V1_DDL
    assert "deployment_json" not in V1_DDL
    conn = sqlite3.connect(path, isolation_level=None)
    conn.executescript(V1_DDL)
    conn.executemany(
        "INSERT INTO meta VALUES (?, ?)",
        [
            ("schema_version", "1"),
            ("outcome_codes", json.dumps([o.value for o in Outcome])),
            ("phase_codes", json.dumps(["measure", "warmup"])),
        ],
    )
    conn.execute(
        "INSERT INTO runs (id, uuid, name, status, started_wall_ns, origin_ns, config_json)"
        " VALUES (1, 'c0ffee00-0000-0000-0000-000000000000', 'old', 'completed', ?, 0, '{}')",
        (1_700_000_000_123_456_789,),
    )
    conn.execute("INSERT INTO targets VALUES (1, 0, 'a', 'local', '{}', '[]')")
    conn.execute("INSERT INTO targets VALUES (1, 1, 'b', 'runpod', '{}', '[]')")
    conn.execute("INSERT INTO scenarios VALUES (1, 0, 'steady', '{}')")
    conn.execute("INSERT INTO scenarios VALUES (1, 1, 'burst', '{}')")
    for inv in invs:
        conn.execute(
            V1_INSERT,
            (
                1,
                "ab".index(inv.target),
                inv.scenario,
                inv.seq,
                0,
                inv.scheduled_ns,
                inv.start_ns,
                inv.first_byte_ns,
                inv.end_ns,
                inv.wall_start_ns - 1_700_000_000_123_456_789,
                0,
                inv.http_status,
                None,
                inv.request_id,
                inv.queue_ms,
                inv.execution_ms,
                inv.setup_ms,
                inv.cold,
                inv.cold_confirmed,
                inv.input_units,
                inv.output_units,
                inv.worker_id,
            ),
        )
    conn.close()


def _version(path: Path) -> str:
    conn = sqlite3.connect(path)
    try:
        return str(conn.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()[0])
    finally:
        conn.close()


def test_v1_file_reads_as_is_read_only_and_migrates_when_writable(tmp_path: Path) -> None:
    path = tmp_path / "v1.sqlite"
    old = [make_inv(i, target="ab"[i % 2]) for i in range(6)]
    make_v1_file(path, old)
    with Store(path, readonly=True) as s:
        assert s.invocations(1) == old
        assert [t.deployment for t in s.run(1).targets] == [None, None]
        assert s.columns(1, target="a")["seq"].tolist() == [0, 2, 4]
        assert [a.size for a in s.token_times(1, target="a")] == [0, 0, 0]
    assert _version(path) == "1"  # a reader never changes the file
    with Store(path) as s:
        assert _version(path) == "4"
        assert s.invocations(1) == old
        s.record_deployment(1, "a", {"scaling": {"min_workers": 0}})
        assert s.run(1).targets[0].deployment == {"scaling": {"min_workers": 0}}
        new = begin_with(s, [with_tokens(7, 4)])
        assert s.invocations(new.id) == [with_tokens(7, 4)]
    conn = sqlite3.connect(path)
    assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    conn.close()
    with Store(path, readonly=True) as s:  # a migrated file reads like a new one
        assert s.invocations(1) == old


def test_a_newer_file_is_still_refused(tmp_path: Path) -> None:
    path = tmp_path / "r.sqlite"
    with Store(path) as s:
        begin(s)
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("UPDATE meta SET value = '5' WHERE key = 'schema_version'")
    conn.close()
    with pytest.raises(StoreError, match="version 5 is newer"):
        Store(path, readonly=True)


# -- the runner ------------------------------------------------------------------------------


class Streaming(Provider):
    """Answers the echo probe with token times on our clock, one set off it, and a detail."""

    name = "streaming"

    def __init__(self, mode: str, **kw: Any) -> None:
        super().__init__(**kw)
        self.mode = mode

    async def invoke(self, request: Request) -> Result:
        times = []
        for _ in range(4):
            await anyio.sleep(0.002)
            times.append(time.perf_counter_ns())
        if self.mode == "wall":  # a plugin that used the wrong clock
            times = [time.time_ns() for _ in times]
        detail = {"from": "provider", "variant": "v1"} if self.mode == "detail" else None
        return Result(
            output={"echo": request.payload["echo"]},
            first_byte_ns=times[0],
            token_times_ns=times,
            detail=detail,
        )


class ProbeWithDetail(EchoProbe):
    name = "probe-detail"

    def detail(self, output: Any) -> dict[str, Any] | None:
        return {"from": "workload", "echo_len": len(output["echo"])}


async def test_runner_stores_token_times_on_the_run_clock_and_detail(tmp_path: Path) -> None:
    targets = {"ok": Streaming("ok"), "wall": Streaming("wall"), "det": Streaming("detail")}
    result = await run(targets, ProbeWithDetail(), [Burst(6, 2)], store=tmp_path / "r.sqlite")
    with Store(result.store_path, readonly=True) as s:
        invs = s.invocations(result.run.id)
        by = {name: [i for i in invs if i.target == name] for name in targets}
        for inv in by["ok"]:
            assert inv.token_times_ns is not None and len(inv.token_times_ns) == 4
            assert inv.start_ns <= inv.token_times_ns[0] <= inv.token_times_ns[-1] <= inv.end_ns
            assert inv.first_byte_ns is not None
            # the first token came with the first byte: it reads back at it, to the ns
            assert inv.token_times_ns[0] == inv.first_byte_ns
            floor_us = (inv.token_times_ns[1] - inv.start_ns) // 1000 * 1000
            assert inv.token_times_ns[1] == inv.start_ns + floor_us
            assert inv.detail == {"from": "workload", "echo_len": 16}
        assert all(i.token_times_ns is None for i in by["wall"])
        # both kept; the workload's reading wins a clash of keys
        assert all(
            i.detail == {"from": "workload", "echo_len": 16, "variant": "v1"} for i in by["det"]
        )
        stream = run_stream_metrics(s, result.run, target="ok", scenario=0)
        assert stream.output_tokens.tolist() == [4] * 6
        assert np.all(stream.ttft_ms > 0) and np.all(stream.itl_ms >= 1.5)
        rows = {r.target: r for r in summarize(s, result.run)}
    assert rows["ok"].streamed == 6 and rows["wall"].streamed == 0
    assert rows["ok"].ttft_p50_ms == pytest.approx(np.median(stream.ttft_ms))
    assert rows["ok"].itl_p50_ms == pytest.approx(np.median(stream.itl_ms))
    assert rows["ok"].output_tokens_per_s > 0 and math.isnan(rows["wall"].ttft_p50_ms)
    console = Console(width=250, record=True)
    console.print(render(list(rows.values()), "t"))
    assert "TTFT p50 ms" in console.export_text()


def test_goodput_ttft_is_the_first_token_where_tokens_are_stored(tmp_path: Path) -> None:
    # first byte 80-92 ms after the send (make_inv), first token 200 ms after the first byte
    streamed = [replace(with_tokens(i, 3), token_times_ns=None) for i in range(0, 8, 2)]
    streamed = [
        replace(
            inv,
            token_times_ns=[inv.first_byte_ns + 200_000_000 + k for k in (0, 1000)],
            end_ns=inv.first_byte_ns + 300_000_000,
        )
        for inv in streamed
        if inv.first_byte_ns is not None
    ]
    with Store(tmp_path / "r.sqlite") as s:
        run_ = begin_with(s, [*streamed, make_inv(1), make_inv(3)])
        slo = SLO(ttft_ms=150)
        streaming = run_throughput(s, run_, target="a", scenario=0, slo=slo)
        plain = run_throughput(s, run_, target="a", scenario=1, slo=slo)
    assert streaming.ok == 4 and streaming.good == 0  # TTFB alone (~90 ms) would pass
    assert plain.ok == 2 and plain.good == 2


def test_token_encoding_takes_arrays_and_warns_when_it_cannot_store(
    caplog: pytest.LogCaptureFixture,
) -> None:
    from gpubench_sdk._store._schema import encode_token_times

    blob = encode_token_times(0, np.array([1_000, 2_000]))  # a plugin may hand numpy arrays
    assert decode_token_times(0, blob).tolist() == [1_000, 2_000]
    assert encode_token_times(0, np.array([], dtype=np.int64)) is None
    with caplog.at_level("WARNING", logger="gpubench.store"):
        assert encode_token_times(0, [1, 72 * 60 * 10**9]) is None  # past uint32 microseconds
    assert "71 minutes" in caplog.text


def test_short_lists_of_token_times_encode_as_arrays_do() -> None:
    """The runner's short lists take a path without numpy: the same bytes as numpy's."""
    from gpubench_sdk._store._schema import encode_token_times

    rng = np.random.default_rng(3)
    for n in (1, 2, 16, 64, 65):
        for _ in range(50):
            start = int(rng.integers(-(10**12), 10**12))
            times = [start + int(t) for t in rng.integers(-3_000, 5 * 10**9, n)]
            assert encode_token_times(start, times) == encode_token_times(start, np.array(times))


def test_detail_is_strict_json_that_sqlite_can_read(tmp_path: Path) -> None:
    from types import MappingProxyType

    path = tmp_path / "d.sqlite"
    with Store(path) as s:
        info = begin(s)
        detail = MappingProxyType({"tflops": math.nan, "peak": math.inf, "per": [1.5, -math.inf]})
        s.append(info.id, replace(make_inv(0), detail=detail))
        s.flush()
        [inv] = s.invocations(info.id)
    assert inv.detail == {"tflops": None, "peak": None, "per": [1.5, None]}
    conn = sqlite3.connect(path)
    assert conn.execute("SELECT json_extract(detail, '$.per[0]') FROM invocations").fetchone() == (
        1.5,
    )
    conn.close()
