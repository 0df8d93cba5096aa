"""How many tokens a second one client process holds over many concurrent LLM streams.

Run by hand (not a test): ``python bench/stream_capacity_bench.py [--quick] [--repeat 3]``.

An OpenAI-compatible SSE emulator runs in its own process (pinned to CPU 0; the clients to
CPU 1 where ``taskset`` exists): every stream sends ``--rate`` tokens a second, phases
staggered, and the emulator notes each token's send time on ``time.perf_counter_ns`` (on Linux
CLOCK_MONOTONIC, the clock the clients read too, so send and arrival compare directly).
At each level (streams in flight) two clients, each a fresh process, read the same load,
interleaved, the one going first alternating from run to run:

* ``gpubench``: a ``Runner`` with the OpenAI plugin (``Burst(total=streams,
  concurrency=streams)``), watched by the run's own saturation monitor;
* ``raw``: the least a Python client can do (aiohttp, split events, ``json.loads`` each),
  watched by the same ``Monitor`` class with the same settings.

Both are judged by one rule, on their monitors' windows between the first (connections, first
tokens) and the last (drain): *steady tok/s* is the tokens that arrived in those windows over
their length, *CPU/token* their process CPU over those tokens (set-up and teardown apart;
the whole run's figure is printed beside it). A client *sustains* a level when its steady tok/s
is >= 95% of the offered rate and none of those windows was flagged client-bound; it *holds* it
when it also keeps the 99th percentile of (arrival - send), each stream's first tenth apart,
within ``--lag-ms`` (1 ms). The summary gives each client's most tokens/s sustained and held
(at that level and every level below it: a pass after a failure is a quieter moment of the
machine, not capacity), and CPU per token, gpubench / raw, at the levels all sustained.
"""

from __future__ import annotations

import argparse
import asyncio
import bisect
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

sys.path.insert(0, str(Path(__file__).parents[1]))

from bench import _checkout
from bench._sse_times import token_times

_checkout.put_first()  # a --baseline client: the other checkout's gpubench

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


def _windows(windows: list[Any], origin_ns: int) -> list[list[Any]]:
    """Monitor windows as [end ns (perf_counter), length ns, CPU s, client-bound]."""
    return [
        [origin_ns + w.t_ns, int(w.window_ms * 1e6), w.cpu_pct / 100 * w.window_ms / 1e3,
         w.client_bound]
        for w in windows
    ]  # fmt: skip


async def _raw(url: str, streams: int, tokens: int) -> dict[str, Any]:
    import aiohttp

    from gpubench_sdk._base._monitor import Monitor

    arrivals: dict[str, list[int]] = {}
    body = {
        "model": MODEL,
        "stream": True,
        "max_tokens": tokens,
        "stream_options": {"include_usage": True},
        "messages": [{"role": "user", "content": "one two three four five six seven eight"}],
    }
    origin = time.perf_counter_ns()
    monitor = Monitor(origin_ns=origin, inflight=lambda: 0, sink=lambda w: None)
    cpu = time.process_time()
    conn = aiohttp.TCPConnector(limit=0)
    async with aiohttp.ClientSession(connector=conn) as session:

        async def one() -> None:
            times: list[int] = []
            async with session.post(f"{url}/chat/completions", json=body) as resp:
                arrivals[resp.headers["x-request-id"]] = times
                await token_times(resp.content.iter_any(), times)

        watch = asyncio.ensure_future(monitor.run())
        await asyncio.gather(*(one() for _ in range(streams)))
        watch.cancel()
        await asyncio.gather(watch, return_exceptions=True)
    cpu = time.process_time() - cpu
    return {"arrivals": arrivals, "cpu_s": cpu, "windows": _windows(monitor.windows, origin)}


def _gpubench(url: str, streams: int, tokens: int) -> dict[str, Any]:
    from gpubench_openai import OpenAIProvider

    from gpubench_sdk import Burst, LLMCompletion, Runner, Store
    from gpubench_sdk._runner._multiproc import run_blocking

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
            origin = s.run(result.run_id).origin_ns
            invocations = list(s.invocations(result.run_id))
    return {
        "arrivals": {
            i.request_id: [t + origin for t in i.token_times_ns or []] for i in invocations
        },
        "cpu_s": cpu,
        "windows": _windows(result.health, origin),
        "errors": sum(i.outcome.value != "ok" for i in invocations),
    }


def _client_main(kind: str, url: str, streams: int, tokens: int, out_path: str) -> None:
    if kind == "raw":
        import uvloop

        out = uvloop.run(_raw(url, streams, tokens))
    else:
        out = _gpubench(url, streams, tokens)
        out["tree"] = _checkout.running()
    Path(out_path).write_text(json.dumps(out))


