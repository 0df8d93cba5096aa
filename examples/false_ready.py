"""False "ready": an endpoint whose workers say ready before their model has loaded.

Run: python examples/false_ready.py

A RunPod endpoint is emulated on loopback with two workers kept up (``workersMin`` 2) whose
health check answers ready a second before the model is loaded (``false_ready_s=1.0``: the
model loads on each worker's first request). A request every 0.25 s for 4 s is measured. The
RunPod plugin reads the workers from ``/health`` during the run; when it ends, gpubench finds
the first request after each "ready" that was far slower than the warm ones, counts it as cold
(the cold-tail) and says so. The fleet's own record of the requests it slowed is printed beside.
"""

from __future__ import annotations

import tempfile

import anyio
from gpubench_runpod import RunPodProvider
from gpubench_runpod.emulator import make_app

import gpubench_sdk as gb
from gpubench_sdk import metrics
from gpubench_sdk.testing import Duration, FleetConfig, SimulatedFleet, serve

KEY = "rp-example-key"


def main() -> None:
    fleet = SimulatedFleet(
        FleetConfig(cold_start=Duration.fixed(0.3), min_workers=2, max_workers=2, false_ready_s=1.0)
    )
    with (
        serve(make_app(fleet, api_key=KEY, endpoint_id="ep1")) as served,
        tempfile.TemporaryDirectory() as tmp,
    ):
        fleet.wait_for(lambda c: c.idle == 2, timeout_s=10)  # deployed and said ready
        provider = RunPodProvider(
            api_key=KEY,
            endpoint_id="ep1",
            base_url=f"{served.url}/v2",
            rest_url=f"{served.url}/v1",
            poll_interval_s=0.02,
        )
        result = anyio.run(
            lambda: gb.run(
                {"runpod": provider},
                gb.EchoProbe(sleep_ms=50),
                [gb.Rate(rps=4, duration_s=4)],
                store=f"{tmp}/ready.sqlite",
                fleet_interval_s=0.1,
            )
        )
        slowed = sum(t.false_ready for t in fleet.truths())
        with gb.Store(result.store_path, readonly=True) as store:
            found = metrics.run_false_ready(store, result.run_id, target="runpod")
            cold = metrics.run_cold_starts(store, result.run_id, target="runpod")
    print(f"run {result.status}: {result.requests} requests")
    print(f"the fleet slowed {slowed} requests with a false ready")
    if found is None:
        print("nothing to judge by (no fleet readings, or too few warm requests)")
        return
    print(f"gpubench: {found.text}")
    print(f"counted as cold: {cold.rate.cold} of {cold.rate.known} requests")


if __name__ == "__main__":
    main()
