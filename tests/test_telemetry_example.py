"""``examples/telemetry_spans.py`` runs and shows each request's HTTP calls as its child spans."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).parents[1]


def _run_example(name: str) -> str:
    """What ``examples/NAME`` printed, once it exited 0."""
    done = subprocess.run(
        [sys.executable, str(ROOT / "examples" / name)], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


def test_the_example_prints_the_submit_and_polls_under_each_request() -> None:
    out = _run_example("telemetry_spans.py")
    assert out.startswith("run completed:")
    requests = out.split("gpubench.invoke ")[1:]
    assert [r.split()[1] for r in requests] == [
        "phase=warmup", "phase=measure", "phase=measure", "phase=measure"
    ]  # fmt: skip
    for block in requests:
        calls = re.findall(r"^  (POST|GET)\s+(\d{3}) (\S+)", block, flags=re.M)
        assert calls[0][0] == "POST" and calls[0][2].endswith("/v2/ep1/run"), block
        polls = calls[1:]
        assert polls and all(m == "GET" and "/v2/ep1/status/" in u for m, _, u in polls), block
        assert {s for _, s, _ in calls} == {"200"}
    assert "gpubench.requests by gpubench.phase: {'measure': 3, 'warmup': 1}" in out
    assert "rp-example-key" not in out


def test_the_genai_example_exports_every_streamed_requests_histograms() -> None:
    """``examples/telemetry_genai.py``: configure's OTLP export carries the GenAI histograms of
    every request (aggregated by gpubench), one chunk time per gap between its 16 tokens."""
    lines = _run_example("telemetry_genai.py").splitlines()
    assert lines[0].startswith("run completed: ") and "OTLP metric exports received" in lines[0]
    counts = {line.split(":")[0]: int(line.split("count ")[1].split(",")[0]) for line in lines[1:]}
    assert counts == {
        "gen_ai.client.operation.duration": 20,
        "gen_ai.client.operation.time_to_first_chunk": 20,
        "gen_ai.client.operation.time_per_output_chunk": 20 * 15,
        "gen_ai.client.token.usage": 40,  # input and output, each request
    }
