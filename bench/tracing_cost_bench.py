"""Tracing's own CPU per request, in process: the spans, metrics and OTLP encoding of one request
with one HTTP call, as the runner and the transport make them, without the network around it.

Run by hand (not a test): ``python bench/tracing_cost_bench.py [--base DIR] [--pairs 3]``.

Each measurement is a fresh process pinned to CPU 1 that records 20,000 requests (after 2,000 to
warm up) through ``Instruments.record`` into an SDK ``TracerProvider`` whose exporter encodes
every 512 spans as OTLP (nothing is sent: encoding is the exporter's CPU; sending is a few
microseconds a batch), and a ``MeterProvider``; CPU per request is ``time.process_time``. With
``--base DIR`` (an older ``gpubench_sdk``, e.g. ``git archive c86848f gpubench_sdk | tar -x -C
DIR``) the older tree's path runs alternately: its live spans (``begin``, the transport's span,
``leave``, ``record``) and the SDK's encoder. Whole-client figures: ``bench/hotpath_bench.py``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).parents[1]
REQUESTS, WARM = 20_000, 2_000


def _measure() -> dict[str, Any]:
    import httpx
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter, SpanExportResult

    from gpubench_sdk._base._types import Invocation, Outcome, Phase
    from gpubench_sdk._runner import _telemetry
    from gpubench_sdk._transport import _spans

    try:
        from gpubench_sdk._runner._otlp import encode_spans

        late = True
    except ImportError:  # the older tree: the SDK's encoder
        from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans as sdk

        def encode_spans(spans: Any) -> bytes:
            return bytes(sdk(spans).SerializePartialToString())

        late = False

    class Encoding(SpanExporter):
        def __init__(self) -> None:
            self.batch: list[ReadableSpan] = []

        def export(self, spans: Any) -> SpanExportResult:
            self.batch.extend(spans)
            if len(self.batch) >= 512:
                encode_spans(self.batch)
                self.batch = []
            return SpanExportResult.SUCCESS

    provider = TracerProvider(resource=Resource.create({"service.name": "bench"}))
    provider.add_span_processor(SimpleSpanProcessor(Encoding()))
    instruments = _telemetry.Instruments(tracer_provider=provider, meter_provider=MeterProvider())
    tracer = instruments.tracer
    attrs = {
        "gpubench.target": "t", "gpubench.provider": "http", "gpubench.workload": "any",
        "gpubench.scenario": "burst", "gpubench.scenario.index": 0,
        "gpubench.scenario.name": "burst-0", "gpubench.endpoint": "http://127.0.0.1:8080/instant",
    }  # fmt: skip
    url = httpx.URL("http://127.0.0.1:8080/instant")

    def one(seq: int) -> None:
        wall, t0 = time.time_ns(), time.perf_counter_ns()
        if late:
            from gpubench_sdk._transport._request import record_calls

            log = record_calls(True)
            span = _spans.start_span(tracer, *_spans.span_start_args("GET", url))
            _spans.note_status(span, 200)
            span.end()
            end = time.perf_counter_ns()
            inv = Invocation(
                "t", 0, seq, Phase.MEASURE, 0, 1000, 1000 + end - t0, wall, Outcome.OK,
                http_status=200, request_id=f"r{seq}",
            )  # fmt: skip
            calls = [
                (c.name, c.attributes, wall + c.start_ns - t0, wall + (c.end_ns or end) - t0,
                 c.status)
                for c in log.spans or ()
            ]  # fmt: skip
            instruments.record(inv, attrs, calls)
        else:
            begun = instruments.begin(wall)  # type: ignore[attr-defined]
            span = _spans._start(tracer, "GET", url)
            _spans.note_status(span, 200)
            span.end()
            instruments.leave(begun)  # type: ignore[attr-defined]
            end = time.perf_counter_ns()
            inv = Invocation(
                "t", 0, seq, Phase.MEASURE, 0, 1000, 1000 + end - t0, wall, Outcome.OK,
                http_status=200, request_id=f"r{seq}",
            )  # fmt: skip
            instruments.record(inv, attrs, begun)

    instruments.batch_counts()
    for seq in range(WARM):
        one(seq)
    cpu = time.process_time()
    for seq in range(REQUESTS):
        one(seq)
    return {"late": late, "cpu_us": (time.process_time() - cpu) / REQUESTS * 1e6}


def _run(tree: str) -> dict[str, Any]:
    pin = ["taskset", "-c", "1"] if os.path.exists("/usr/bin/taskset") else []
    env = {**os.environ, "PYTHONPATH": tree}
    cmd = [*pin, sys.executable, __file__, "--child"]
    out = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=ROOT, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--base", help="directory with the 'before' gpubench_sdk")
    parser.add_argument("--pairs", type=int, default=3)
    parser.add_argument("--child", action="store_true")
    ns = parser.parse_args()
    if ns.child:
        print(json.dumps(_measure()))
        return
    runs: dict[str, list[float]] = {"now": [], "before": []}
    for _ in range(ns.pairs):
        if ns.base:
            runs["before"].append(_run(ns.base)["cpu_us"])
        runs["now"].append(_run(str(ROOT))["cpu_us"])
        print({k: [round(x) for x in v] for k, v in runs.items()}, flush=True)
    now = statistics.median(runs["now"])
    line = f"tracing work per request: {now:.0f} us (median of {ns.pairs})"
    if ns.base:
        before = statistics.median(runs["before"])
        line += f"; before {before:.0f} us; now / before {now / before:.2f}x"
    print(line)


if __name__ == "__main__":
    main()
