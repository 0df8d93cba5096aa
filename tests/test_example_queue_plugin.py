"""``examples/queue_plugin``: a queue-style provider written with ``run_job`` in under 100
lines passes the whole conformance suite against its queue API over loopback HTTP."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from gpubench_sdk.testing import ASGIApp, ProviderConformance, SimulatedFleet

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "queue_plugin"
sys.path.insert(0, str(EXAMPLE))

from queue_provider import QueueProvider  # noqa: E402
from queue_server import queue_api  # noqa: E402


class TestQueueExampleConformance(ProviderConformance):
    provider_class = QueueProvider

    def make_emulator(self, fleet: SimulatedFleet) -> ASGIApp:
        return queue_api(fleet, self.api_key)

    def options(self, url: str) -> dict[str, Any]:
        return {"url": url, "poll_interval_s": 0.01}


def test_the_provider_is_under_100_lines() -> None:
    lines = (EXAMPLE / "queue_provider.py").read_text().splitlines()
    assert len(lines) < 100, len(lines)
    assert not any("gpubench_runpod" in line or "._" in line for line in lines if "import" in line)
