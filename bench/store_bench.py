"""Write throughput and size of the results store, with realistic invocations.

    python bench/store_bench.py [-n 200000] [--flush-interval 0.5] [--keep PATH]
    python bench/store_bench.py --intervals 0,0.05,0.5 [-n 50000] [--rate 2000 --paced-s 3]

Measures what the runner's hot path costs (``Store.append`` on the calling thread, while the
writer thread commits concurrently), end-to-end committed samples/s (first append to the return
of ``flush``), bytes per stored sample (file size incl. WAL and indexes, after a checkpoint), and
how fast a run reads back. Targets: >= 50,000 samples/s committed, <= 300 bytes/sample.

``--intervals`` measures what a shorter commit window (``flush_interval_s``; 0 = every request
is committed as it ends) costs, against the default 0.5 s: the firehose figures above, and a
paced run at ``--rate`` requests/s (as a benchmark appends them) counting the commits and the
process's CPU time per 1,000 requests (appending, committing and the pacing loop together).
"""

from __future__ import annotations

import argparse
import os
import sqlite3
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # run from a checkout without installing
    sys.path.insert(0, str(ROOT))

from gpubench_sdk._base._types import Invocation, Outcome, Phase  # noqa: E402
from gpubench_sdk._store._store import ScenarioRecord, Store, TargetRecord  # noqa: E402

WALL0 = 1_700_000_000_000_000_000


def realistic(n: int) -> list[Invocation]:
    """``n`` invocations spread over one hour: 2 targets, ~1% errors, 36-char request ids,
    12-char worker ids, server-reported floats with full precision."""
    step = 3_600_000_000_000 // n
    out = []
    for i in range(n):
        sched = i * step
        start = sched + 30_000 + (i * 7919) % 200_000
        first = start + 60_000_000 + (i * 104_729) % 90_000_000
        failed = i % 97 == 0
        out.append(
            Invocation(
                target="runpod-a100" if i % 2 else "modal-h100",
                scenario=i * 3 // n,
                seq=i,
                phase=Phase.WARMUP if i < 100 else Phase.MEASURE,
                scheduled_ns=sched,
                start_ns=start,
                end_ns=first + 15_000_000 + (i * 31) % 5_000_000,
                wall_start_ns=WALL0 + start + 977,
                outcome=Outcome.HTTP_5XX if failed else Outcome.OK,
                first_byte_ns=None if failed else first,
                http_status=503 if failed else 200,
                error="HTTP 503: upstream worker unavailable" if failed else None,
                request_id=str(uuid.uuid4()),
                queue_ms=None if failed else 1.5 + (i % 1000) / 333.0,
                execution_ms=None if failed else 60.0 + (i % 977) / 11.0,
                setup_ms=None,
                cold=(i % 500 == 0) if i % 3 else None,
                cold_confirmed=i % 1000 == 0,
                input_units=512 + i % 64,
                output_units=128 + i % 128,
                worker_id=f"w-{(i % 24) * 7_777_777:09x}"[:12],
            )
        )
    return out


def _begin(store: Store, n: int) -> int:
    return store.begin_run(
        name="bench",
        config={"n": n},
        targets=[TargetRecord("modal-h100", "modal"), TargetRecord("runpod-a100", "runpod")],
        scenarios=[ScenarioRecord(k, {}) for k in ("cold", "steady", "burst")],
        origin_ns=0,
        started_wall_ns=WALL0,
    ).id


