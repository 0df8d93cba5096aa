"""Two targets, one report that says which is better: cold start, burst latency, cost per day.

Run: python examples/compare_report.py [OUTPUT.html]

Two local runtimes stand in for two providers: "echo" answers at once (its cold start is the
worker's process start), "model" loads the demo model first (a longer cold start). Each is
priced, so the report's cost question compares them too. The page opens with one chart per
question, every target on it, under a verdict; then the details. Run the same plan on several
days (``gpubench campaign``) and the report adds the variability question.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

import anyio

import gpubench_sdk as gb

PLAN = {
    "run": {"name": "compare-report"},
    "workload": {"kind": "probe", "sleep_ms": 20},
    "targets": [
        {"name": "echo", "provider": "local", "handler": "gpubench_sdk.demo:echo",
         "load": "", "max_workers": 3, "idle_timeout_s": 1.0, "price_per_s_usd": 0.0004},
        {"name": "model", "provider": "local", "handler": "gpubench_sdk.demo:predict",
         "max_workers": 3, "idle_timeout_s": 1.0, "price_per_s_usd": 0.0003},
    ],
    "scenarios": [
        {"kind": "cold_starts", "n": 2, "warm_after": 2},
        {"kind": "burst", "total": 30, "concurrency": 3},
    ],
}  # fmt: skip


def main(output: str) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        store_path = Path(tmp) / "compare.sqlite"
        runner = gb.build_run(gb.RunConfig.model_validate(PLAN), store=store_path)
        result = anyio.run(runner.run)
        with gb.Store(store_path, readonly=True) as store:
            report = gb.build_report(
                store, [result.run.id], traffic=gb.DailyTraffic(requests_per_day=2000)
            )
    Path(output).write_text(gb.render_report(report, "html"), encoding="utf-8")
    for row in report.tables["comparison"]:
        print(f"{row['question']}: {row['verdict']}")
    print(f"wrote {output}")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "compare-report.html")
