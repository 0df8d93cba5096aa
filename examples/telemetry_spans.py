"""Spans by OpenTelemetry's conventions: each request, and under it each HTTP call it made.

Run: python examples/telemetry_spans.py [OTLP_ENDPOINT]

A RunPod endpoint is emulated on loopback (``/run``, then ``/status`` polls until the job is
done). Three requests are measured after one warm-up; the spans are kept in memory and printed
as a tree: ``gpubench.invoke`` per request, with a ``POST`` for the submit and a ``GET`` per
poll as HTTP client spans (``http.request.method``, ``url.full``, ``server.address``,
``server.port``, ``http.response.status_code``), then the metric points' ``gpubench.phase``.
Give an OTLP/HTTP endpoint (``http://localhost:4318``) to send them to a collector as well.
"""

from __future__ import annotations

import sys
import tempfile
from collections import Counter

import anyio
from gpubench_runpod import RunPodProvider
from gpubench_runpod.emulator import make_app

import gpubench_sdk as gb
from gpubench_sdk import telemetry
from gpubench_sdk.testing import FleetConfig, SimulatedFleet, serve

KEY = "rp-example-key"


def main(otlp_endpoint: str | None) -> None:
    fleet = SimulatedFleet(FleetConfig(max_workers=1))
    setup = telemetry.configure(in_memory=True, otlp_endpoint=otlp_endpoint, set_global=False)
    with (
        serve(make_app(fleet, api_key=KEY, endpoint_id="ep1")) as served,
        tempfile.TemporaryDirectory() as tmp,
    ):
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
                gb.EchoProbe(sleep_ms=60),
                [gb.Burst(total=3, concurrency=1, warmup=1)],
                store=f"{tmp}/spans.sqlite",
                instruments=setup.instruments(),
            )
        )
    assert setup.spans is not None and setup.metric_reader is not None
    spans = setup.spans.get_finished_spans()
    print(f"run {result.status}: {len(spans)} spans")
    for invoke in sorted(
        (s for s in spans if s.name == telemetry.SPAN_INVOKE), key=lambda s: s.start_time or 0
    ):
        attrs = invoke.attributes or {}
        print(
            f"{invoke.name} seq={attrs['gpubench.seq']} phase={attrs['gpubench.phase']} "
            f"scenario={attrs['gpubench.scenario.name']}"
        )
        calls = [s for s in spans if s.parent and s.parent.span_id == invoke.context.span_id]
        for call in sorted(calls, key=lambda s: s.start_time or 0):
            a = call.attributes or {}
            if "http.request.method" in a:
                ms = ((call.end_time or 0) - (call.start_time or 0)) / 1e6
                print(
                    f"  {call.name:<5} {a['http.response.status_code']} {a['url.full']} "
                    f"({a['server.address']}:{a['server.port']}, {ms:.1f} ms)"
                )
    phases: Counter[str] = Counter()
    for rm in setup.metric_reader.get_metrics_data().resource_metrics:
        for sm in rm.scope_metrics:
            for metric in sm.metrics:
                if metric.name == telemetry.METRIC_REQUESTS:
                    for point in metric.data.data_points:
                        phases[str(point.attributes["gpubench.phase"])] += int(point.value)
    print(f"{telemetry.METRIC_REQUESTS} by gpubench.phase: {dict(sorted(phases.items()))}")
    setup.shutdown()


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else None)
