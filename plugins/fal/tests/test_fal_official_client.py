"""``fal-client`` (fal's official Python client) against our fal emulator.

The client builds every URL as ``https://{FAL_QUEUE_RUN_HOST}/...`` or ``https://{FAL_RUN_HOST}
/...`` from two environment variables it reads when imported (``fal_client.auth``, 1.0.3); it
has no constructor option for a base URL nor for an http scheme. So the emulator is served over
TLS with a throwaway certificate (trusted through ``SSL_CERT_FILE``, which httpx honours), and
the client runs in a child process whose environment names the emulator:
``FAL_QUEUE_RUN_HOST=127.0.0.1:<port>/queue`` and ``FAL_RUN_HOST=127.0.0.1:<port>/run``. No
part of the client is patched.
"""

from __future__ import annotations

import asyncio
import datetime
import ipaddress
import json
import os
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from gpubench_fal.emulator import make_app

from gpubench_sdk.testing import (
    ASGIApp,
    JobStatus,
    SimulatedFleet,
    fleet_fixture,
)

KEY = "fal_official_5c1e9b7d3a"
APP = "gpubench/echo"

CLIENT_SCRIPT = r"""
import json, sys, threading, time
import fal_client

out = {}
handle = fal_client.submit("gpubench/echo/sub", arguments={"echo": "queued", "sleep_ms": 50})
out["request_id"] = handle.request_id
updates = []
result = fal_client.subscribe(
    "gpubench/echo", arguments={"echo": "subscribed", "sleep_ms": 300}, with_logs=True,
    on_queue_update=lambda s: updates.append(type(s).__name__), interval=0.02,
)
out["subscribe"] = result
out["updates"] = updates
out["get"] = handle.get(interval=0.02)
status = handle.status(with_logs=True)
out["status"] = [type(status).__name__, status.metrics, bool(status.logs)]
out["result"] = fal_client.result("gpubench/echo", handle.request_id)
out["run"] = fal_client.run("gpubench/echo", arguments={"echo": "direct", "sleep_ms": 20})
out["stream"] = list(fal_client.stream(
    "gpubench/echo", arguments={"echo": "streamed", "chunks": 2, "sleep_ms": 40}))
long = fal_client.submit("gpubench/echo", arguments={"echo": "long", "sleep_ms": 20000})
while not isinstance(long.status(), fal_client.InProgress):
    time.sleep(0.02)
long.cancel()
out["cancelled"] = long.request_id
try:
    fal_client.SyncClient(key="wrong-key").run("gpubench/echo", arguments={"echo": "x"})
except fal_client.client.FalClientHTTPError as exc:
    out["unauthorized"] = [exc.status_code, str(exc)]
print(json.dumps(out))
"""


@dataclass
class TLSServed:
    port: int
    ca_file: Path


def _certificate(tmp: Path) -> tuple[Path, Path]:
    """A self-signed certificate for 127.0.0.1, valid for a day."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "gpubench fal emulator")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
            critical=False,
        )
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    cert_file, key_file = tmp / "cert.pem", tmp / "key.pem"
    cert_file.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return cert_file, key_file


fleet = fleet_fixture(0.2, max_workers=2, idle_timeout_s=5)


def _serve_tls(app: ASGIApp, cert: Path, key: Path) -> Iterator[int]:
    import uvicorn

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    config = uvicorn.Config(
        app,
        lifespan="on",
        log_level="warning",
        ssl_certfile=str(cert),
        ssl_keyfile=str(key),
    )
    server = uvicorn.Server(config)
    loop = asyncio.new_event_loop()
    thread = threading.Thread(
        target=lambda: loop.run_until_complete(server.serve(sockets=[sock])), daemon=True
    )
    thread.start()
    try:
        for _ in range(500):
            if server.started:
                break
            threading.Event().wait(0.02)
        assert server.started, "the TLS emulator did not start"
        yield sock.getsockname()[1]
    finally:
        server.should_exit = True
        thread.join(10)
        loop.close()


@pytest.fixture
def served(fleet: SimulatedFleet, tmp_path: Path) -> Iterator[TLSServed]:
    cert, key = _certificate(tmp_path)
    for port in _serve_tls(make_app(fleet, api_key=KEY), cert, key):
        yield TLSServed(port, cert)


def _run_client(served: TLSServed) -> dict[str, Any]:
    env = {
        **os.environ,
        "FAL_KEY": KEY,
        "FAL_QUEUE_RUN_HOST": f"127.0.0.1:{served.port}/queue",
        "FAL_RUN_HOST": f"127.0.0.1:{served.port}/run",
        "SSL_CERT_FILE": str(served.ca_file),
    }
    done = subprocess.run(
        [sys.executable, "-c", CLIENT_SCRIPT],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    answer: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return answer


@pytest.mark.slow
def test_official_client_drives_the_emulator(served: TLSServed, fleet: SimulatedFleet) -> None:
    out = _run_client(served)
    # submit to a subpath; status, result and cancel go to owner/app (handle URLs from the
    # submit answer, fal_client.result's from the request id): both reach the same request
    assert out["get"] == {"echo": "queued"} and out["result"] == {"echo": "queued"}
    assert out["subscribe"] == {"echo": "subscribed"}
    # the client parses every status the emulator sends (it raises on an unknown one)
    assert out["updates"][-1] == "Completed" and "InProgress" in out["updates"]
    name, metrics, has_logs = out["status"]
    assert name == "Completed" and has_logs
    truth = fleet.truth(out["request_id"])
    assert truth.execution_ms is not None
    assert abs(metrics["inference_time"] * 1e3 - truth.execution_ms) < 1.0
    assert out["run"] == {"echo": "direct"}
    assert [e["chunk"] for e in out["stream"]] == [0, 1]
    assert fleet.truth(out["cancelled"]).status is JobStatus.CANCELLED
    status_code, message = out["unauthorized"]
    assert status_code == 401 and "Key" in message and KEY not in message
