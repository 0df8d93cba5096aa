"""How many tokens a second one client process holds over many concurrent LLM streams.

Run by hand (not a test): ``python bench/stream_capacity_bench.py [--quick]``.

An OpenAI-compatible SSE emulator runs in its own process (pinned to CPU 0; the clients to
CPU 1 where ``taskset`` exists): every stream sends ``--rate`` tokens a second, phases
staggered, and the emulator notes each token's send time on ``time.perf_counter_ns`` (on Linux
CLOCK_MONOTONIC, the clock the clients read too, so send and arrival compare directly).
At each level (streams in flight) two clients read the same load, interleaved:

* ``gpubench``: a ``Runner`` with the OpenAI plugin (``Burst(total=streams,
  concurrency=streams)``), its saturation flag the run's own monitor (a client-bound window);
* ``raw``: the least a Python client can do (aiohttp, split events, ``json.loads`` each) with
  the same monitor class watching its loop, so both flags mean the same thing.

A client *holds* a level when no window was flagged and the 99th percentile of (arrival - send)
over all its tokens is within 1 ms. The report gives, per client, the highest level held and
its tokens/s, and CPU per token at every level; the ratios are gpubench / raw.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

MODEL = "bench-llm"
HELD_P99_MS = 1.0  # the bound; --lag-ms on a machine shared with other work
SETTLE = 0.1  # each stream's first tenth of tokens is connection set-up, not steady state


# -- the emulator, in its own process ------------------------------------------------------


def _chunk(sid: bytes, body: bytes) -> bytes:
    return b'data: {"id":"' + sid + b'","object":"chat.completion.chunk","model":"m",' + body


async def _serve(rate: float) -> None:
    from aiohttp import web

    sent: dict[str, list[int]] = {}
    ids = itertools.count()
    token = b'"choices":[{"index":0,"delta":{"content":"t"},"finish_reason":null}]}\n\n'

    async def chat(request: web.Request) -> web.StreamResponse:
        body = await request.json()
        n = int(body["max_tokens"])
        sid = f"s{next(ids)}"
        resp = web.StreamResponse(
            headers={"Content-Type": "text/event-stream", "x-request-id": sid}
        )
        await resp.prepare(request)
        times = sent[sid] = []
        interval = 1e9 / rate
        t0 = time.perf_counter_ns() + int(random.random() * interval)  # staggered phases
        ev = _chunk(sid.encode(), token)
        clock = time.perf_counter_ns
        for i in range(n):
            delay = (t0 + i * interval - clock()) / 1e9
            if delay > 0:
                await asyncio.sleep(delay)
            times.append(clock())
            await resp.write(ev)
        usage = f'{{"prompt_tokens":8,"completion_tokens":{n},"total_tokens":{n + 8}}}'
        await resp.write(
            _chunk(sid.encode(), b'"choices":[{"index":0,"delta":{},"finish_reason":"length"}]}')
            + b"\n\n"
            + _chunk(sid.encode(), b'"choices":[],"usage":' + usage.encode() + b"}")
            + b"\n\ndata: [DONE]\n\n"
        )
        await resp.write_eof()
        return resp

    async def sent_times(request: web.Request) -> web.Response:
        out = web.json_response(sent)
        sent.clear()
        return out

    app = web.Application()
    app.router.add_post("/v1/chat/completions", chat)
    app.router.add_get("/sent", sent_times)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0, backlog=4096)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    print(f"http://127.0.0.1:{port}/v1", flush=True)
    await asyncio.Event().wait()


# -- the clients, each in a fresh pinned process -------------------------------------------


def _flagged(windows: list[Any]) -> bool:
    return any(w.client_bound for w in windows[1:-1] or windows)  # edges: start-up, drain


async def _raw(url: str, streams: int, tokens: int) -> dict[str, Any]:
    import aiohttp

    from gpubench_sdk._monitor import Monitor

    arrivals: dict[str, list[int]] = {}
    body = {
        "model": MODEL,
        "stream": True,
        "max_tokens": tokens,
        "stream_options": {"include_usage": True},
        "messages": [{"role": "user", "content": "one two three four five six seven eight"}],
    }
    monitor = Monitor(origin_ns=time.perf_counter_ns(), inflight=lambda: 0, sink=lambda w: None)
    conn = aiohttp.TCPConnector(limit=0)
    async with aiohttp.ClientSession(connector=conn) as session:

        async def one() -> None:
            times: list[int] = []
            buf = b""
            async with session.post(f"{url}/chat/completions", json=body) as resp:
                arrivals[resp.headers["x-request-id"]] = times
                async for chunk in resp.content.iter_any():
                    now = time.perf_counter_ns()
                    buf += chunk
                    *events, buf = buf.split(b"\n\n")
                    for event in events:
                        data = event[6:]
                        if data == b"[DONE]":
                            break
                        choices = json.loads(data).get("choices")
                        if choices and choices[0].get("delta", {}).get("content"):
                            times.append(now)

        watch = asyncio.ensure_future(monitor.run())
        cpu = time.process_time()
        await asyncio.gather(*(one() for _ in range(streams)))
        cpu = time.process_time() - cpu
        watch.cancel()
        await asyncio.gather(watch, return_exceptions=True)
    return {"arrivals": arrivals, "cpu_s": cpu, "flagged": _flagged(monitor.windows)}


def _gpubench(url: str, streams: int, tokens: int) -> dict[str, Any]:
    from gpubench_openai import OpenAIProvider

    from gpubench_sdk import Burst, LLMCompletion, Runner, Store
    from gpubench_sdk._multiproc import run_blocking

    with tempfile.TemporaryDirectory() as tmp:
        store = f"{tmp}/s.sqlite"
        runner = Runner(
            {"emu": OpenAIProvider(base_url=url, model=MODEL, timeout_s=600)},
            LLMCompletion(prompt_tokens=8, max_tokens=tokens, stream=True),
            [Burst(total=streams, concurrency=streams)],
            store=store,
        )
        cpu = time.process_time()
        result = run_blocking(runner)
        cpu = time.process_time() - cpu
        with Store(store) as s:
            run = s.run(result.run_id)
            arrivals = {
                i.request_id: [t + run.origin_ns for t in i.token_times_ns or []]
                for i in s.invocations(result.run_id)
            }
            errors = sum(i.outcome.value != "ok" for i in s.invocations(result.run_id))
    return {
        "arrivals": arrivals,
        "cpu_s": cpu,
        "flagged": _flagged(result.health),
        "errors": errors,
    }


def _client_main(kind: str, url: str, streams: int, tokens: int, out_path: str) -> None:
    if kind == "raw":
        import uvloop

        out = uvloop.run(_raw(url, streams, tokens))
    else:
        out = _gpubench(url, streams, tokens)
    Path(out_path).write_text(json.dumps(out))


# -- the driver -----------------------------------------------------------------------------


def _pin(cpu: str) -> list[str]:
    return ["taskset", "-c", cpu] if shutil.which("taskset") else []


def _level(kind: str, url: str, streams: int, tokens: int) -> dict[str, Any]:
    root = Path(__file__).parents[1]
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "out.json"
        cmd = [*_pin("1"), sys.executable, __file__, "--client", kind, "--url", url]
        cmd += ["--streams", str(streams), "--tokens", str(tokens), "--out", str(out)]
        env = {**os.environ, "PYTHONPATH": str(root)}
        proc = subprocess.run(cmd, capture_output=True, text=True, cwd=root, env=env)
        if proc.returncode != 0:
            raise RuntimeError(f"{kind} failed: {proc.stderr[-2000:]}")
        return json.loads(out.read_text())  # type: ignore[no-any-return]


def _score(out: dict[str, Any], sent: dict[str, list[int]], lag_ms: float) -> dict[str, Any]:
    lags: list[float] = []
    first, last, count = None, None, 0
    for sid, arrived in out["arrivals"].items():
        pairs = list(zip(sent.get(sid, []), arrived, strict=False))
        for send, got in pairs[int(len(pairs) * SETTLE) :]:
            lags.append((got - send) / 1e6)
        if arrived:
            count += len(arrived)
            first = min(first or arrived[0], arrived[0])
            last = max(last or arrived[-1], arrived[-1])
    lags.sort()
    p99 = lags[int(0.99 * (len(lags) - 1))] if lags else float("nan")
    span_s = (last - first) / 1e9 if first and last and last > first else float("nan")
    return {
        "tokens_per_s": count / span_s,
        "p50_lag_ms": statistics.median(lags) if lags else float("nan"),
        "p99_lag_ms": p99,
        "cpu_us_per_token": out["cpu_s"] / max(count, 1) * 1e6,
        "flagged": out["flagged"],
        "held": not out["flagged"] and p99 <= lag_ms and not out.get("errors"),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--client")
    parser.add_argument("--url")
    parser.add_argument("--streams", type=int)
    parser.add_argument("--tokens", type=int)
    parser.add_argument("--out")
    parser.add_argument("--serve", action="store_true")
    parser.add_argument("--rate", type=float, default=20.0, help="tokens/s per stream")
    parser.add_argument("--seconds", type=float, default=6.0, help="length of each stream")
    parser.add_argument("--levels", default="50,100,200,400,800", help="streams per level")
    parser.add_argument("--quick", action="store_true", help="levels 50,200 only")
    parser.add_argument("--lag-ms", type=float, default=HELD_P99_MS, help="held: p99 lag bound")
    ns = parser.parse_args()
    if ns.serve:
        import uvloop

        uvloop.run(_serve(ns.rate))
        return
    if ns.client:
        _client_main(ns.client, ns.url, ns.streams, ns.tokens, ns.out)
        return
    levels = [50, 200] if ns.quick else [int(x) for x in ns.levels.split(",")]
    tokens = int(ns.rate * ns.seconds)
    emu = subprocess.Popen(
        [*_pin("0"), sys.executable, __file__, "--serve", "--rate", str(ns.rate)],
        stdout=subprocess.PIPE,
        text=True,
    )
    import urllib.request

    try:
        assert emu.stdout is not None
        url = emu.stdout.readline().strip()
        rows: list[tuple[int, str, dict[str, Any]]] = []
        alive = {"raw", "gpubench"}
        for streams in levels:
            for kind in ("raw", "gpubench"):  # interleaved: drift hits both alike
                if kind not in alive:
                    continue
                out = _level(kind, url, streams, tokens)
                with urllib.request.urlopen(url.rsplit("/v1", 1)[0] + "/sent") as r:
                    sent = json.loads(r.read())
                score = _score(out, sent, ns.lag_ms)
                score["sustained"] = (
                    score["tokens_per_s"] >= 0.95 * streams * ns.rate and not score["flagged"]
                )
                rows.append((streams, kind, score))
                print(streams, kind, json.dumps(score), flush=True)
                if score["tokens_per_s"] < 0.8 * streams * ns.rate:
                    alive.discard(kind)  # clearly saturated: higher levels cannot be held
            if not alive:
                break
    finally:
        emu.terminate()
        emu.wait(10)
    print(
        f"\nrate {ns.rate:g} tokens/s per stream, {ns.seconds:g} s streams, "
        f"held = not flagged and p99 lag <= {ns.lag_ms:g} ms"
    )
    print("| streams | offered tok/s | client | tok/s | p50 / p99 lag ms | CPU us/token | held |")
    print("|---|---|---|---|---|---|---|")
    for streams, kind, s in rows:
        print(
            f"| {streams} | {streams * ns.rate:,.0f} | {kind} | {s['tokens_per_s']:,.0f} "
            f"| {s['p50_lag_ms']:.2f} / {s['p99_lag_ms']:.2f} | {s['cpu_us_per_token']:.1f} "
            f"| {'yes' if s['held'] else 'no (flagged)' if s['flagged'] else 'no'} |"
        )
    best = {
        kind: max((s["tokens_per_s"] for _, k, s in rows if k == kind and s["held"]), default=0)
        for kind in ("raw", "gpubench")
    }
    # Without the timestamp bound (a machine shared with other work preempts both clients):
    # the most tokens/s delivered at >= 95% of the offered rate with no window flagged.
    kept = {
        kind: max(
            (s["tokens_per_s"] for _, k, s in rows if k == kind and s["sustained"]), default=0
        )
        for kind in ("raw", "gpubench")
    }
    print(
        f"sustained (>= 95% of offered, not flagged): gpubench {kept['gpubench']:,.0f}, "
        f"raw {kept['raw']:,.0f} tokens/s"
    )
    cpu = {
        kind: statistics.median(s["cpu_us_per_token"] for _, k, s in rows if k == kind)
        for kind in ("raw", "gpubench")
    }
    ratio = best["gpubench"] / best["raw"] if best["raw"] else float("nan")
    kept_ratio = kept["gpubench"] / kept["raw"] if kept["raw"] else float("nan")
    print(f"sustained gpubench / raw: {kept_ratio:.2f}x")
    print(
        f"\nheld tokens/s: gpubench {best['gpubench']:,.0f}, raw {best['raw']:,.0f} "
        f"({ratio:.2f}x); CPU per token (median over levels): gpubench "
        f"{cpu['gpubench']:.1f} us, raw {cpu['raw']:.1f} us "
        f"({cpu['gpubench'] / cpu['raw']:.2f}x)"
    )


if __name__ == "__main__":
    main()
