"""The per-request hot path, side by side in one run: aiohttp, gpubench as it was, as it is,
and each with tracing on.

Run by hand (not a test): ``python bench/hotpath_bench.py [--base DIR] [--rounds 5]``.
Same nginx and pinning as ``bench/loadgen.py`` (nginx on CPU 0, each client on CPU 1), the
instant endpoint at 64 concurrent, 20,000 requests per run; the peers run interleaved (A B C D,
A B C D, ...) and each figure is the median over rounds. Besides req/s it reports client CPU per
request (``time.process_time``), which a machine shared with other work disturbs far less than
wall-clock throughput. ``--base`` is a directory holding an older ``gpubench_sdk`` (e.g.
``git archive <commit> gpubench_sdk | tar -x -C DIR``) to measure as "before".

Tracing on: the OTLP/HTTP exporter (batch span processor, periodic metric reader) sends to a
loopback receiver in this driver process, so serialising and exporting count in the client.
Then the 10 ms endpoint at 960 req/s offered (under the saturation flag): gpubench's p50
against hey's, the "measures what hey measures" check.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parents[1]))

from bench import loadgen

ROOT = Path(__file__).parents[1]


def _client(kind: str, url: str, base: str | None, otlp: str | None, **kw: Any) -> dict[str, Any]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    if base:  # the older package first on the path; bench/ still from this tree
        env["PYTHONPATH"] = f"{base}{os.pathsep}{ROOT}"
    if otlp:
        env["GPUBENCH_BENCH_OTLP"] = otlp
    cmd = ["taskset", "-c", "1", sys.executable, str(ROOT / "bench" / "loadgen.py")]
    cmd += ["--client", kind, "--args", json.dumps({"url": url, **kw})]
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, env=env)
    if proc.returncode != 0:
        raise RuntimeError(f"{kind} failed: {proc.stderr[-2000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--base", help="directory with the 'before' gpubench_sdk")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--requests", type=int, default=20_000)
    ns = parser.parse_args()
    from gpubench_sdk.testing._otlp import otlp_receiver

    root = Path(tempfile.mkdtemp(prefix="gpubench-hotpath-"))
    nginx = loadgen.start_nginx(root)
    base_url = f"http://127.0.0.1:{loadgen.PORT}"
    peers: dict[str, list[dict[str, Any]]] = {}
    try:
        with otlp_receiver() as (otlp, received):
            instant = {"url": f"{base_url}/instant", "total": ns.requests, "concurrency": 64}
            plan: list[tuple[str, str, str | None, str | None]] = [
                ("aiohttp", "aiohttp", None, None),
                ("gpubench", "gpubench", None, None),
                ("gpubench, tracing on", "gpubench", None, otlp),
            ]
            if ns.base:
                plan.insert(1, ("gpubench before", "gpubench", ns.base, None))
                plan.append(("gpubench before, tracing on", "gpubench", ns.base, otlp))
            for _ in range(ns.rounds):
                for name, kind, base, trace in plan:
                    kw = {k: v for k, v in instant.items() if k != "url"}
                    row = _client(kind, instant["url"], base, trace, rps=0, **kw)
                    peers.setdefault(name, []).append(row)
                    print(name, json.dumps(row), flush=True)
            spans = len(received.traces)
        delay = f"{base_url}/delay10"
        hey_runs, gpb_runs = [], []
        for _ in range(3):
            hey_runs.append(loadgen._hey(delay, 6000, 64, 15))
            gpb_runs.append(
                _client("gpubench", delay, None, None, total=6000, concurrency=64, rps=960)
            )
    finally:
        nginx.terminate()
        nginx.wait()
        shutil.rmtree(root, ignore_errors=True)
    med = {name: loadgen._median(rows) for name, rows in peers.items()}
    a = med["aiohttp"]
    print(f"\ninstant endpoint, 64 concurrent, {ns.requests:,} requests, median of {ns.rounds}")
    print("| client | req/s | CPU us/request | req/s vs aiohttp | aiohttp CPU / client CPU |")
    print("|---|---|---|---|---|")
    for name, m in med.items():
        print(
            f"| {name} | {m['rps']:,.0f} | {m['cpu_us']:.0f} | {m['rps'] / a['rps']:.2f}x "
            f"| {a['cpu_us'] / m['cpu_us']:.2f}x |"
        )
    for now in ("", " before"):
        if f"gpubench{now}" not in med:
            continue
        on, off = med[f"gpubench{now}, tracing on"], med[f"gpubench{now}"]
        print(
            f"gpubench{now}: tracing on costs {on['cpu_us'] - off['cpu_us']:+.0f} us CPU per "
            f"request ({on['cpu_us'] / off['cpu_us']:.2f}x)"
        )
    print(f"{spans} OTLP trace exports received")
    hey, gpb = loadgen._median(hey_runs), loadgen._median(gpb_runs)
    print(
        f"10 ms endpoint, 64 concurrent, 960 req/s offered (median of 3): hey p50 "
        f"{hey['p50_ms']:.2f} ms, gpubench p50 {gpb['p50_ms']:.2f} ms "
        f"({gpb['p50_ms'] - hey['p50_ms']:+.2f} ms), gpubench client-bound "
        f"{gpb['client_bound_s']:.1f} s"
    )


if __name__ == "__main__":
    main()
