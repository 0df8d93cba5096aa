"""The measuring client's own error at the tail, against the server's truth (issue 32).

Run by hand (not a test): ``python bench/client_tail_bench.py [--quick] [--repeat 3]
[--baseline DIR]``.

A neutral OpenAI-style SSE server (aiohttp.web, no gpubench code) runs in its own process,
pinned to CPU 0. For each request it notes on ``time.perf_counter_ns`` (CLOCK_MONOTONIC on
Linux: one clock for every process of the host, so the clients' readings compare directly)
when its handler read the request, when it wrote each token and when it wrote the end; it
answers after ``--ttft-ms`` and then one token every ``--itl-ms``. Each client is a fresh
process pinned to CPU 1, and the clients of one cell run interleaved (who goes first alternates):

* ``gpubench``: a ``Runner`` with the OpenAI plugin, through the public API: ``Burst`` for a
  closed loop, ``Rate(arrivals="poisson")`` for an open one; its figures are what it reports
  (``Invocation``: latency and TTFT from the scheduled instant, ITL between token arrivals);
* ``raw``: the least a Python client can do (aiohttp, split events, ``json.loads`` each), on
  the same schedule (the same slots, or the same Poisson arrivals from the same seed), timing
  from the same instants (the slot's turn, the arrival's due time);
* ``baseline`` (with ``--baseline DIR``): the gpubench client of another checkout, before/after.

Per request, the error of each reported figure against the server's truth (each run's first
tenth of requests, by scheduled time, left out: connections opening, first use): latency (client end
- scheduled, truth: the server's end - its read), TTFT (first token - scheduled, truth: first
token written - read), each ITL (the gap between two arrivals, truth: between two writes); and
where it comes from: *send* = server read - scheduled (the client's own queueing before the
bytes left, plus loopback), for gpubench also server read - ``start_ns`` (what it records as
sent). The table gives each at p50 / p99 / p99.9 (ms), the connections each client opened (one
per concurrent request is what reading each answer to its end gives; more means requests that
paid a connect: issue 32's tail), the client's saturation flag (any steady
monitor window client-bound: the run's own ``Monitor`` for gpubench, the same class for raw), and
gpubench - raw at p99 (the issue's target: within 1 ms at every load below the flag).
``--throughput``: 16-token streams with no delay at 64 concurrent: requests/s and CPU/request.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import os
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
ROOT = Path(__file__).parents[1]
PROMPT = "one two three four five six seven eight"
SETTLE = 0.1  # each run's first tenth of requests (connections opening, first use) is left out

# -- the server, in its own process --------------------------------------------------------


def _chunk(sid: bytes, body: bytes) -> bytes:
    return b'data: {"id":"' + sid + b'","object":"chat.completion.chunk","model":"m",' + body


async def _serve(ttft_ms: float, itl_ms: float) -> None:
    from aiohttp import web

    truth: dict[str, list[int]] = {}  # id: [read, token writes..., end]
    ids = itertools.count()
    token = b'"choices":[{"index":0,"delta":{"content":"t"},"finish_reason":null}]}\n\n'
    clock = time.perf_counter_ns

    async def chat(request: web.Request) -> web.StreamResponse:
        read = clock()
        body = await request.json()
        n = int(body["max_tokens"])
        sid = f"s{next(ids)}"
        times = truth[sid] = [read]
        resp = web.StreamResponse(
            headers={"Content-Type": "text/event-stream", "x-request-id": sid}
        )
        ev = _chunk(sid.encode(), token)
        for i in range(n):
            due = read + int((ttft_ms + i * itl_ms) * 1e6)
            delay = (due - clock()) / 1e9
            if delay > 0:
                await asyncio.sleep(delay)
            if i == 0:
                await resp.prepare(request)
            await resp.write(ev)
            times.append(clock())
        usage = f'{{"prompt_tokens":8,"completion_tokens":{n},"total_tokens":{n + 8}}}'
        await resp.write(
            _chunk(sid.encode(), b'"choices":[{"index":0,"delta":{},"finish_reason":"length"}]}')
            + b"\n\n"
            + _chunk(sid.encode(), b'"choices":[],"usage":' + usage.encode() + b"}")
            + b"\n\ndata: [DONE]\n\n"
        )
        await resp.write_eof()
        times.append(clock())
        return resp

    async def read_truth(request: web.Request) -> web.Response:
        out = web.json_response(truth)
        truth.clear()
        return out

    app = web.Application()
    app.router.add_post("/v1/chat/completions", chat)
    app.router.add_get("/truth", read_truth)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0, backlog=4096)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    print(f"http://127.0.0.1:{port}/v1", flush=True)
    await asyncio.Event().wait()


# -- the clients, each a fresh pinned process ----------------------------------------------


def _arrivals(rps: float, seconds: float, seed: int) -> list[float]:
    """Poisson arrival offsets (s), as ``Rate(arrivals="poisson", seed=seed)`` draws them."""
    from gpubench_sdk import Rate

    return list(Rate(rps=rps, duration_s=seconds, arrivals="poisson", seed=seed).offsets_s())


async def _raw(url: str, cell: dict[str, Any]) -> dict[str, Any]:
    import aiohttp

    from gpubench_sdk._base._monitor import Monitor

    out: list[list[Any]] = []  # [id, scheduled, start, end, token arrivals]
    body = {
        "model": MODEL,
        "stream": True,
        "max_tokens": cell["tokens"],
        "stream_options": {"include_usage": True},
        "messages": [{"role": "user", "content": PROMPT}],
    }
    origin = time.perf_counter_ns()
    monitor = Monitor(origin_ns=origin, inflight=lambda: 0, sink=lambda w: None)
    opened = [0]

    async def connected(*_: Any) -> None:
        opened[0] += 1

    trace = aiohttp.TraceConfig()
    trace.on_connection_create_end.append(connected)
    connector = aiohttp.TCPConnector(limit=0)
    async with aiohttp.ClientSession(connector=connector, trace_configs=[trace]) as session:

        async def one(scheduled: int) -> None:
            times: list[int] = []
            start = time.perf_counter_ns()
            async with session.post(f"{url}/chat/completions", json=body) as resp:
                await token_times(resp.content.iter_any(), times)
                sid = resp.headers.get("x-request-id")
            out.append([sid, scheduled, start, time.perf_counter_ns(), times])

        watch = asyncio.ensure_future(monitor.run())
        cpu = time.process_time()
        began = time.perf_counter_ns()
        if cell["mode"] == "closed":
            left = itertools.count()

            async def slot() -> None:
                while next(left) < cell["total"]:
                    await one(time.perf_counter_ns())

            await asyncio.gather(*(slot() for _ in range(cell["concurrency"])))
        else:
            tasks = []
            for offset in _arrivals(cell["rps"], cell["seconds"], cell["seed"]):
                due = began + int(offset * 1e9)
                delay = (due - time.perf_counter_ns()) / 1e9
                if delay > 0:
                    await asyncio.sleep(delay)
                while time.perf_counter_ns() < due:  # noqa: ASYNC110 (uvloop's ms timers fire early)
                    await asyncio.sleep(0)
                tasks.append(asyncio.ensure_future(one(due)))
            await asyncio.gather(*tasks)
        wall = (time.perf_counter_ns() - began) / 1e9
        cpu = time.process_time() - cpu
        watch.cancel()
        await asyncio.gather(watch, return_exceptions=True)
    flagged = [w.client_bound for w in monitor.windows]
    lags = [w.loop_lag_ms for w in monitor.windows]
    return {"requests": out, "cpu_s": cpu, "wall_s": wall, "flags": flagged, "lags": lags,
            "errors": 0, "connections": opened[0]}  # fmt: skip


def _gpubench(url: str, cell: dict[str, Any]) -> dict[str, Any]:
    from gpubench_openai import OpenAIProvider

    from gpubench_sdk import Burst, LLMCompletion, Rate, Runner, Store, run_processes

    if cell["mode"] == "closed":
        shape: Any = Burst(total=cell["total"], concurrency=cell["concurrency"])
    else:
        shape = Rate(
            rps=cell["rps"], duration_s=cell["seconds"], arrivals="poisson", seed=cell["seed"]
        )
    # connections opened, counted where the measuring client makes them (a reused connection
    # is what a client reading each answer to its end gets; more is a request paying a connect)
    from gpubench_sdk._transport import _client

    opened = [0]
    protocols: list[Any] = [_client._Handler]
    try:  # the lean pool of plain-HTTP prepared calls (a checkout before it has none)
        from gpubench_sdk._transport import _lean

        protocols.append(_lean.LeanConnection)
    except ImportError:
        pass

    def counting(made: Any) -> Any:
        def connection_made(self: Any, transport: Any) -> None:
            opened[0] += 1
            made(self, transport)

        return connection_made

    for protocol in protocols:
        protocol.connection_made = counting(protocol.connection_made)
    setup = None
    if cell.get("otlp"):
        from gpubench_sdk import telemetry

        setup = telemetry.configure(otlp_endpoint=cell["otlp"], service_name="tail-bench")
    with tempfile.TemporaryDirectory() as tmp:
        store = f"{tmp}/s.sqlite"

        def build() -> Runner:
            return Runner(
                {"emu": OpenAIProvider(base_url=url, model=MODEL, timeout_s=600)},
                LLMCompletion(prompt_tokens=8, max_tokens=cell["tokens"], stream=True),
                [shape],
                store=store,
            )

        build().store.close()  # imports and set-up before the clock starts
        cpu = time.process_time()
        began = time.perf_counter_ns()
        result = run_processes(build, 1)
        wall = (time.perf_counter_ns() - began) / 1e9
        if setup is not None:
            setup.shutdown()  # the last export is the run's cost too
        cpu = time.process_time() - cpu
        with Store(store) as s:
            origin = s.run(result.run_id).origin_ns
            invs = list(s.invocations(result.run_id))
    rows = [
        [
            i.request_id,
            i.scheduled_ns + origin,
            i.start_ns + origin,
            i.end_ns + origin,
            [t + origin for t in i.token_times_ns or []],
        ]
        for i in invs
    ]
    return {
        "requests": rows,
        "cpu_s": cpu,
        "wall_s": wall,
        "flags": [w.client_bound for w in result.health],
        "lags": [w.loop_lag_ms for w in result.health],
        "errors": sum(i.outcome.value != "ok" for i in invs),
        "connections": opened[0],
    }


def _client_main(kind: str, url: str, cell: dict[str, Any], out_path: str) -> None:
    if kind == "raw":
        import uvloop

        out = uvloop.run(_raw(url, cell))
    else:
        out = _gpubench(url, cell)
        out["tree"] = _checkout.running()
    Path(out_path).write_text(json.dumps(out))


# -- the driver ----------------------------------------------------------------------------


def _pin(cpu: str) -> list[str]:
    return ["taskset", "-c", cpu] if shutil.which("taskset") else []


def _run(kind: str, url: str, cell: dict[str, Any], baseline: str | None) -> dict[str, Any]:
    # each tree with its own OpenAI plugin (an editable install may point at another checkout)
    tree = baseline if kind == "baseline" and baseline else str(ROOT)
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "out.json"
        client = "gpubench" if kind in ("baseline", "traced") else kind
        cmd = [*_pin("1"), sys.executable, __file__, "--client", client, "--url", url]
        cmd += ["--cell", json.dumps(cell), "--out", str(out)]
        env = _checkout.env_for(tree)
        proc = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, env=env)
        if proc.returncode != 0:
            raise RuntimeError(f"{kind} failed: {proc.stderr[-3000:]}")
        made: dict[str, Any] = json.loads(out.read_text())
        return made if kind == "raw" else _checkout.check(kind, tree, made)


def _pct(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))]


def _score(out: dict[str, Any], truth: dict[str, list[int]]) -> dict[str, Any]:
    """Errors (client - truth, ms) of one client's run, each figure computed alike for all."""
    err: dict[str, list[float]] = {"latency": [], "ttft": [], "itl": [], "send": [], "sent": []}
    ordered = sorted(out["requests"], key=lambda r: r[1])
    for sid, scheduled, start, end, times in ordered[int(len(ordered) * SETTLE) :]:
        server = truth.get(sid)
        if not server or len(server) != len(times) + 2:
            continue
        read, writes, done = server[0], server[1:-1], server[-1]
        err["latency"].append(((end - scheduled) - (done - read)) / 1e6)
        err["ttft"].append(((times[0] - scheduled) - (writes[0] - read)) / 1e6)
        err["send"].append((read - scheduled) / 1e6)
        err["sent"].append((read - start) / 1e6)
        for (a, b), (x, y) in zip(
            itertools.pairwise(times), itertools.pairwise(writes), strict=True
        ):
            err["itl"].append(((b - a) - (y - x)) / 1e6)
    row: dict[str, Any] = {}
    for name, values in err.items():
        for q, label in ((0.5, "p50"), (0.99, "p99"), (0.999, "p999")):
            row[f"{name}_{label}"] = _pct(values, q)
    n = len(out["requests"])
    row["matched"] = len(err["ttft"])
    missing = n - int(n * SETTLE) - row["matched"]
    row["rps"] = n / out["wall_s"]
    row["cpu_us"] = out["cpu_s"] / max(n, 1) * 1e6
    steady = out["flags"][1:-1] or out["flags"]
    row["flagged"] = sum(steady)
    row["windows"] = len(steady)
    lags = out.get("lags") or [0.0]
    row["lag_ms"] = max(lags[1:-1] or lags)  # the worst loop lag of a steady window
    row["errors"] = out["errors"] + missing
    row["connections"] = out.get("connections", 0)
    return row


