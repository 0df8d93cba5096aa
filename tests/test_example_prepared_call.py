"""``examples/prepared_call.py`` runs: a provider on ``PreparedCall`` and the same provider on
an httpx call, each measuring every request (with its first byte) against a loopback model,
and the same pair streaming (``call.stream`` against ``client.stream``)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_the_prepared_call_example_runs() -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "prepared_call.py")],
        capture_output=True, text=True, timeout=120, env=env, cwd=ROOT,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    lines = proc.stdout.splitlines()
    assert any(line.strip().startswith("PreparedCall: 300/300 ok") for line in lines)
    assert any(line.strip().startswith("httpx call: 300/300 ok") for line in lines)
    assert any(line.strip().startswith("PreparedCall stream: 300/300 ok") for line in lines)
    assert any(line.strip().startswith("httpx stream: 300/300 ok") for line in lines)