# -- the driver -----------------------------------------------------------------------------


def _pin(cpu: str) -> list[str]:
    return ["taskset", "-c", cpu] if shutil.which("taskset") else []


def _level(kind: str, url: str, streams: int, tokens: int, baseline: str | None) -> dict[str, Any]:
    root = Path(__file__).parents[1]
    # the baseline: the gpubench client of another checkout (its core and OpenAI plugin)
    tree = baseline if kind == "baseline" and baseline else str(root)
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "out.json"
        client = "gpubench" if kind == "baseline" else kind
        cmd = [*_pin("1"), sys.executable, __file__, "--client", client, "--url", url]
        cmd += ["--streams", str(streams), "--tokens", str(tokens), "--out", str(out)]
        proc = subprocess.run(cmd, capture_output=True, text=True, cwd=root,
                              env=_checkout.env_for(tree))  # fmt: skip
        if proc.returncode != 0:
            raise RuntimeError(f"{kind} failed: {proc.stderr[-2000:]}")
        made: dict[str, Any] = json.loads(out.read_text())
        return made if kind == "raw" else _checkout.check(kind, tree, made)


def _score(out: dict[str, Any], sent: dict[str, list[int]], offered: float) -> dict[str, Any]:
    """One client's figures at one level, every one computed the same way for both clients."""
    lags: list[float] = []
    arrived: list[int] = []
    for sid, times in out["arrivals"].items():
        pairs = list(zip(sent.get(sid, []), times, strict=False))
        lags += [(got - send) / 1e6 for send, got in pairs[int(len(pairs) * SETTLE) :]]
        arrived += times
    lags.sort()
    arrived.sort()
    nan = float("nan")
    # Steady state: the monitor windows between the first (connections, first tokens) and the
    # last (drain); their CPU over the tokens that arrived in them, set-up and teardown apart.
    steady = out["windows"][1:-1] or out["windows"]
    begin, end = steady[0][0] - steady[0][1], steady[-1][0]
    count = bisect.bisect(arrived, end) - bisect.bisect(arrived, begin)
    flagged = sum(w[3] for w in steady)
    steady_rate = count / ((end - begin) / 1e9) if end > begin else nan
    return {
        "tokens": len(arrived),
        "tokens_per_s": steady_rate,
        "p50_lag_ms": statistics.median(lags) if lags else nan,
        "p99_lag_ms": lags[int(0.99 * (len(lags) - 1))] if lags else nan,
        "cpu_us_per_token": sum(w[2] for w in steady) / max(count, 1) * 1e6,
        "run_cpu_us_per_token": out["cpu_s"] / max(len(arrived), 1) * 1e6,
        "flagged_windows": f"{flagged}/{len(steady)}",
        "flagged": flagged > 0,
        "errors": out.get("errors", 0),
        # the same two criteria for both clients
        "sustained": steady_rate >= 0.95 * offered and not flagged and not out.get("errors"),
    }


def _verdict(s: dict[str, Any], lag_ms: float) -> str:
    if s["errors"]:
        return f"no ({s['errors']} errors)"
    if s["flagged"]:
        return f"no (flagged {s['flagged_windows']})"
    if not s["sustained"]:
        return "no (< 95% of offered)"
    return "yes" if s["p99_lag_ms"] <= lag_ms else f"sustained; p99 > {lag_ms:g} ms"