def _median(runs: list[dict[str, Any]]) -> dict[str, Any]:
    return {k: statistics.median(r[k] for r in runs) for k in runs[0]}


def _cells(ns: argparse.Namespace) -> list[dict[str, Any]]:
    base = {"tokens": ns.tokens, "seed": 7}
    if ns.throughput:
        return [{**base, "mode": "closed", "concurrency": 64, "total": ns.total_throughput}]
    closed = [int(x) for x in ns.closed.split(",") if x]
    rates = [float(x) for x in ns.rates.split(",") if x]
    per_request_s = (ns.ttft_ms + ns.tokens * ns.itl_ms) / 1e3
    cells = [
        {**base, "mode": "closed", "concurrency": c, "total": max(c * 4, int(c / per_request_s *
                                                                              ns.seconds))}
        for c in closed
    ]  # fmt: skip
    cells += [{**base, "mode": "open", "rps": r, "seconds": ns.seconds} for r in rates]
    return cells


def _label(cell: dict[str, Any]) -> str:
    if cell["mode"] == "closed":
        return f"closed {cell['concurrency']} conc"
    return f"poisson {cell['rps']:g}/s"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--client")
    parser.add_argument("--url")
    parser.add_argument("--cell")
    parser.add_argument("--out")
    parser.add_argument("--serve", action="store_true")
    parser.add_argument("--ttft-ms", type=float, default=50.0)
    parser.add_argument("--itl-ms", type=float, default=5.0)
    parser.add_argument("--tokens", type=int, default=16)
    parser.add_argument("--seconds", type=float, default=8.0, help="length of each run")
    parser.add_argument("--closed", default="4,16,64", help="closed loops: concurrency")
    parser.add_argument("--rates", default="25,50,100,200,400", help="open loops: req/s")
    parser.add_argument("--repeat", type=int, default=3, help="interleaved runs per cell")
    parser.add_argument("--quick", action="store_true", help="closed 16; poisson 100/s")
    parser.add_argument("--throughput", action="store_true", help="16 tokens, no delay, 64 conc")
    parser.add_argument("--total-throughput", type=int, default=6000)
    parser.add_argument(
        "--otlp", action="store_true", help="also gpubench with tracing on (OTLP), as 'traced'"
    )
    parser.add_argument("--baseline", help="another checkout: its gpubench client as a third")
    ns = parser.parse_args()
    if ns.serve:
        import uvloop

        uvloop.run(_serve(ns.ttft_ms, ns.itl_ms))
        return
    if ns.client:
        _client_main(ns.client, ns.url, json.loads(ns.cell), ns.out)
        return
    if ns.quick:
        ns.closed, ns.rates = "16", "100"
    if ns.throughput:
        ns.ttft_ms = ns.itl_ms = 0.0
    server = subprocess.Popen(
        [*_pin("0"), sys.executable, __file__, "--serve", "--ttft-ms", str(ns.ttft_ms),
         "--itl-ms", str(ns.itl_ms)],
        stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    import urllib.request

    # --otlp: gpubench untraced and traced in the same run (tracing's cost is their ratio)
    kinds = ("raw", "gpubench") + (("traced",) if ns.otlp else ()) + (
        ("baseline",) if ns.baseline else ())  # fmt: skip
    rows: list[tuple[str, str, dict[str, Any]]] = []
    receiver = None
    try:
        assert server.stdout is not None
        url = server.stdout.readline().strip()
        otlp = None
        if ns.otlp:
            from gpubench_sdk.testing._otlp import otlp_receiver

            receiver = otlp_receiver()
            otlp, _ = receiver.__enter__()
        turn = itertools.count()
        for cell in _cells(ns):
            runs: dict[str, list[dict[str, Any]]] = {k: [] for k in kinds}
            for _ in range(ns.repeat):
                order = kinds if next(turn) % 2 == 0 else kinds[::-1]
                for kind in order:
                    traced = kind == "traced" or (kind == "baseline" and ns.otlp)
                    given = {**cell, "otlp": otlp} if traced else cell
                    out = _run(kind, url, given, ns.baseline)
                    with urllib.request.urlopen(url.rsplit("/v1", 1)[0] + "/truth") as r:
                        truth = json.loads(r.read())
                    runs[kind].append(_score(out, truth))
                    s = runs[kind][-1]
                    print(
                        f"{_label(cell)} {kind}: ttft p50/p99 {s['ttft_p50']:.3f}/"
                        f"{s['ttft_p99']:.3f} ms, send p99 {s['send_p99']:.3f}, rps "
                        f"{s['rps']:.0f}, cpu {s['cpu_us']:.0f} us, flagged {s['flagged']}/"
                        f"{s['windows']}",
                        flush=True,
                    )
            for kind in kinds:
                rows.append((_label(cell), kind, _median(runs[kind])))
    finally:
        if receiver is not None:
            receiver.__exit__(None, None, None)
        server.terminate()
        server.wait(10)
    _report(rows, ns, kinds)


def _report(
    rows: list[tuple[str, str, dict[str, Any]]], ns: argparse.Namespace, kinds: Any
) -> None:
    print(
        f"\n{ns.tokens} tokens, TTFT {ns.ttft_ms:g} ms, ITL {ns.itl_ms:g} ms (server truth); "
        f"median of {ns.repeat} interleaved runs per cell; {os.cpu_count()} CPUs, load average "
        f"{os.getloadavg()[0]:.2f}; errors are client - truth in ms, p50 / p99 / p99.9"
        + (f"; baseline: {ns.baseline}" if ns.baseline else "")
        + (
            "; traced: gpubench with tracing on (OTLP), its CPU also / untraced gpubench's"
            + (" (the baseline traced too)" if ns.baseline else "")
            if ns.otlp
            else ""
        )
    )
    print(
        "| load | client | latency err | TTFT err | ITL err | send (read - scheduled) "
        "| read - start_ns | req/s | CPU us/req | connections | flagged (worst loop lag ms) "
        "| p99 TTFT err - raw | target |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    raw: dict[str, dict[str, Any]] = {label: s for label, kind, s in rows if kind == "raw"}
    untraced = {label: s for label, kind, s in rows if kind == "gpubench"}

    def three(s: dict[str, Any], name: str) -> str:
        return f"{s[name + '_p50']:.2f} / {s[name + '_p99']:.2f} / {s[name + '_p999']:.2f}"

    for label, kind, s in rows:
        r = raw[label]
        gap = max(s["ttft_p99"] - r["ttft_p99"], s["latency_p99"] - r["latency_p99"])
        diff = "" if kind == "raw" else f"{s['ttft_p99'] - r['ttft_p99']:+.2f}"
        # the target: p99 latency and TTFT errors within 1 ms of raw's, or flagged
        verdict = "" if kind == "raw" else ("met" if gap <= 1.0 else "flagged" if s["flagged"]
                                            else "MISSED")  # fmt: skip
        sent = "" if kind == "raw" else three(s, "sent")
        cost = (
            f"; {s['cpu_us'] / untraced[label]['cpu_us']:.2f}x untraced" if kind == "traced" else ""
        )
        print(
            f"| {label} | {kind} | {three(s, 'latency')} | {three(s, 'ttft')} | {three(s, 'itl')} "
            f"| {three(s, 'send')} | {sent} | {s['rps']:,.0f} ({s['rps'] / r['rps']:.2f}x) "
            f"| {s['cpu_us']:.0f} ({s['cpu_us'] / r['cpu_us']:.2f}x{cost}) | {s['connections']:g} "
            f"| {s['flagged']:g}/{s['windows']:g} ({s['lag_ms']:.1f}) | {diff} | {verdict} |"
        )


if __name__ == "__main__":
    main()
