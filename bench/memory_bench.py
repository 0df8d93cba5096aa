"""Memory of one process holding 10,000 requests in flight for 30 s: gpubench and raw aiohttp.

Run by hand (not a test): ``python bench/memory_bench.py [--requests 10000] [--hold-s 30]``.
Needs Debian's ``nginx`` with the echo module (``libnginx-mod-http-echo``): its ``/hold``
endpoint answers after ``--hold-s``. Each client runs in its own process; the figure is that
process's peak resident set (``ru_maxrss``), next to the same load held by a bare aiohttp
client (the peer, measured in the same run). Goal (issue 21): <= 1 GiB for gpubench.

The open-files limit matters first: 10,000 sockets need RLIMIT_NOFILE above 10,000; gpubench
raises its soft limit to the hard one and refuses a plan that still cannot fit
(``_resources.check_open_files``), so a refusal here names ``ulimit -n``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parents[1]))

from bench import loadgen

PORT = 18191


def _peak_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux: KiB


async def _aiohttp_client(url: str, n: int) -> dict[str, Any]:
    import aiohttp

    _soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    ok = 0
    began = time.perf_counter()
    timeout = aiohttp.ClientTimeout(total=None, sock_connect=120, sock_read=300)
    async with aiohttp.ClientSession(
        connector=aiohttp.TCPConnector(limit=0), timeout=timeout
    ) as session:

        async def one() -> None:
            nonlocal ok
            async with session.get(url) as r:
                await r.read()
                ok += r.status == 200

        await asyncio.gather(*(one() for _ in range(n)), return_exceptions=True)
    return {"ok": ok, "wall_s": time.perf_counter() - began, "peak_rss_mib": _peak_rss_mib()}


def _gpubench_client(url: str, n: int) -> dict[str, Any]:
    from bench._bench_provider import AnyBody, GetProvider
    from gpubench_sdk import Burst, Runner, Store
    from gpubench_sdk._runner._multiproc import run_blocking

    with tempfile.TemporaryDirectory() as tmp:
        store = f"{tmp}/m.sqlite"
        runner = Runner(
            {"nginx": GetProvider(url=url, timeout_s=600)},
            AnyBody(),
            [Burst(total=n, concurrency=n)],
            store=store,
            name="memory",
        )
        began = time.perf_counter()
        result = run_blocking(runner)
        wall = time.perf_counter() - began
        with Store(store) as s:
            ok = int((s.columns(result.run_id)["outcome"] == 0).sum())
    return {
        "ok": ok,
        "wall_s": wall,
        "peak_rss_mib": _peak_rss_mib(),
        "client_bound_s": result.client_bound_s,
    }


def _run(client: str, url: str, n: int) -> dict[str, Any]:
    cmd = [sys.executable, __file__, "--client", client, "--url", url, "--requests", str(n)]
    root = Path(__file__).parents[1]
    env = {**os.environ, "PYTHONPATH": str(root)}
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=root, env=env)
    if proc.returncode != 0:
        raise RuntimeError(f"{client} failed: {proc.stderr[-2000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--client")
    parser.add_argument("--url")
    parser.add_argument("--requests", type=int, default=10_000)
    parser.add_argument("--hold-s", type=float, default=30.0)
    ns = parser.parse_args()
    if ns.client == "aiohttp":
        print(json.dumps(asyncio.run(_aiohttp_client(ns.url, ns.requests))))
        return
    if ns.client == "gpubench":
        print(json.dumps(_gpubench_client(ns.url, ns.requests)))
        return
    if shutil.which("nginx") is None:
        sys.exit("needs nginx with the echo module: apt-get install nginx libnginx-mod-http-echo")
    root = Path(tempfile.mkdtemp(prefix="gpubench-memory-"))
    locations = {"/ready": 'return 200 "ok";', "/hold": f'echo_sleep {ns.hold_s}; echo "ok";'}
    nginx = loadgen.start_nginx(
        root, locations, port=PORT, cpus=None, connections=30_000, backlog=16_384
    )
    try:
        url = f"http://127.0.0.1:{PORT}/hold"
        rows = {client: _run(client, url, ns.requests) for client in ("aiohttp", "gpubench")}
    finally:
        nginx.terminate()
        nginx.wait()
        shutil.rmtree(root, ignore_errors=True)
    print(f"{ns.requests:,} requests held {ns.hold_s:g} s, one process each:")
    for client, row in rows.items():
        print(
            f"  {client:>8}: peak RSS {row['peak_rss_mib']:,.0f} MiB, "
            f"{row['ok']:,} ok, wall {row['wall_s']:.1f} s"
            + (f", client-bound {row['client_bound_s']:.1f} s" if "client_bound_s" in row else "")
        )
    g, a = rows["gpubench"], rows["aiohttp"]
    print(
        f"gpubench / aiohttp peak RSS: {g['peak_rss_mib'] / a['peak_rss_mib']:.2f}x; "
        f"goal <= 1024 MiB: {'met' if g['peak_rss_mib'] <= 1024 else 'NOT met'}"
    )


if __name__ == "__main__":
    main()
