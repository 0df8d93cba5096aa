"""Time and size of ``gpubench report`` for a large run.

    python bench/report_bench.py [-n 100000] [--targets 2]

Writes a synthetic run (``n`` requests per target: a cold-start scenario and a burst, streamed
tokens on the first target) to a temporary store, then times ``build_report`` and each format's
rendering, and prints the HTML page's size. Target (issue 8): a report of 100,000 requests per
target builds in seconds and stays a page a browser opens at once (chart points are capped at
2,000 per series, box-plot outliers at 200 per box).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # run from a checkout without installing
    sys.path.insert(0, str(ROOT))

from gpubench_sdk import Invocation, Outcome, Phase, Store  # noqa: E402
from gpubench_sdk._report import FORMATS, build_report, render  # noqa: E402
from gpubench_sdk._store._store import ScenarioRecord, TargetRecord  # noqa: E402

MS = 1_000_000


def write_run(path: Path, n: int, targets: int) -> None:
    rng = np.random.default_rng(0)
    names = [f"t{i}" for i in range(targets)]
    with Store(path) as store:
        run = store.begin_run(
            name="bench", config={"targets": [{"name": t} for t in names]},
            targets=[TargetRecord(t, "local") for t in names],
            scenarios=(ScenarioRecord("cold_starts"), ScenarioRecord("burst")),
            origin_ns=0, started_wall_ns=1_767_225_600 * 10**9,
        )  # fmt: skip
        for k, target in enumerate(names):
            for i in range(n):
                cold = i < n // 100
                start = i * 2 * MS
                latency = float(rng.lognormal(np.log(120), 0.3)) + (3_000 if cold else 0)
                tokens = None
                if k == 0:
                    tokens = [start + int((40 + 5 * j) * MS) for j in range(8)]
                    latency = max(latency, 90.0)
                store.append(run.id, Invocation(
                    target=target, scenario=0 if cold else 1, seq=i, phase=Phase.MEASURE,
                    scheduled_ns=start, start_ns=start, end_ns=start + int(latency * MS),
                    wall_start_ns=1_767_225_600 * 10**9 + start, outcome=Outcome.OK,
                    cold=cold, cold_confirmed=cold, execution_ms=100.0,
                    queue_ms=3_000.0 if cold else 1.0, setup_ms=2_900.0 if cold else None,
                    token_times_ns=tokens,
                ))  # fmt: skip
        store.end_run(run.id, "completed")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("-n", type=int, default=100_000, help="requests per target")
    parser.add_argument("--targets", type=int, default=2)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "bench.sqlite"
        t0 = time.perf_counter()
        write_run(path, args.n, args.targets)
        print(f"wrote {args.n:,} x {args.targets} requests in {time.perf_counter() - t0:.1f} s")
        with Store(path, readonly=True) as store:
            t0 = time.perf_counter()
            report = build_report(store, ["latest"])
            print(f"build_report: {time.perf_counter() - t0:.2f} s")
        for fmt in FORMATS:
            t0 = time.perf_counter()
            text = render(report, fmt)
            print(f"render {fmt}: {time.perf_counter() - t0:.3f} s, {len(text) / 1e6:.2f} MB")


if __name__ == "__main__":
    main()
