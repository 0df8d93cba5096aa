"""Profile your own handler's cold start on this machine before deploying it.

Run: python examples/own_handler.py [STORE]

The local runtime starts real worker processes that import `examples/my_handler.py` and run its
`load()`, so the cold start measured here is your code's share of a serverless cold start
(interpreter + imports + load); a GPU platform adds its own scheduling and image pull on top.
"""

from __future__ import annotations

import sys
from pathlib import Path

import anyio

import gpubench_sdk as gb

HERE = Path(__file__).resolve().parent


async def main(store: str) -> None:
    provider = gb.LocalProvider(
        handler="my_handler:predict",
        load="my_handler:load",
        env={"PYTHONPATH": str(HERE)},  # where the workers find my_handler
        max_workers=2,
    )
    result = await gb.run(
        {"mine": provider},
        gb.EchoProbe(sleep_ms=5),
        [gb.ColdStarts(3, warm_after=3)],
        store=store,
        name="own-handler",
    )
    with gb.Store(store) as s:
        cold = [i for i in s.invocations(result.run_id) if i.cold]
        (row,) = gb.summarize(s, result.run)
    boots = ", ".join(f"{i.setup_ms:.0f}" for i in cold if i.setup_ms is not None)
    print(f"worker boot (process + imports + load) ms: {boots}")
    print(f"cold start p50: {row.cold_start_p50_ms:.0f} ms; warm p50: {row.p50_ms:.1f} ms")


if __name__ == "__main__":
    anyio.run(main, sys.argv[1] if len(sys.argv) > 1 else "own-handler.sqlite")
