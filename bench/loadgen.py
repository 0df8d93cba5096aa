"""Load-generation capacity: gpubench against hey and aiohttp on the same local nginx.

Run by hand (not a test): ``python bench/loadgen.py [--quick]``. Needs Debian's ``nginx-light``
(with its echo module, for the 10 ms endpoint) and ``hey``. nginx is pinned to CPU 0 and each
client to CPU 1 (``taskset``), so every client gets one core. Each cell is the median of 3 runs.

Targets (issue 2): one gpubench process >= 0.3x aiohttp's req/s on the instant endpoint at 64
concurrent; gpubench's p50 within 1 ms of hey's on the 10 ms endpoint at 1 and 64 concurrent with
offered load under half the client's capacity (rate-limited: hey ``-q``, gpubench ``Rate``);
2 processes >= 1.7x one process (on a 2-core machine nginx shares those cores: read with care).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

NGINX_CONF = """
{modules}
worker_processes 1;
worker_rlimit_nofile {nofile};
daemon off;
error_log {root}/error.log;
pid {root}/nginx.pid;
events {{ worker_connections {connections}; }}
http {{
  access_log off;
  keepalive_requests 10000000;
  client_body_temp_path {root}/body;
  proxy_temp_path {root}/proxy;
  fastcgi_temp_path {root}/fastcgi;
  uwsgi_temp_path {root}/uwsgi;
  scgi_temp_path {root}/scgi;
  server {{
    listen 127.0.0.1:{port} backlog={backlog};
{locations}
  }}
}}
"""
LOCATIONS = {  # path -> nginx directives
    "/instant": 'return 200 "ok";',
    "/delay10": 'echo_sleep 0.01; echo "ok";',  # Debian's nginx-light echo module
}
PORT = 18181
ECHO_MODULE = "/usr/lib/nginx/modules/ngx_http_echo_module.so"


# -- clients, each run in its own pinned process -----------------------------------------


async def _aiohttp_client(url: str, total: int, concurrency: int) -> dict[str, float]:
    import aiohttp

    latencies: list[int] = []
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as session:
        for _ in range(100):
            async with session.get(url) as r:
                await r.read()
        remaining = iter(range(total))

        async def slot() -> None:
            for _ in remaining:
                t = time.perf_counter_ns()
                async with session.get(url) as r:
                    await r.read()
                latencies.append(time.perf_counter_ns() - t)

        began, cpu = time.perf_counter(), time.process_time()
        await asyncio.gather(*(slot() for _ in range(concurrency)))
        wall = time.perf_counter() - began
        cpu = time.process_time() - cpu
    return {
        "rps": total / wall,
        "p50_ms": statistics.median(latencies) / 1e6,
        "cpu_us": cpu / total * 1e6,
    }


def _gpubench_build(url: str, store: str, total: int, concurrency: int, rps: float) -> Any:
    """A Runner: module level so that multi-process runs can pickle it."""
    from bench._bench_provider import AnyBody, GetProvider
    from gpubench_sdk import Burst, Rate, Runner

    scenario = (
        Rate(rps=rps, duration_s=total / rps)
        if rps
        else Burst(total=total, concurrency=concurrency)
    )
    return Runner(
        {"nginx": GetProvider(url=url)}, AnyBody(), [scenario], store=store, name="loadgen"
    )


def served(cols: dict[str, Any]) -> dict[str, float]:
    """A stored run's columns: OK requests per second over its span, their median latency and
    the count of the others."""
    import numpy as np

    ok = cols["outcome"] == 0
    wall = (cols["end_ns"].max() - cols["start_ns"].min()) / 1e9
    return {
        "rps": float(ok.sum()) / wall,
        "p50_ms": float(np.median(cols["latency_ms"][ok])),
        "errors": float((~ok).sum()),
    }


def _gpubench_client(
    url: str, total: int, concurrency: int, rps: float, processes: int
) -> dict[str, float]:
    import functools

    # public names only, so that --base can run any earlier version side by side
    from gpubench_sdk import Store, run_processes

    with tempfile.TemporaryDirectory() as tmp:
        # A runner built and dropped before the CPU clock starts, so that what it imports is
        # not counted: the aiohttp client's figure does not count its imports either.
        _gpubench_build(url, f"{tmp}/warm.sqlite", total, concurrency, rps).store.close()
        store_path = f"{tmp}/lg.sqlite"
        build = functools.partial(_gpubench_build, url, store_path, total, concurrency, rps)
        otlp = os.environ.get("GPUBENCH_BENCH_OTLP")  # tracing on (bench/hotpath_bench.py)
        setup = None
        if otlp:
            from gpubench_sdk import telemetry

            setup = telemetry.configure(otlp_endpoint=otlp, service_name="loadgen")
        cpu = time.process_time()  # this process and its threads (store writer, exporters)
        result = run_processes(build, processes)
        if setup is not None:
            setup.shutdown()  # the last export is the run's cost too
        cpu = time.process_time() - cpu
        with Store(store_path) as store:
            cols = store.columns(result.run_id)
    return {
        **served(cols),
        # Setup included (~50 ms); with several processes the children's CPU is not counted.
        "cpu_us": cpu / len(cols["outcome"]) * 1e6 if processes == 1 else float("nan"),
        "client_bound_s": result.client_bound_s,
    }


def _hey(url: str, total: int, concurrency: int, qps_per_worker: float) -> dict[str, float]:
    cmd = ["hey", "-n", str(total), "-c", str(concurrency), "-cpus", "1"]
    if qps_per_worker:
        cmd += ["-q", str(qps_per_worker)]
    text = subprocess.run(
        ["taskset", "-c", "1", *cmd, url], capture_output=True, text=True, check=True
    ).stdout
    rps = float(re.search(r"Requests/sec:\s+([\d.]+)", text).group(1))  # type: ignore[union-attr]
    p50 = float(re.search(r"50%+ in ([\d.]+) secs", text).group(1))  # type: ignore[union-attr]
    return {"rps": rps, "p50_ms": p50 * 1000}


def _pinned(client: str, cpus: str, **kw: Any) -> dict[str, float]:
    cmd = [
        "taskset",
        "-c",
        cpus,
        sys.executable,
        __file__,
        "--client",
        client,
        "--args",
        json.dumps(kw),
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=Path(__file__).parents[1])
    if proc.returncode != 0:
        raise RuntimeError(f"{client} failed: {proc.stderr[-2000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def _median(runs: list[dict[str, float]]) -> dict[str, float]:
    return {k: statistics.median(r[k] for r in runs) for k in runs[0]}


def start_nginx(
    root: Path,
    locations: dict[str, str] = LOCATIONS,
    *,
    port: int = PORT,
    cpus: str | None = "0",
    connections: int = 8192,
    backlog: int = 511,
) -> subprocess.Popen[bytes]:
    """A local nginx (one worker) serving ``locations`` (path -> directives) from ``root``
    (an empty directory), pinned to ``cpus`` (``None``: not pinned); returns once the first
    location answers. The echo module is loaded when a location uses it."""
    for d in ("body", "proxy", "fastcgi", "uwsgi", "scgi"):
        (root / d).mkdir()
    conf = root / "nginx.conf"
    uses_echo = any("echo" in directives for directives in locations.values())
    conf.write_text(
        NGINX_CONF.format(
            root=root,
            port=port,
            modules=f"load_module {ECHO_MODULE};" if uses_echo else "",
            nofile=max(connections + 1024, 8192),
            connections=connections,
            backlog=backlog,
            locations="\n".join(f"    location {p} {{ {d} }}" for p, d in locations.items()),
        )
    )
    cmd = ["nginx", "-c", str(conf)]
    proc = subprocess.Popen(
        ["taskset", "-c", cpus, *cmd] if cpus else cmd, stderr=subprocess.DEVNULL
    )
    import urllib.request

    ready = f"http://127.0.0.1:{port}{next(iter(locations))}"
    for _ in range(100):
        try:
            urllib.request.urlopen(ready, timeout=1).read()
            return proc
        except OSError:
            time.sleep(0.05)
    proc.kill()
    raise RuntimeError(f"nginx did not start (see {root}/error.log)")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--client")
    parser.add_argument("--args")
    parser.add_argument("--quick", action="store_true", help="1 run per cell instead of 3")
    parser.add_argument("--processes-only", action="store_true", help="only 1 vs 2 processes")
    ns = parser.parse_args()
    if ns.client:
        kw = json.loads(ns.args)
        if ns.client == "aiohttp":
            out = asyncio.run(_aiohttp_client(kw["url"], kw["total"], kw["concurrency"]))
        else:
            out = _gpubench_client(
                kw["url"], kw["total"], kw["concurrency"], kw.get("rps", 0), kw.get("processes", 1)
            )
        print(json.dumps(out))
        return
    for tool in ("nginx", "hey", "taskset"):
        if shutil.which(tool) is None:
            sys.exit(f"needs {tool}: apt-get install nginx-light hey util-linux")
    repeats = 1 if ns.quick else 3
    root = Path(tempfile.mkdtemp(prefix="gpubench-loadgen-"))
    nginx = start_nginx(root)
    rows = []
    try:
        base = f"http://127.0.0.1:{PORT}"
        plan = [  # endpoint, concurrency, total, rate limit per hey worker
            ("instant", 1, 5000, 0),
            ("instant", 10, 20000, 0),
            ("instant", 64, 20000, 0),
            ("delay10", 1, 300, 0),
            ("delay10", 10, 3000, 0),
            ("delay10", 64, 6000, 0),
            ("delay10", 64, 6000, 15),  # 64 concurrent, 960 req/s offered: under half capacity
        ]
        for endpoint, c, n, q in [] if ns.processes_only else plan:
            url = f"{base}/{endpoint}"
            rps = c * q
            cell = {
                "hey": _median([_hey(url, n, c, q) for _ in range(repeats)]),
                "gpubench": _median(
                    [
                        _pinned("gpubench", "1", url=url, total=n, concurrency=c, rps=rps)
                        for _ in range(repeats)
                    ]
                ),
            }
            if not q:
                cell["aiohttp"] = _median(
                    [
                        _pinned("aiohttp", "1", url=url, total=n, concurrency=c)
                        for _ in range(repeats)
                    ]
                )
            rows.append((endpoint, c, rps, cell))
            print(
                endpoint,
                c,
                f"{rps} req/s offered" if rps else "closed loop",
                json.dumps(cell),
                flush=True,
            )
        # 1 vs 2 processes, interleaved and 5 times each: nginx shares the two cores, so
        # where the scheduler puts it moves single runs by +-15%.
        url = f"{base}/instant"
        one_runs: list[dict[str, float]] = []
        two_runs: list[dict[str, float]] = []
        for _ in range(5 if not ns.quick else 1):
            for procs, runs in ((1, one_runs), (2, two_runs)):
                kw = {"url": url, "total": 20000, "concurrency": 64, "processes": procs}
                runs.append(_pinned("gpubench", "0,1", **kw))
        one, two = _median(one_runs), _median(two_runs)
    finally:
        nginx.terminate()
        nginx.wait()
        shutil.rmtree(root, ignore_errors=True)
    print(
        "\n| endpoint | conc | offered | hey req/s, p50 | aiohttp req/s, p50 "
        "| gpubench req/s, p50 | gpubench/aiohttp | p50 - hey |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for endpoint, c, rps, cell in rows:
        h, g, a = cell["hey"], cell["gpubench"], cell.get("aiohttp")
        a_text = f"{a['rps']:,.0f}, {a['p50_ms']:.2f} ms" if a else "-"
        ratio = f"{g['rps'] / a['rps']:.2f}x" if a else "-"
        offered = f"{rps:.0f}/s" if rps else "closed"
        print(
            f"| {endpoint} | {c} | {offered} | {h['rps']:,.0f}, {h['p50_ms']:.2f} ms "
            f"| {a_text} | {g['rps']:,.0f}, {g['p50_ms']:.2f} ms | {ratio} "
            f"| {g['p50_ms'] - h['p50_ms']:+.2f} ms |"
        )
    print(
        f"\nprocesses: 1 -> {one['rps']:,.0f} req/s, 2 -> {two['rps']:,.0f} req/s "
        f"({two['rps'] / one['rps']:.2f}x; nginx shares these 2 cores)"
    )


if __name__ == "__main__":
    os.environ.setdefault("PYTHONPATH", str(Path(__file__).parents[1]))
    main()
