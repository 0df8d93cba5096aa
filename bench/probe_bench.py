"""What the GPU probe costs where it runs: import time, and the quick probe's wall time.

    python bench/probe_bench.py [--repeats 5] [--backend auto]

Import time is what a serving container pays on every cold start before the probe can
answer: ``import gpubench_sdk.probe`` in a fresh interpreter (the whole package is lazy, so
this is numpy plus the probe's own modules), and ``import gpubench_sdk`` alone. Targets:
``import gpubench_sdk`` < 0.1 s; a quick probe < 20 s on a large GPU, a few seconds on a CPU.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def import_s(module: str) -> float:
    code = f"import time; t = time.perf_counter(); import {module}; print(time.perf_counter() - t)"
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT
    )
    return float(done.stdout)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--backend", default="auto")
    args = parser.parse_args()
    for module in ("gpubench_sdk", "gpubench_sdk.probe"):
        times_ms = [import_s(module) * 1e3 for _ in range(args.repeats)]
        median_ms = statistics.median(times_ms)
        print(f"import {module}: median {median_ms:.0f} ms "
              f"(min {min(times_ms):.0f}, max {max(times_ms):.0f}, n={len(times_ms)})")  # fmt: skip
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "gpubench_sdk.probe", "--quick", "--backend", args.backend],
        capture_output=True, text=True, check=True, cwd=ROOT,
    )  # fmt: skip
    wall_s = time.perf_counter() - started
    result = json.loads(done.stdout)
    print(f"quick probe ({result['backend']}): {wall_s:.1f} s wall, "
          f"{result['elapsed_s']:.1f} s inside, errors={result['errors']}")  # fmt: skip
    for dtype, entry in result.get("matmul", {}).items():
        tflops = entry["throughput_tflop_per_s"]
        print(f"  matmul {dtype} n={entry['n']}: {tflops['median']:.4g} TFLOP/s "
              f"(cv {tflops['cv']:.2f}), of peak {entry['fraction_of_peak']}")  # fmt: skip


if __name__ == "__main__":
    main()
