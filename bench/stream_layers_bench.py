"""Where a streamed token's client CPU goes, layer by layer, on the same sockets.

Run by hand (not a test): ``python bench/stream_layers_bench.py [--streams 100 --rate 50]``;
``--timer`` measures the read timeout's cost per network read alone (uvloop, then asyncio).

The capacity bench's emulator (``stream_capacity_bench.py --serve``) runs in its own process and
paces every stream, so each network read carries one token, as in a real LLM stream. One client
process then reads the same load several ways, interleaved round by round, and reports client
CPU per token in steady state (``time.process_time`` between the first and the last second of
the streams, the runner's monitor windows' span: no imports, set-up or drain) for each:

* ``raw``: aiohttp, ``iter_any``, split events, ``json.loads`` each: the least Python can do;
* ``httpx``: gpubench's client (``make_client``) with a plain loop: ``aiter_raw``, split, loads;
* ``provider``: ``OpenAIProvider.invoke`` (the plugin's SSE parser, token timestamps, Result);
* ``runner``: a whole ``Runner`` run (scheduling, Invocation, store, monitor), the CPU of its
  steady-state monitor windows over the tokens that arrived in them.

The differences between neighbours are what each layer adds per token.
"""

from __future__ import annotations

import argparse
import asyncio
import bisect
import gc
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parents[1]))

from bench._sse_times import token_times

MODEL = "bench-llm"
BODY = {
    "model": MODEL,
    "stream": True,
    "stream_options": {"include_usage": True},
    "messages": [{"role": "user", "content": "one two three four five six seven eight"}],
}


_GC: list[tuple[int, int]] = []  # (start, end) perf_counter_ns of each garbage collection


def _note_gc(phase: str, info: dict[str, Any]) -> None:
    if phase == "start":
        _GC.append((time.perf_counter_ns(), 0))
    elif _GC:
        _GC[-1] = (_GC[-1][0], time.perf_counter_ns())


def _gc_s(begin: float, end: float) -> float:
    """Seconds spent collecting garbage between two perf_counter_ns readings."""
    return sum(b - a for a, b in _GC if begin <= a and b <= end) / 1e9


async def _steady(streams: Any) -> tuple[int, float, float]:
    """Run ``streams`` (a coroutine returning token arrival times) while sampling the process
    CPU every 0.25 s: (tokens, CPU s) between the first and the last second, the runner's
    steady-state monitor windows' way (set-up, first tokens and drain apart)."""
    samples: list[tuple[int, float]] = []

    async def sample() -> None:
        while True:
            samples.append((time.perf_counter_ns(), time.process_time()))
            await asyncio.sleep(0.25)

    sampler = asyncio.ensure_future(sample())
    arrived = sorted(await streams)
    sampler.cancel()
    end_ns = arrived[-1] - 1_000_000_000
    (t0, c0), (t1, c1) = samples[4], [x for x in samples if x[0] <= end_ns][-1]
    return bisect.bisect(arrived, t1) - bisect.bisect(arrived, t0), c1 - c0, _gc_s(t0, t1)


async def _raw(url: str, streams: int, tokens: int) -> tuple[int, float, float]:
    import aiohttp

    body = {**BODY, "max_tokens": tokens}
    got: list[int] = []
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as session:

        async def one() -> None:
            times: list[int] = []
            async with session.post(f"{url}/chat/completions", json=body) as resp:
                await token_times(resp.content.iter_any(), times)
            got.extend(times)

        async def all_streams() -> list[int]:
            await asyncio.gather(*(one() for _ in range(streams)))
            return got

        return await _steady(all_streams())


async def _httpx(url: str, streams: int, tokens: int) -> tuple[int, float, float]:
    from gpubench_sdk import make_client

    body = json.dumps({**BODY, "max_tokens": tokens}).encode()
    got: list[int] = []
    async with make_client(timeout_s=600) as client:

        async def one() -> None:
            times: list[int] = []
            post = client.stream("POST", f"{url}/chat/completions", content=body)
            async with post as resp:
                await token_times(resp.aiter_raw(), times)
            got.extend(times)

        async def all_streams() -> list[int]:
            await asyncio.gather(*(one() for _ in range(streams)))
            return got

        return await _steady(all_streams())


async def _provider(url: str, streams: int, tokens: int) -> tuple[int, float, float]:
    from gpubench_openai import OpenAIProvider

    from gpubench_sdk import LLMCompletion

    workload = LLMCompletion(prompt_tokens=8, max_tokens=tokens, stream=True)
    got: list[int] = []
    async with OpenAIProvider(base_url=url, model=MODEL, timeout_s=600) as provider:

        async def one(seq: int) -> None:
            result = await provider.invoke(workload.request(seq))
            got.extend(result.token_times_ns or ())

        async def all_streams() -> list[int]:
            await asyncio.gather(*(one(i) for i in range(streams)))
            return got

        return await _steady(all_streams())


