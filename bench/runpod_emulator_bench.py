"""How much latency the RunPod plugin adds over the emulator's own phases, on loopback.

    python bench/runpod_emulator_bench.py [requests]

Sends warm sequential requests (sleep_ms=0) in each mode and prints the client latency and
the part of it not covered by RunPod's delayTime + executionTime (HTTP, JSON and, in "run"
mode, the wait for the next /status poll). Run by hand; nothing here is asserted.
"""

from __future__ import annotations

import asyncio
import statistics
import sys
import time

from gpubench_runpod import RunPodProvider
from gpubench_runpod.emulator import make_app

from gpubench_sdk import Request
from gpubench_sdk.testing import Duration, FleetConfig, SimulatedFleet, serve

KEY = "bench-key-1234"


async def measure(url: str, mode: str, n: int) -> tuple[list[float], list[float]]:
    provider = RunPodProvider(
        api_key=KEY,
        endpoint_id="bench",
        base_url=f"{url}/v2",
        rest_url=f"{url}/v1",
        mode=mode,
        poll_interval_s=0.005,
        poll_max_interval_s=0.05,
    )
    latencies_ms, overheads_ms = [], []
    async with provider:
        await provider.invoke(Request(seq=-1, payload={"sleep_ms": 0}))  # boot a worker
        for seq in range(n):
            start = time.perf_counter()
            result = await provider.invoke(Request(seq=seq, payload={"sleep_ms": 0}))
            latency_ms = (time.perf_counter() - start) * 1e3
            phases_ms = (result.queue_ms or 0) + (result.execution_ms or 0)
            latencies_ms.append(latency_ms)
            overheads_ms.append(latency_ms - phases_ms)
    return latencies_ms, overheads_ms


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 300
    config = FleetConfig(cold_start=Duration.fixed(0.05), idle_timeout_s=60)
    with serve(make_app(SimulatedFleet(config), api_key=KEY, endpoint_id="bench")) as served:
        for mode in ("run", "runsync"):
            lat, over = asyncio.run(measure(served.url, mode, n))
            q = statistics.quantiles(lat, n=100)
            print(
                f"{mode:8s} n={n} latency p50={q[49]:.2f} ms p99={q[98]:.2f} ms; "
                f"not covered by delayTime+executionTime p50={statistics.median(over):.2f} ms"
            )


if __name__ == "__main__":
    main()