def firehose(invs: list[Invocation], interval: float, tmp: Path) -> tuple[float, float, float]:
    """Committed samples/s end to end, append p50 and p99 (us), appending as fast as possible."""
    path = tmp / f"firehose-{interval}.sqlite"
    store = Store(path, flush_interval_s=interval)
    run_id, clock, n = _begin(store, len(invs)), time.perf_counter_ns, len(invs)
    per_call = [0] * n
    t0 = clock()
    for i, inv in enumerate(invs):
        a = clock()
        store.append(run_id, inv)
        per_call[i] = clock() - a
    store.flush()
    t2 = clock()
    store.close()
    per_call.sort()
    return n / ((t2 - t0) / 1e9), per_call[n // 2] / 1e3, per_call[n * 99 // 100] / 1e3


def paced(invs: list[Invocation], interval: float, rate: float, tmp: Path) -> tuple[int, float]:
    """Commits made and CPU ms per 1,000 requests, appending at ``rate`` per second."""
    path = tmp / f"paced-{interval}.sqlite"
    commits = [0]
    store = Store(path, flush_interval_s=interval)
    original = store._commit

    def counted(*args: object) -> None:
        commits[0] += 1
        original(*args)  # type: ignore[arg-type]

    store._commit = counted  # type: ignore[method-assign]
    run_id = _begin(store, len(invs))
    gap = 1.0 / rate
    cpu0, start = time.process_time(), time.perf_counter()
    for i, inv in enumerate(invs):
        due = start + i * gap
        while (now := time.perf_counter()) < due:
            time.sleep(min(due - now, 0.001))
        store.append(run_id, inv)
    store.flush()
    cpu = time.process_time() - cpu0
    store.close()
    return commits[0], cpu * 1e3 / (len(invs) / 1000)


def compare_intervals(intervals: list[float], n: int, rate: float, paced_s: float) -> None:
    invs = realistic(n)
    slow = realistic(max(1, int(rate * paced_s)))
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        for interval in intervals:
            results[interval] = (*firehose(invs, interval, Path(tmp)),
                                 *paced(slow, interval, rate, Path(tmp)))  # fmt: skip
    base = results[max(intervals)]
    print(f"flush_interval_s cost  (n={n:,} firehose; {len(slow):,} at {rate:,.0f}/s paced; "
          f"python {sys.version.split()[0]}, sqlite {sqlite3.sqlite_version}, "
          f"{os.cpu_count()} cpus; ratios against {max(intervals):g} s)")  # fmt: skip
    print(f"  {'interval':>9} {'committed/s':>12} {'ratio':>6} {'append p50':>11} "
          f"{'p99':>8} {'ratio':>6} {'commits':>8} {'CPU ms/1k':>10} {'ratio':>6}")  # fmt: skip
    for interval, (rate_, p50, p99, commits, cpu) in results.items():
        print(f"  {interval:>8g}s {rate_:>12,.0f} {rate_ / base[0]:>6.2f} {p50:>9.2f}us "
              f"{p99:>6.1f}us {p99 / base[2]:>6.2f} {commits:>8,} {cpu:>10.1f} "
              f"{cpu / base[4]:>6.2f}")  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-n", type=int, default=200_000)
    ap.add_argument("--flush-interval", type=float, default=0.5)
    ap.add_argument("--keep", type=Path, help="write the store here instead of a temp dir")
    ap.add_argument("--intervals", help="compare commit windows, e.g. 0,0.05,0.5")
    ap.add_argument("--rate", type=float, default=2000.0, help="paced appends per second")
    ap.add_argument("--paced-s", type=float, default=3.0, help="seconds of paced appends")
    args = ap.parse_args()
    if args.intervals:
        intervals = [float(x) for x in args.intervals.split(",")]
        compare_intervals(intervals, args.n, args.rate, args.paced_s)
        return
    n: int = args.n
    invs = realistic(n)
    with tempfile.TemporaryDirectory() as tmp:
        path: Path = args.keep or Path(tmp) / "bench.sqlite"
        path.unlink(missing_ok=True)
        store = Store(path, flush_interval_s=args.flush_interval)
        append, run_id, clock = store.append, _begin(store, n), time.perf_counter_ns
        per_call = [0] * n
        t0 = clock()
        for i, inv in enumerate(invs):
            a = clock()
            append(run_id, inv)
            per_call[i] = clock() - a
        t1 = clock()
        store.flush()
        t2 = clock()
        wal = Path(f"{path}-wal")
        with_wal = path.stat().st_size + (wal.stat().st_size if wal.exists() else 0)
        store.close()  # the last connection checkpoints and removes the WAL
        size = path.stat().st_size + (wal.stat().st_size if wal.exists() else 0)

        with Store(path, readonly=True) as reader:
            r0 = clock()
            cols = reader.columns(run_id, phase=None)
            r1 = clock()
            back = reader.invocations(run_id)
            r2 = clock()
        assert len(cols["seq"]) == n and back == invs, "read-back mismatch"
        conn = sqlite3.connect(path)
        ok = conn.execute("PRAGMA integrity_check").fetchone()[0]
        conn.close()

    per_call.sort()
    rows = [
        ("samples", f"{n:,}", ""),
        ("append, caller thread", f"{n / ((t1 - t0) / 1e9):,.0f}/s", "incl. timing overhead"),
        ("append latency p50", f"{per_call[n // 2] / 1e3:.2f} us", ""),
        ("append latency p99", f"{per_call[n * 99 // 100] / 1e3:.2f} us", ""),
        ("append latency mean", f"{statistics.fmean(per_call) / 1e3:.2f} us", ""),
        ("append latency max", f"{per_call[-1] / 1e3:.0f} us", "GIL shared with writer"),
        ("committed end to end", f"{n / ((t2 - t0) / 1e9):,.0f}/s", "first append to flush()"),
        ("flush after last append", f"{(t2 - t1) / 1e6:.0f} ms", "writer backlog"),
        ("bytes/sample", f"{size / n:.1f}", "file after checkpoint, incl. indexes"),
        ("bytes/sample before ckpt", f"{with_wal / n:.1f}", "db + WAL"),
        ("read columns()", f"{n / ((r1 - r0) / 1e9):,.0f}/s", ""),
        ("read invocations()", f"{n / ((r2 - r1) / 1e9):,.0f}/s", ""),
        ("integrity_check", ok, ""),
    ]
    print(f"gpubench store bench  (python {sys.version.split()[0]}, sqlite "
          f"{sqlite3.sqlite_version}, {os.cpu_count()} cpus)")  # fmt: skip
    for name, value, note in rows:
        print(f"  {name:<26} {value:>14}  {note}")


if __name__ == "__main__":
    main()