def _median_row(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Repeats of one (level, client): medians; a criterion holds if it held in most runs."""
    row = {k: statistics.median(r[k] for r in runs) for k in runs[0] if k not in _VOTED}
    row |= {k: sum(bool(r[k]) for r in runs) * 2 > len(runs) for k in ("flagged", "sustained")}
    row["errors"] = max(r["errors"] for r in runs)
    row["flagged_windows"] = " ".join(r["flagged_windows"] for r in runs)
    return row


_VOTED = ("flagged", "sustained", "errors", "flagged_windows")


def _report(
    rows: dict[tuple[int, str], dict[str, Any]], ns: argparse.Namespace, kinds: tuple[str, ...]
) -> None:
    lag = ns.lag_ms
    print(
        f"\n{ns.rate:g} tokens/s per stream, {ns.seconds:g} s streams, {ns.repeat} run(s) per "
        f"cell (medians), {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f}.\n"
        "tok/s and CPU/token: steady state (the monitor windows between the first and the last); "
        "run CPU/token: the client's whole run, set-up and teardown included.\n"
        "sustained: steady tok/s >= 95% of offered and no steady window flagged client-bound; "
        f"held: sustained and p99 lag (arrival - send, first {SETTLE:.0%} of each stream "
        f"apart) <= {lag:g} ms."
        + (f"\nbaseline: the gpubench client of {ns.baseline}." if ns.baseline else "")
        + "\n"
    )
    print(
        "| streams | offered tok/s | client | steady tok/s | p50 / p99 lag ms "
        "| CPU us/token (steady) | CPU us/token (run) | held |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for (streams, kind), s in rows.items():
        print(
            f"| {streams:,} | {streams * ns.rate:,.0f} | {kind} | {s['tokens_per_s']:,.0f} "
            f"| {s['p50_lag_ms']:.2f} / {s['p99_lag_ms']:.2f} | {s['cpu_us_per_token']:.1f} "
            f"| {s['run_cpu_us_per_token']:.1f} | {_verdict(s, lag)} |"
        )
    levels = sorted({streams for streams, _ in rows})

    def best(kind: str, key: str) -> tuple[int, float]:
        """The highest level a client met ``key`` at, and at every level below it: a client
        that failed at 800 streams and passed at 1,600 (a quieter moment) holds 400."""
        held = (0, 0.0)
        for n in levels:
            if (n, kind) not in rows or not rows[n, kind][key]:
                break
            held = (n, rows[n, kind]["tokens_per_s"])
        return held

    for n in levels:
        for kind in kinds:
            if (n, kind) in rows:
                s = rows[n, kind]
                s["held"] = s["sustained"] and s["p99_lag_ms"] <= lag
    print()
    for what, key in (("sustained", "sustained"), (f"held ({lag:g} ms)", "held")):
        rn, r = best("raw", key)
        for kind in kinds[1:]:
            gn, g = best(kind, key)
            ratio = f"{g / r:.2f}x" if r else "n/a"
            print(
                f"most tokens/s {what} (and at every level below): {kind} {g:,.0f} "
                f"({gn:,} streams), raw {r:,.0f} "
                f"({rn:,} streams): {kind} / raw {ratio}"
            )
    for kind in kinds[1:]:
        both = [n for n in levels if all(rows.get((n, k), {}).get("sustained") for k in kinds)]
        ratios = [
            rows[n, kind]["cpu_us_per_token"] / rows[n, "raw"]["cpu_us_per_token"] for n in both
        ]
        if ratios:
            print(
                f"CPU per token, steady, {kind} / raw at the levels all sustained ({both}): "
                + ", ".join(f"{x:.2f}x" for x in ratios)
                + f"; median {statistics.median(ratios):.2f}x"
            )


_KINDS = ("raw", "gpubench")


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
    parser.add_argument("--levels", default="50,100,200,400,800,1200,1600", help="streams")
    parser.add_argument("--repeat", type=int, default=1, help="runs per level and client")
    parser.add_argument("--quick", action="store_true", help="levels 50,200 only")
    parser.add_argument("--lag-ms", type=float, default=HELD_P99_MS, help="held: p99 lag bound")
    parser.add_argument(
        "--baseline", help="another checkout whose gpubench client runs as a third (before/after)"
    )
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

    rows: dict[tuple[int, str], dict[str, Any]] = {}
    kinds = (*_KINDS, "baseline") if ns.baseline else _KINDS
    try:
        assert emu.stdout is not None
        url = emu.stdout.readline().strip()
        alive = set(kinds)
        turn = itertools.count()
        for streams in levels:
            runs: dict[str, list[dict[str, Any]]] = {kind: [] for kind in alive}
            for _ in range(ns.repeat):
                # interleaved, and who goes first alternates: drift hits both alike
                order = kinds if next(turn) % 2 == 0 else kinds[::-1]
                for kind in (k for k in order if k in alive):
                    out = _level(kind, url, streams, tokens, ns.baseline)
                    with urllib.request.urlopen(url.rsplit("/v1", 1)[0] + "/sent") as r:
                        sent = json.loads(r.read())
                    runs[kind].append(_score(out, sent, streams * ns.rate))
                    print(streams, kind, json.dumps(runs[kind][-1]), flush=True)
            for kind, scored in runs.items():
                rows[streams, kind] = _median_row(scored)
                if rows[streams, kind]["tokens_per_s"] < 0.8 * streams * ns.rate:
                    alive.discard(kind)  # clearly saturated: higher levels cannot be held
            if not alive:
                break
    finally:
        emu.terminate()
        emu.wait(10)
    ordered = sorted(rows.items(), key=lambda kv: (kv[0][0], kinds.index(kv[0][1])))
    _report(dict(ordered), ns, kinds)


if __name__ == "__main__":
    main()
