"""The Grafana dashboard in examples/ asks only for what gpubench's exporter actually serves.

What is served is not a list kept here: a real ``gpubench run --prometheus-port`` (the local
runtime, with a cold start, and the OpenAI plugin streaming from its emulator, so the GenAI
metrics appear) is scraped while it runs and once after, and every metric and label name the
dashboard's PromQL uses must be in those scrapes. A renamed metric or label fails here, not on
someone's empty panel.
"""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from _emulator import emulator as run_emulator

ROOT = Path(__file__).resolve().parents[1]
DASHBOARD = ROOT / "examples" / "grafana-dashboard.json"
KEY = "sk-demo-grafana-1234"

pytest.importorskip("gpubench_openai", reason="the OpenAI plugin (plugins/openai)")

PLAN = """
[run]
name = "grafana-check"

[workload]
kind = "llm"
prompt_tokens = 16
max_tokens = 8
stream = true

[[targets]]
name = "local"
provider = "local"
handler = "gpubench_sdk.demo:predict"  # the demo model answers LLM payloads
max_workers = 2

[[targets]]
name = "llm"
provider = "openai"
base_url = "{url}"  # the emulator prints its /v1 base URL
model = "emulated-llm"
api_key_env = "OPENAI_API_KEY"

[[scenarios]]
kind = "burst"
total = 12
concurrency = 3
"""

# PromQL words that are not metric names: functions, aggregations and their modifiers.
_PROMQL_WORDS = {
    "sum", "avg", "min", "max", "count", "rate", "irate", "increase", "histogram_quantile",
    "by", "without", "on", "ignoring", "group_left", "group_right", "and", "or", "unless",
    "max_over_time", "min_over_time", "avg_over_time", "label_values", "offset", "bool",
    "clamp_min", "clamp_max", "abs", "topk", "bottomk", "quantile", "delta", "deriv",
}  # fmt: skip
_LABELS_IN_MATCHER = re.compile(r"\{([^}]*)\}")
_GROUPING = re.compile(r"\b(?:by|without|on|ignoring)\s*\(([^)]*)\)")
_NAME = re.compile(r"[a-zA-Z_:][\w:]*")


def names_in(promql: str) -> tuple[set[str], set[str]]:
    """(metric names, label names) a PromQL expression uses."""
    labels: set[str] = set()
    for matcher in _LABELS_IN_MATCHER.findall(promql):
        labels |= {m.group(1) for m in re.finditer(r'(\w+)\s*(?:=~|!~|!=|=)\s*"', matcher)}
    for group in _GROUPING.findall(promql):
        labels |= {g.strip() for g in group.split(",") if g.strip()}
    rest = _LABELS_IN_MATCHER.sub(" ", promql)
    rest = _GROUPING.sub(" ", rest)
    rest = re.sub(r'"[^"]*"|\[[^\]]*\]|\$\{?\w+\}?|\b\d+(\.\d+)?\b', " ", rest)
    metrics = {n for n in _NAME.findall(rest) if n not in _PROMQL_WORDS}
    if promql.startswith("label_values("):  # label_values(metric, label)
        args = promql[len("label_values(") : -1].split(",")
        metrics, labels = {args[0].strip()}, labels | {args[-1].strip()}
    return metrics, labels - {"le"}


def test_the_promql_reader_tells_metrics_from_labels() -> None:
    metrics, labels = names_in(
        "histogram_quantile(0.95, sum by (le, gpubench_target) (rate("
        'gpubench_request_duration_seconds_bucket{gpubench_target=~"$target",x!="ok"}[5m])))'
    )
    assert metrics == {"gpubench_request_duration_seconds_bucket"}
    assert labels == {"gpubench_target", "x"}
    assert names_in("label_values(gpubench_requests_total, gpubench_target)") == (
        {"gpubench_requests_total"},
        {"gpubench_target"},
    )


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@pytest.fixture(scope="module")
def emulator() -> Iterator[str]:
    args = ("--api-key-env", "OPENAI_API_KEY", "--cold-start-s", "0.2")
    with run_emulator("gpubench_openai.emulator", *args, env={"OPENAI_API_KEY": KEY}) as url:
        yield url


def _scrape(port: int) -> str | None:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2) as resp:
            text: str = resp.read().decode()
            return text
    except OSError:
        return None


def served_names(emulator: str, tmp_path: Path) -> tuple[set[str], set[str]]:
    """Metric and label names of every scrape of a real run's exporter."""
    plan = tmp_path / "plan.toml"
    plan.write_text(PLAN.replace("{url}", emulator))
    port = _free_port()
    run = subprocess.Popen(
        [sys.executable, "-m", "gpubench_sdk", "run", str(plan), "--store",
         str(tmp_path / "s.sqlite"), "--quiet", "--prometheus-port", f"127.0.0.1:{port}"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env={**os.environ, "OPENAI_API_KEY": KEY},
    )  # fmt: skip
    scrapes = []
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        done = run.poll() is not None
        text = _scrape(port)
        if text:
            scrapes.append(text)
        if done:
            break
        time.sleep(0.2)
    out, err = run.communicate(timeout=60)
    assert run.returncode == 0, out + err
    assert scrapes, "the exporter never answered"
    metrics, labels = set(), set()
    for text in scrapes:
        for m in re.finditer(r"^([a-zA-Z_:][\w:]*)(\{[^}]*\})?\s", text, re.M):
            metrics.add(m.group(1))
            labels |= set(re.findall(r'(\w+)="', m.group(2) or ""))
    return metrics, labels


def test_the_dashboard_queries_only_served_metrics_and_labels(
    emulator: str, tmp_path: Path
) -> None:
    served_metrics, served_labels = served_names(emulator, tmp_path)
    assert "gpubench_request_duration_seconds_bucket" in served_metrics
    dashboard = json.loads(DASHBOARD.read_text())
    queries = [
        (panel["title"], target["expr"])
        for panel in dashboard["panels"]
        for target in panel.get("targets", [])
    ]
    queries += [
        (v["name"], v["definition"])
        for v in dashboard["templating"]["list"]
        if v["type"] == "query"
    ]
    assert queries
    missing = []
    for title, expr in queries:
        metrics, labels = names_in(expr)
        assert metrics, (title, expr)  # every panel asks for something
        missing += [f"{title}: metric {m}" for m in sorted(metrics - served_metrics)]
        missing += [f"{title}: label {lb}" for lb in sorted(labels - served_labels)]
    assert not missing, "the dashboard asks for what gpubench does not serve:\n" + "\n".join(
        missing
    )
