"""The OpenAI plugin's streaming path against a minimal raw aiohttp SSE reader.

Both read the same emulator (``python -m gpubench_openai.emulator`` in its own process, so its
CPU is not ours): the same requests, one after the other per client, at the same concurrency.
For each client: median TTFT, median ITL, and client CPU time per token (``time.process_time``
over the client's whole run divided by the tokens it received). The ratios say what the plugin
costs over the least a Python client can do: an exact plugin reads the same TTFT and ITL
(ratio ~1.0) and spends a small multiple of the raw reader's CPU per token.

    python bench/openai_stream_bench.py                    # defaults below
    python bench/openai_stream_bench.py --requests 64 --concurrency 8 --tokens 256
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import aiohttp
from gpubench_openai import OpenAIProvider

from gpubench_sdk import LLMCompletion

sys.path.insert(0, str(Path(__file__).parents[1]))

from bench._sse_times import token_times

MODEL = "bench-llm"


def start_emulator(tokens_per_s: float) -> tuple[subprocess.Popen[str], str]:
    cmd = [
        sys.executable,
        "-m",
        "gpubench_openai.emulator",
        "--port",
        "0",
        "--model",
        MODEL,
        "--tokens-per-s",
        str(tokens_per_s),
        "--cold-start-s",
        "0.2",
        "--max-workers",
        "64",
        "--idle-timeout-s",
        "60",
    ]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    return proc, proc.stdout.readline().strip()


async def plugin_client(url: str, workload: LLMCompletion, n: int, conc: int) -> list[Any]:
    out: list[tuple[int, list[int]]] = []
    async with OpenAIProvider(base_url=url, model=MODEL) as provider:
        sem = asyncio.Semaphore(conc)

        async def one(seq: int) -> None:
            async with sem:
                start = time.perf_counter_ns()
                result = await provider.invoke(workload.request(seq))
                out.append((start, list(result.token_times_ns or [])))

        await asyncio.gather(*(one(i) for i in range(n)))
    return out


async def raw_client(url: str, workload: LLMCompletion, n: int, conc: int) -> list[Any]:
    """The least a client can do: POST, read chunks, split events, json.loads each."""
    out: list[tuple[int, list[int]]] = []
    async with aiohttp.ClientSession() as session:
        sem = asyncio.Semaphore(conc)

        async def one(seq: int) -> None:
            req = workload.request(seq)
            body = {
                "model": MODEL,
                "stream": True,
                "max_tokens": req.max_output_tokens,
                "stream_options": {"include_usage": True},
                "messages": [{"role": "user", "content": req.payload["prompt"]}],
            }
            async with sem:
                start = time.perf_counter_ns()
                times: list[int] = []
                async with session.post(f"{url}/chat/completions", json=body) as resp:
                    await token_times(resp.content.iter_any(), times)
                out.append((start, times))

        await asyncio.gather(*(one(i) for i in range(n)))
    return out


def figures(runs: list[tuple[int, list[int]]], cpu_s: float) -> dict[str, float]:
    ttft = [(t[0] - s) / 1e6 for s, t in runs if t]
    itl = [(b - a) / 1e6 for _, t in runs for a, b in itertools.pairwise(t)]
    tokens = sum(len(t) for _, t in runs)
    return {
        "ttft_p50_ms": statistics.median(ttft),
        "itl_p50_ms": statistics.median(itl),
        "itl_mean_ms": statistics.fmean(itl),
        "tokens": tokens,
        "cpu_us_per_token": cpu_s / tokens * 1e6,
    }


async def measure(client: Any, url: str, workload: LLMCompletion, args: Any) -> dict[str, float]:
    cpu0 = time.process_time()
    runs = await client(url, workload, args.requests, args.concurrency)
    return figures(runs, time.process_time() - cpu0)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--requests", type=int, default=32)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--tokens", type=int, default=256)
    parser.add_argument("--prompt-tokens", type=int, default=128)
    parser.add_argument("--tokens-per-s", type=float, default=200.0)
    parser.add_argument("--rounds", type=int, default=3, help="alternating rounds per client")
    args = parser.parse_args()
    workload = LLMCompletion(prompt_tokens=args.prompt_tokens, max_tokens=args.tokens, stream=True)
    proc, url = start_emulator(args.tokens_per_s)
    try:
        asyncio.run(measure(raw_client, url, workload, args))  # boot workers, warm everything
        results: dict[str, list[dict[str, float]]] = {"plugin": [], "raw": []}
        for _ in range(args.rounds):  # alternate, so drift in the machine hits both alike
            results["raw"].append(asyncio.run(measure(raw_client, url, workload, args)))
            results["plugin"].append(asyncio.run(measure(plugin_client, url, workload, args)))
    finally:
        proc.terminate()
        proc.wait(10)
    summary = {
        name: {k: statistics.median(r[k] for r in runs) for k in runs[0]}
        for name, runs in results.items()
    }
    print(f"python {sys.version.split()[0]}, {os.cpu_count()} CPUs; {vars(args)}")
    for name, fig in summary.items():
        print(f"{name:>6}: " + ", ".join(f"{k} {v:.3f}" for k, v in fig.items()))
    p, r = summary["plugin"], summary["raw"]
    print(
        f"ratios plugin/raw: TTFT {p['ttft_p50_ms'] / r['ttft_p50_ms']:.3f}, "
        f"ITL p50 {p['itl_p50_ms'] / r['itl_p50_ms']:.3f}, "
        f"CPU per token {p['cpu_us_per_token'] / r['cpu_us_per_token']:.2f}"
    )


if __name__ == "__main__":
    main()
