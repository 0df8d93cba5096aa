"""The quickstart from Python: cold starts and a burst against the local runtime.

Run: python examples/quickstart.py [STORE]
"""

from __future__ import annotations

import sys

import anyio

import gpubench_sdk as gb


async def main(store: str) -> None:
    result = await gb.run(
        {"local": gb.LocalProvider(idle_timeout_s=5.0, max_workers=4)},  # starts its own runtime
        gb.EchoProbe(sleep_ms=20),
        [gb.ColdStarts(2, warm_after=2), gb.Burst(total=100, concurrency=5)],
        store=store,
        name="quickstart-py",
    )
    with gb.Store(store) as s:
        for row in gb.summarize(s, result.run):
            print(
                f"{row.target:8} {row.scenario:14} n={row.requests:4} ok={row.ok:4} "
                f"p50={row.p50_ms:8.1f} ms  p95={row.p95_ms:8.1f} ms  "
                f"cold start p50={row.cold_start_p50_ms:8.1f} ms"
            )


if __name__ == "__main__":
    anyio.run(main, sys.argv[1] if len(sys.argv) > 1 else "quickstart-py.sqlite")
