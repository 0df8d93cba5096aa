"""A plan's load from Ray actors, from Python: live per-target counts, then where it ran.

Run (a Ray cluster and the emulator running, as examples/ray_emulated.toml says):
    python examples/ray_from_python.py [PLAN] [RAY_ADDRESS]
"""

from __future__ import annotations

import sys
from collections import Counter
from pathlib import Path

import gpubench_sdk as gb

PLAN = Path(__file__).with_name("ray_emulated.toml")


def main(plan: str | Path = PLAN, address: str = "auto") -> gb.RunResult:
    config = gb.load_config(plan)
    done: Counter[str] = Counter()  # every worker's requests, as the driver stores them
    result = gb.run_on_ray(
        config, address=address, observers=[lambda inv: done.update([inv.target])]
    )
    print(f"run {result.run.id}: {result.status}, {sum(done.values())} requests {dict(done)}")
    with gb.Store(result.store_path, readonly=True) as store:
        for row in gb.summarize(store, result.run):
            print(f"{row.target:8} {row.scenario:10} n={row.requests:4} p50={row.p50_ms:7.1f} ms")
    for w in result.run.config["ray"]["workers"]:
        print(
            f"{w['name']} on {w['node_ip']} ({w['host']}): clock offset "
            f"{w['clock_offset_ms']:+.3f} ms, exact to +-{w['rtt_ms'] / 2:.3f} ms"
        )
    return result


if __name__ == "__main__":
    main(*sys.argv[1:3])
