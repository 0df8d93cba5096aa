"""Benchmark a Cog predictor served by Cog's own HTTP server on this machine: no Docker, no GPU.

Run: python examples/cog_own_server.py [STORE]

Needs ``pip install cog`` (0.23 or later: ``python -m cog.server.http`` starts its ``coglet``
server, which reads the model from ``COG_PREDICT_TYPE_STUB``). The model
(``cog_predictor/predict.py``) takes ``prompt`` and ``sleep_ms``, as a real model declares its
own inputs; the ``probe`` workload sends ``echo`` and ``sleep_ms``, so the target maps ``echo``
onto ``prompt`` with an ``InputMap`` (sent as is, Cog refuses it: ``unexpected keyword argument
'echo'``). The container's setup() is still running when the benchmark starts, as right after a
deploy: the first prediction gets Cog's ``503 Setup has not finished yet``, waits for
/health-check to say READY, and is stored as the cold start with Cog's own setup time. Twenty
sequential predictions follow.
"""

from __future__ import annotations

import os
import signal
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path

import anyio
import httpx
from gpubench_replicate import CogProvider

import gpubench_sdk as gb

PREDICTOR_DIR = Path(__file__).resolve().parent / "cog_predictor"
# The probe's request ({"sleep_ms", "echo"}) onto the model's inputs ({"prompt", "sleep_ms"}).
PROBE_TO_MODEL = gb.InputMap(rename={"echo": "prompt"})


def start_cog_server(port: int) -> subprocess.Popen[bytes]:
    env = {
        **os.environ,
        "PORT": str(port),
        "COG_PREDICT_TYPE_STUB": "predict.py:Runner",
        # coglet starts its worker as `python`: make it this interpreter, which has cog
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
    }
    return subprocess.Popen(
        [sys.executable, "-m", "cog.server.http", "--host", "127.0.0.1"],
        cwd=PREDICTOR_DIR,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,  # its worker subprocess is stopped with it
    )


def wait_until_listening(url: str, timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            httpx.get(f"{url}/health-check", timeout=1)
            return
        except httpx.TransportError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.02)


async def main(store: str) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    url = f"http://127.0.0.1:{port}"
    server = start_cog_server(port)
    try:
        wait_until_listening(url)
        result = await gb.run(
            {"cog": CogProvider(url=url, timeout_s=60, input=PROBE_TO_MODEL)},
            gb.EchoProbe(sleep_ms=50),
            [gb.Burst(total=20, concurrency=1)],
            store=store,
            name="cog-own-server",
        )
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(10)
    with gb.Store(store) as s:
        invs = sorted(s.invocations(result.run.id), key=lambda i: i.start_ns)
    errors = [i for i in invs if i.outcome is not gb.Outcome.OK]
    first, warm = invs[0], invs[1:]
    p50 = statistics.median((i.end_ns - i.start_ns) / 1e6 for i in warm)
    exec_p50 = statistics.median(i.execution_ms or 0.0 for i in warm)
    print(f"requests={len(invs)} errors={len(errors)}")
    print(
        f"first prediction: cold={first.cold} confirmed={first.cold_confirmed} "
        f"setup_ms={first.setup_ms:.0f} latency_ms={(first.end_ns - first.start_ns) / 1e6:.0f}"
    )
    print(f"warm: p50={p50:.1f} ms execution p50={exec_p50:.1f} ms (the model sleeps 50 ms)")


if __name__ == "__main__":
    anyio.run(main, sys.argv[1] if len(sys.argv) > 1 else "cog-own-server.sqlite")
