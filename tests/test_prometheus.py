"""Prometheus: a real server (Debian's ``prometheus``) scrapes ``gpubench run --prometheus-port``
and its HTTP API returns the latency histogram. (That the Grafana dashboard asks only for what
the exporter serves is tests/test_grafana_dashboard.py's.)"""

from __future__ import annotations

import json
import math
import re
import shutil
import socket
import subprocess
import sys
import threading
import time
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from _plans import local_plan
from test_cli import gpubench

from gpubench_sdk import Invocation, Outcome, Phase, Store, telemetry

ROOT = Path(__file__).resolve().parents[1]
PROMETHEUS = shutil.which("prometheus")

PLAN = local_plan(
    """
[workload]
kind = "probe"
sleep_ms = 2
""",
    "",
    """[[scenarios]]
kind = "rate"
rps = 20
duration_s = 12
""",
)


P50 = (
    "histogram_quantile(0.5, sum by (le) "
    '(gpubench_request_duration_seconds_bucket{job="gpubench"}))'
)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def query(api: str, promql: str) -> list[dict[str, Any]]:
    url = f"{api}/api/v1/query?{urllib.parse.urlencode({'query': promql})}"
    with urllib.request.urlopen(url, timeout=5) as resp:
        body = json.load(resp)
    assert body["status"] == "success", body
    result: list[dict[str, Any]] = body["data"]["result"]
    return result


