"""The Hugging Face and Inferless plugins against a minimal raw aiohttp client, on their emulators.

Each emulator runs in its own process (``python -m gpubench_huggingface.emulator`` /
``gpubench_inferless.emulator``), so its CPU is not ours. For each case the same requests go
through the plugin's ``invoke`` and through a raw aiohttp client posting the same body, one
after the other, at the same concurrency, warm (a first request boots the replica). Reported:
requests/s, median latency (median time to first token for the stream) and client CPU time per
request (``time.process_time`` over the run). The ratios say what a plugin costs over the least
a Python client can do; the CPU figure is the plugin's share of a load generator's core.

    python bench/hf_inferless_bench.py                          # defaults below
    python bench/hf_inferless_bench.py --requests 2000 --concurrency 32
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from typing import Any

import aiohttp
from gpubench_huggingface import HuggingFaceProvider
from gpubench_huggingface._protocol import tgi_body, toolkit_body
from gpubench_inferless import InferlessProvider
from gpubench_inferless._kserve import encode_inputs
from gpubench_inferless.emulator import infer_url

from gpubench_sdk import Provider, Request

KEY = "bench-key-0000"


def start(module: str, *extra: str) -> tuple[subprocess.Popen[str], str]:
    env = {**os.environ, "BENCH_KEY": KEY}
    cmd = [sys.executable, "-m", module, "--port", "0", "--api-key-env", "BENCH_KEY", *extra]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True, env=env)
    assert proc.stdout is not None
    return proc, proc.stdout.readline().strip()


async def drive(
    one: Callable[[int], Awaitable[float]], requests: int, concurrency: int
) -> dict[str, float]:
    """Run ``requests`` calls of ``one`` (returning its latency in ms) ``concurrency`` at a time."""
    await one(-1)  # warm: boots the replica and opens a connection
    todo = iter(range(requests))
    latencies: list[float] = []

    async def worker() -> None:
        for seq in todo:
            latencies.append(await one(seq))

    cpu, wall = time.process_time(), time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    return {
        "req_s": requests / wall,
        "p50_ms": statistics.median(latencies),
        "cpu_ms_per_req": cpu / requests * 1e3,
    }


async def plugin_case(provider: Provider, request: Request, n: int, c: int) -> dict[str, float]:
    async with provider:

        async def one(seq: int) -> float:
            start = time.perf_counter_ns()
            result = await provider.invoke(request)
            first = result.first_byte_ns if request.stream else None
            return ((first or time.perf_counter_ns()) - start) / 1e6

        return await drive(one, n, c)


async def raw_case(
    url: str, body: dict[str, Any], stream: bool, n: int, c: int
) -> dict[str, float]:
    headers = {"Authorization": f"Bearer {KEY}", "Content-Type": "application/json"}
    data = json.dumps(body).encode()
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as session:

        async def one(seq: int) -> float:
            start = time.perf_counter_ns()
            first = None
            async with session.post(url, data=data, headers=headers) as response:
                if stream:
                    async for line in response.content:
                        if first is None and line.startswith(b"data:"):
                            first = time.perf_counter_ns()
                else:
                    await response.read()
            return ((first or time.perf_counter_ns()) - start) / 1e6

        return await drive(one, n, c)


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0] if __doc__ else None)
    parser.add_argument("--requests", type=int, default=1000)
    parser.add_argument("--concurrency", type=int, default=16)
    args = parser.parse_args()
    n, c = args.requests, args.concurrency
    probe = Request(seq=0, payload={"echo": "x" * 16, "sleep_ms": 0})
    llm = Request(seq=0, payload={"prompt": "a b c", "max_tokens": 16}, stream=True)
    hf_proc, hf_url = start(
        "gpubench_huggingface.emulator", "--time-per-token-ms", "2", "--max-workers", "32"
    )
    inf_proc, inf_url = start("gpubench_inferless.emulator", "--max-workers", "32")
    try:
        hf = {"url": hf_url, "api_key": KEY, "hold_while_scaling": False, "retry_interval_s": 0.05}
        cases: list[tuple[str, Any, Any]] = [
            (
                "huggingface toolkit POST /",
                lambda: plugin_case(HuggingFaceProvider(**hf), probe, n, c),
                lambda: raw_case(hf_url + "/", toolkit_body(probe.payload), False, n, c),
            ),
            (
                "huggingface /generate_stream, 16 tokens (TTFT)",
                lambda: plugin_case(HuggingFaceProvider(**hf), llm, n, c),
                lambda: raw_case(hf_url + "/generate_stream", tgi_body(llm.payload), True, n, c),
            ),
            (
                "inferless KServe v2 infer",
                lambda: plugin_case(
                    InferlessProvider(url=infer_url(inf_url), api_key=KEY), probe, n, c
                ),
                lambda: raw_case(
                    infer_url(inf_url),
                    {"inputs": encode_inputs(probe.payload, {}, {}, frozenset())},
                    False,
                    n,
                    c,
                ),
            ),
        ]
        print(f"{n} requests at concurrency {c}, emulators in their own processes")
        for name, plugin, raw in cases:
            p, r = await plugin(), await raw()
            print(f"\n{name}")
            for label, row in (("plugin", p), ("raw aiohttp", r)):
                print(
                    f"  {label:12} {row['req_s']:8.0f} req/s  p50 {row['p50_ms']:7.2f} ms  "
                    f"CPU {row['cpu_ms_per_req']:6.3f} ms/req"
                )
            print(
                f"  ratio plugin/raw: p50 {p['p50_ms'] / r['p50_ms']:.2f}, "
                f"CPU {p['cpu_ms_per_req'] / r['cpu_ms_per_req']:.2f}"
            )
    finally:
        for proc in (hf_proc, inf_proc):
            proc.terminate()
            proc.wait(10)


if __name__ == "__main__":
    asyncio.run(main())
