"""What the Cloud Run and SageMaker plugins cost per request, on loopback, against their
emulators with warm workers and zero execution time.

    python bench/cloud_plugins_bench.py [requests]

For each plugin: sequential latency (p50, p99) and the rate at 32 concurrent requests. The
SageMaker plugin runs boto3 in worker threads (signing, urllib3, parsing); the Cloud Run
plugin sends through gpubench's HTTP client on the loop, with a cached ID token. Run by hand;
nothing here is asserted.
"""

from __future__ import annotations

import asyncio
import statistics
import sys
import time
from typing import Any

from gpubench_cloudrun import CloudRunProvider
from gpubench_cloudrun.emulator import DEFAULT_SERVICE
from gpubench_cloudrun.emulator import make_app as cloudrun_app
from gpubench_sagemaker import SageMakerProvider
from gpubench_sagemaker.emulator import DEFAULT_ENDPOINT
from gpubench_sagemaker.emulator import make_app as sagemaker_app

from gpubench_sdk import Provider, Request
from gpubench_sdk.testing import Duration, FleetConfig, SimulatedFleet, serve

TOKEN = "bench-id-token-1234"
KEY_ID, SECRET = "AKIABENCH00000000001", "bench-secret-1234"
CONCURRENCY = 32


def fleet() -> SimulatedFleet:
    config = FleetConfig(
        cold_start=Duration.fixed(0.01),
        min_workers=CONCURRENCY,
        max_workers=CONCURRENCY,
        idle_timeout_s=600,
    )
    return SimulatedFleet(config)


async def measure(provider: Provider, n: int) -> tuple[list[float], float]:
    def request(seq: int) -> Request:
        return Request(seq=seq, payload={"echo": "b", "sleep_ms": 0})

    async with provider:
        for seq in range(20):  # warm the connections, threads and token
            await provider.invoke(request(seq))
        latencies_ms = []
        for seq in range(n):
            start = time.perf_counter()
            await provider.invoke(request(seq))
            latencies_ms.append((time.perf_counter() - start) * 1e3)
        queue = list(range(n))

        async def worker() -> None:
            while queue:
                await provider.invoke(request(queue.pop()))

        start = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(CONCURRENCY)))
        rate = n / (time.perf_counter() - start)
    return latencies_ms, rate


def report(name: str, n: int, result: tuple[list[float], float]) -> None:
    latencies_ms, rate = result
    q = statistics.quantiles(latencies_ms, n=100)
    print(
        f"{name:10s} n={n} sequential p50={q[49]:.2f} ms p99={q[98]:.2f} ms; "
        f"{CONCURRENCY} concurrent: {rate:.0f} requests/s"
    )


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 500
    with serve(cloudrun_app(fleet(), api_key=TOKEN)) as served:
        options: dict[str, Any] = {
            "service": DEFAULT_SERVICE,
            "admin_endpoint": served.url,
            "admin_login": "anonymous",
        }
        report("cloudrun", n, asyncio.run(measure(CloudRunProvider(api_key=TOKEN, **options), n)))
    with serve(sagemaker_app(fleet(), credentials={KEY_ID: SECRET})) as served:
        provider = SageMakerProvider(
            endpoint_name=DEFAULT_ENDPOINT,
            region="us-east-1",
            aws_access_key_id=KEY_ID,
            api_key=SECRET,
            runtime_url=served.url,
            control_url=served.url,
        )
        report("sagemaker", n, asyncio.run(measure(provider, n)))


if __name__ == "__main__":
    main()