@pytest.mark.skipif(PROMETHEUS is None, reason="needs Debian's prometheus (apt-get install)")
def test_prometheus_scrapes_a_running_benchmark(tmp_path: Path) -> None:
    exporter, api_port = free_port(), free_port()
    config = tmp_path / "prometheus.yml"
    config.write_text(
        "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n"
        "scrape_configs:\n  - job_name: gpubench\n"
        f"    static_configs:\n      - targets: ['127.0.0.1:{exporter}']\n"
    )
    api = f"http://127.0.0.1:{api_port}"
    server = subprocess.Popen(
        [PROMETHEUS, f"--config.file={config}", f"--storage.tsdb.path={tmp_path / 'tsdb'}",
         f"--web.listen-address=127.0.0.1:{api_port}", "--log.level=warn"],
        stdout=subprocess.DEVNULL, stderr=(tmp_path / "prometheus.log").open("w"),
    )  # fmt: skip
    plan = tmp_path / "plan.toml"
    plan.write_text(PLAN)
    store = tmp_path / "s.sqlite"
    bench = subprocess.Popen(
        [sys.executable, "-m", "gpubench_sdk", "run", str(plan), "--store", str(store), "--quiet",
         "--prometheus-port", f"127.0.0.1:{exporter}"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        buckets: list[dict[str, Any]] = []
        p50: float | None = None
        deadline = time.monotonic() + 60
        while bench.poll() is None and time.monotonic() < deadline:
            time.sleep(1)
            try:  # the scrape of a running benchmark, read back through the HTTP API
                found = query(api, 'gpubench_request_duration_seconds_bucket{job="gpubench"}')
            except OSError:
                continue  # Prometheus still starting
            if found and any(float(b["value"][1]) > 0 for b in found):
                buckets = found
                (median,) = query(api, P50)
                p50 = float(median["value"][1])
        _, err = bench.communicate(timeout=60)
        assert bench.returncode == 0, err
        # the endpoint served a final scrape after the run: Prometheus holds every request
        # (over the last minute: once the endpoint is gone its series are marked stale)
        (total,) = query(api, 'sum(max_over_time(gpubench_requests_total{job="gpubench"}[1m]))')
        final = float(total["value"][1])
    finally:
        if bench.poll() is None:
            bench.kill()
        server.terminate()
        server.wait(20)
    assert buckets, (tmp_path / "prometheus.log").read_text()
    by_le = {b["metric"]["le"]: float(b["value"][1]) for b in buckets}
    assert {"0.005", "0.1", "1.0", "300.0", "+Inf"} <= set(by_le)  # seconds, not ms
    assert all(b["metric"]["gpubench_target"] == "loc" for b in buckets)
    counts = [by_le[k] for k in sorted(by_le, key=lambda k: math.inf if k == "+Inf" else float(k))]
    assert counts == sorted(counts) and counts[-1] > 0  # cumulative buckets
    # the median Prometheus estimates from the buckets lies in the bucket holding the stored
    # median (the scrape saw most, not necessarily all, of the requests)
    assert p50 is not None and math.isfinite(p50)
    with Store(store, readonly=True) as s:
        lat_s = sorted(i.latency_ms / 1e3 for i in s.invocations(s.run("latest").id))
    assert final == len(lat_s)  # end-of-run totals, not the last scrape during the run
    stored = lat_s[len(lat_s) // 2]
    edges = sorted(float(k) for k in by_le if k != "+Inf")
    upper = next(e for e in edges if e >= stored)
    lower = max([0.0] + [e for e in edges if e < stored])
    assert lower <= p50 <= upper, (p50, stored)


def test_prometheus_port_is_checked(tmp_path: Path) -> None:
    plan = tmp_path / "plan.toml"
    plan.write_text(PLAN)
    proc = gpubench("run", str(plan), "--prometheus-port", "nine", "--store", str(tmp_path / "s"))
    assert proc.returncode == 2 and "--prometheus-port" in proc.stderr
    proc = gpubench("run", str(plan), "--prometheus-port", "9464", "-p", "2")
    assert proc.returncode == 2 and "--otlp-endpoint" in proc.stderr


def _requests_total(text: str) -> float:
    return sum(
        float(m.group(1))
        for m in re.finditer(r"^gpubench_requests_total\{[^}]*\} ([0-9.e+]+)$", text, re.M)
    )


def test_the_endpoint_serves_a_final_scrape_after_the_run() -> None:
    """``shutdown`` keeps /metrics up until a scrape that began after the run has been
    answered (it then sees the final totals), or until the linger passes without one."""
    setup = telemetry.configure(
        prometheus_port=0, prometheus_host="127.0.0.1", set_global=False, prometheus_linger_s=30
    )
    assert setup.prometheus_address is not None
    host, port = setup.prometheus_address
    instruments = setup.instruments()
    ms = 1_000_000
    for seq in range(7):  # the run's last requests, recorded just before it ends
        inv = Invocation(
            target="t", scenario=0, seq=seq, phase=Phase.MEASURE, scheduled_ns=0,
            start_ns=ms, end_ns=5 * ms, wall_start_ns=1, outcome=Outcome.OK, http_status=200,
        )  # fmt: skip
        instruments.record(inv, {"gpubench.target": "t", "gpubench.workload": "probe"})
    scraped: list[str] = []

    def scrape_later() -> None:
        time.sleep(0.5)  # Prometheus's next scrape comes after the run has ended
        with urllib.request.urlopen(f"http://{host}:{port}/metrics", timeout=5) as resp:
            scraped.append(resp.read().decode())

    scraper = threading.Thread(target=scrape_later)
    began = time.monotonic()
    scraper.start()
    setup.shutdown()
    waited = time.monotonic() - began
    scraper.join(10)
    assert scraped and _requests_total(scraped[0]) == 7  # the final totals, all of them
    assert 0.4 < waited < 15  # waited for that scrape, not for the whole 30 s linger
    with pytest.raises(OSError):  # and then stopped serving
        urllib.request.urlopen(f"http://{host}:{port}/metrics", timeout=2)

    quiet = telemetry.configure(
        prometheus_port=0, prometheus_host="127.0.0.1", set_global=False, prometheus_linger_s=0.3
    )
    began = time.monotonic()
    quiet.shutdown()  # nobody scrapes: the linger bounds the wait
    assert 0.25 < time.monotonic() - began < 10
