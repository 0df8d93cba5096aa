"""Speed of the metrics library on large inputs.

    python bench/metrics_bench.py [-n 10000000] [--parts 1000] [--repeat 5]

Targets (issue 3): a summary of 10 million samples in under one second, and a merge of 1,000
partial histograms in under 100 ms. Each figure is the best and the median of ``--repeat``
timed calls after a first call, reported apart (its first touch of fresh memory costs page
faults that later calls do not pay).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # run from a checkout without installing
    sys.path.insert(0, str(ROOT))

from gpubench_sdk import metrics  # noqa: E402


def timed(fn: Callable[[], Any], repeat: int) -> tuple[float, float, float]:
    t0 = time.perf_counter()
    fn()
    first = time.perf_counter() - t0
    runs = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        runs.append(time.perf_counter() - t0)
    return first, min(runs), statistics.median(runs)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", type=int, default=10_000_000)
    parser.add_argument("--parts", type=int, default=1_000)
    parser.add_argument("--part-size", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    x = rng.lognormal(np.log(200), 1.0, args.n)  # latency-like: 200 ms median, long tail
    parts = [
        metrics.LogHistogram.from_values(rng.lognormal(np.log(200), 1.0, args.part_size))
        for _ in range(args.parts)
    ]
    wire = [p.to_bytes() for p in parts]
    a, b = x[:100_000], x[100_000:200_000] * 1.01
    cases: list[tuple[str, Callable[[], Any]]] = [
        (f"summarize_samples, {args.n:,} samples (auto: order-statistic CIs)",
         lambda: metrics.summarize_samples(x)),
        (f"summarize_samples, {args.n:,} samples, bootstrap CIs (B=2000)",
         lambda: metrics.summarize_samples(x, ci_method="bootstrap")),
        (f"merge_histograms, {args.parts:,} partials of {args.part_size:,} values",
         lambda: metrics.merge_histograms(parts)),
        (f"decode {args.parts:,} partials from bytes + merge",
         lambda: metrics.merge_histograms(metrics.LogHistogram.from_bytes(w) for w in wire)),
        (f"LogHistogram.from_values, {args.n:,} samples",
         lambda: metrics.LogHistogram.from_values(x)),
        ("compare, 100,000 vs 100,000 (bootstrap B=2000 + Mann-Whitney U)",
         lambda: metrics.compare(a, b)),
    ]  # fmt: skip
    merged = metrics.merge_histograms(parts)
    print(
        f"merged histogram: {merged.count:,} values, {len(merged.to_bytes()):,} bytes on the wire"
    )
    print("| operation | first call | best | median |")
    print("|---|---|---|---|")
    for name, fn in cases:
        first, best, median = timed(fn, args.repeat)
        print(f"| {name} | {first * 1e3:,.1f} ms | {best * 1e3:,.1f} ms | {median * 1e3:,.1f} ms |")


if __name__ == "__main__":
    main()