def _runner(url: str, streams: int, tokens: int) -> tuple[int, float, float]:
    from gpubench_openai import OpenAIProvider

    from gpubench_sdk import Burst, LLMCompletion, Runner, Store
    from gpubench_sdk._runner._multiproc import run_blocking

    with tempfile.TemporaryDirectory() as tmp:
        runner = Runner(
            {"emu": OpenAIProvider(base_url=url, model=MODEL, timeout_s=600)},
            LLMCompletion(prompt_tokens=8, max_tokens=tokens, stream=True),
            [Burst(total=streams, concurrency=streams)],
            store=f"{tmp}/s.sqlite",
        )
        result = run_blocking(runner)
        with Store(f"{tmp}/s.sqlite") as s:
            origin = s.run(result.run_id).origin_ns
            arrived = sorted(
                t for i in s.invocations(result.run_id) for t in i.token_times_ns or ()
            )
    steady = result.health[1:-1]  # edges: connections and first tokens; drain
    begin = steady[0].t_ns - steady[0].window_ms * 1e6
    count = bisect.bisect(arrived, steady[-1].t_ns) - bisect.bisect(arrived, begin)
    cpu = sum(w.cpu_pct / 100 * w.window_ms / 1e3 for w in steady)
    return count, cpu, _gc_s(origin + begin, origin + steady[-1].t_ns)


def _client(kind: str, url: str, streams: int, tokens: int, rounds: int) -> dict[str, Any]:
    import uvloop

    gc.callbacks.append(_note_gc)
    out = []
    for _ in range(rounds):
        if kind == "runner":
            out.append(_runner(url, streams, tokens))
        else:
            fn = {"raw": _raw, "httpx": _httpx, "provider": _provider}[kind]
            out.append(uvloop.run(fn(url, streams, tokens)))
    return {
        "us_per_token": [cpu / max(n, 1) * 1e6 for n, cpu, _ in out],
        "gc_us_per_token": [g / max(n, 1) * 1e6 for n, _, g in out],
    }


KINDS = ("raw", "httpx", "provider", "runner")


async def _timer_micro() -> None:
    """The read timeout's cost per network read: aiohttp's (cancel and re-arm) and gpubench's
    (move a deadline), on 400 connections' protocols, 100 reads each, alternating."""
    from aiohttp.client_proto import ResponseHandler

    from gpubench_sdk._transport._stream import LazyReadTimeout

    class Lazy(LazyReadTimeout, ResponseHandler):
        pass

    loop = asyncio.get_running_loop()
    for cls in (ResponseHandler, Lazy) * 2:
        protocols = [cls(loop) for _ in range(400)]
        for p in protocols:
            p._read_timeout = 600.0
        cpu = time.process_time()
        for _ in range(100):
            for p in protocols:
                p._reschedule_timeout()
            await asyncio.sleep(0)
        cpu = time.process_time() - cpu
        for p in protocols:
            p._drop_timeout()
        name = "aiohttp's" if cls is ResponseHandler else "gpubench's"
        print(f"{name} read timeout: {cpu / 40_000 * 1e6:.2f} us per read")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--streams", type=int, default=100)
    parser.add_argument("--rate", type=float, default=50.0, help="tokens/s per stream")
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--timer", action="store_true", help="the read timeout's cost per read")
    parser.add_argument("--client", help=argparse.SUPPRESS)
    parser.add_argument("--url", help=argparse.SUPPRESS)
    ns = parser.parse_args()
    tokens = int(ns.rate * ns.seconds)
    if ns.timer:
        import uvloop

        uvloop.run(_timer_micro())
        asyncio.run(_timer_micro())
        return
    if ns.client:
        print(json.dumps(_client(ns.client, ns.url, ns.streams, tokens, 1)))
        return
    here = Path(__file__).parent
    pin = ["taskset", "-c"] if os.path.exists("/usr/bin/taskset") else []
    emu = subprocess.Popen(
        [*(pin and [*pin, "0"]), sys.executable, str(here / "stream_capacity_bench.py"),
         "--serve", "--rate", str(ns.rate)],
        stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    per: dict[str, list[float]] = {k: [] for k in KINDS}
    gcs: dict[str, list[float]] = {k: [] for k in KINDS}
    try:
        assert emu.stdout is not None
        url = emu.stdout.readline().strip()
        env = {**os.environ, "PYTHONPATH": str(here.parent)}
        for r in range(ns.rounds):
            for kind in KINDS if r % 2 == 0 else KINDS[::-1]:  # interleaved, order alternating
                cmd = [*(pin and [*pin, "1"]), sys.executable, __file__, "--client", kind]
                cmd += ["--url", url, "--streams", str(ns.streams), "--rate", str(ns.rate)]
                cmd += ["--seconds", str(ns.seconds)]
                proc = subprocess.run(cmd, capture_output=True, text=True, env=env, check=True)
                out = json.loads(proc.stdout.strip().splitlines()[-1])
                per[kind] += out["us_per_token"]
                gcs[kind] += out["gc_us_per_token"]
    finally:
        emu.terminate()
        emu.wait(10)
    print(
        f"{ns.streams} streams x {ns.rate:g} tokens/s, {ns.seconds:g} s, {ns.rounds} rounds, "
        f"load average {os.getloadavg()[0]:.2f}; client CPU per token (median, us):"
    )
    raw = statistics.median(per["raw"])
    prev = raw
    for kind in KINDS:
        med = statistics.median(per[kind])
        runs = " ".join(f"{x:.1f}" for x in per[kind])
        print(
            f"  {kind:>8}: {med:5.1f}  ({med / raw:.2f}x raw, +{med - prev:4.1f} over the "
            f"layer above; of which GC {statistics.median(gcs[kind]):.1f}; runs {runs})"
        )
        prev = med


if __name__ == "__main__":
    main()
