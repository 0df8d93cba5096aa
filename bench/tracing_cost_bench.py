"""Tracing's own CPU per request, in process: the spans, metrics and OTLP encoding of one request
with one HTTP call, as the runner and the transport make them, without the network around it.

Run by hand (not a test): ``python bench/tracing_cost_bench.py [--base DIR] [--pairs 3]``.

Each measurement is a fresh process pinned to CPU 1 that records 20,000 requests (after 2,000 to
warm up) through ``Instruments.record`` with the providers ``telemetry.configure(otlp_endpoint=)``
makes (the batch span processor and gpubench's OTLP exporter, the periodic metric reader),
exporting to an OTLP/HTTP receiver in the driver's process; CPU per request is
``time.process_time`` of the whole process, the exporter's thread included, up to the end of
``shutdown`` (the last batch sent). ``--sdk``: a provider the user brings instead (the SDK's
span objects, gpubench's encoder), the path of anyone who does not use ``configure``; ``--llm``:
a 16-token stream's request (GenAI attributes and metrics, one chunk time per token). With
``--base DIR`` (an older ``gpubench_sdk``, e.g. ``git worktree add DIR 5f97ab3``, or ``git
archive c86848f gpubench_sdk | tar -x -C DIR``) the older tree's path runs alternately (for a
tree before 5f97ab3: its live spans, ``begin``, the transport's span, ``leave``, ``record``).
Whole-client figures: ``bench/hotpath_bench.py``, ``bench/client_tail_bench.py --otlp``.
"""

from __future__ import annotations

import argparse
import asyncio
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


def _measure(otlp: str, sdk: bool, llm: bool) -> dict[str, Any]:
    import httpx
    from opentelemetry.sdk.trace import TracerProvider

    from gpubench_sdk import telemetry
    from gpubench_sdk._base._types import Invocation, Outcome, Phase
    from gpubench_sdk._runner import _telemetry
    from gpubench_sdk._transport import _spans

    late = hasattr(_spans, "span_start_args")  # the tree notes spans during a request
    setup = telemetry.configure(otlp_endpoint=otlp, service_name="bench", set_global=False)
    provider: Any = setup.tracer_provider
    if sdk:  # the user's own provider, with the same processor: the SDK's spans
        provider = TracerProvider(resource=provider.resource)
        for processor in setup.tracer_provider._active_span_processor._span_processors:
            provider.add_span_processor(processor)
    instruments = _telemetry.Instruments(
        tracer_provider=provider, meter_provider=setup.meter_provider
    )
    tracer = instruments.tracer
    attrs = {
        "gpubench.target": "t", "gpubench.provider": "http", "gpubench.workload": "any",
        "gpubench.scenario": "burst", "gpubench.scenario.index": 0,
        "gpubench.scenario.name": "burst-0", "gpubench.endpoint": "http://127.0.0.1:8080/instant",
    }  # fmt: skip
    # --llm: a 16-token stream's request (the GenAI attributes and metrics, a chunk time each)
    shape: dict[str, Any] = {}
    if llm:
        attrs["gpubench.workload"] = "llm"
        attrs["gen_ai.request.model"] = "m"
        times = [2000 + 100 * i for i in range(16)]
        shape = {"input_units": 8, "output_units": 16, "token_times_ns": times}
    url = httpx.URL("http://127.0.0.1:8080/instant")
    prepared = _spans.span_start_args("GET", url) if late else None

    def one(seq: int) -> None:
        wall, t0 = time.time_ns(), time.perf_counter_ns()
        if late:
            from gpubench_sdk._transport._request import record_calls

            log = record_calls(True)
            span = _spans.start_span(tracer, *prepared)  # as a PreparedCall: args made once
            _spans.note_status(span, 200)
            span.end()
            end = time.perf_counter_ns()
            inv = Invocation(
                "t", 0, seq, Phase.MEASURE, 0, 1000, 1000 + end - t0, wall, Outcome.OK,
                http_status=200, request_id=f"r{seq}", **shape,
            )  # fmt: skip
            calls = [
                (c.name, c.attributes, *((c.more,) if hasattr(c, "more") else ()),
                 wall + c.start_ns - t0, wall + (c.end_ns or end) - t0, c.status)
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

    # As a run records: in batches (an older tree: batch_counts), on an event loop (a busy one:
    # nothing awaits, so batches fill up as at full load).
    batch = getattr(instruments, "batch", None) or instruments.batch_counts
    cpu = 0.0

    async def requests() -> None:
        nonlocal cpu
        batch()
        for seq in range(WARM):
            one(seq)
        cpu = time.process_time()
        for seq in range(REQUESTS):
            one(seq)
        instruments.flush()

    asyncio.run(requests())
    setup.shutdown()  # the last batch sent: the exporter's CPU is the run's too
    direct = getattr(instruments, "_direct", None) is not None
    return {"late": late, "direct": direct,
            "cpu_us": (time.process_time() - cpu) / REQUESTS * 1e6}  # fmt: skip


def _run(tree: str, otlp: str, sdk: bool, llm: bool) -> dict[str, Any]:
    pin = ["taskset", "-c", "1"] if os.path.exists("/usr/bin/taskset") else []
    env = {**os.environ, "PYTHONPATH": tree}
    cmd = [*pin, sys.executable, __file__, "--child", otlp]
    cmd += (["--sdk"] if sdk else []) + (["--llm"] if llm else [])
    out = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=ROOT, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--base", help="directory with the 'before' gpubench_sdk")
    parser.add_argument("--pairs", type=int, default=3)
    parser.add_argument("--sdk", action="store_true", help="a provider the user brings")
    parser.add_argument("--llm", action="store_true", help="a 16-token stream's request")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    ns = parser.parse_args()
    if ns.child:
        print(json.dumps(_measure(ns.child, ns.sdk, ns.llm)))
        return
    from gpubench_sdk.testing._otlp import otlp_receiver

    runs: dict[str, list[float]] = {"now": [], "before": []}
    with otlp_receiver() as (otlp, received):
        for _ in range(ns.pairs):
            if ns.base:
                runs["before"].append(_run(ns.base, otlp, ns.sdk, ns.llm)["cpu_us"])
            last = _run(str(ROOT), otlp, ns.sdk, ns.llm)
            runs["now"].append(last["cpu_us"])
            print({k: [round(x) for x in v] for k, v in runs.items()}, flush=True)
        spans = len(received.spans())
    now = statistics.median(runs["now"])
    path = "the SDK's spans" if ns.sdk else "configure's" + (" (direct)" if last["direct"] else "")
    line = f"tracing work per request, {path}: {now:.0f} us (median of {ns.pairs}; {spans} spans)"
    if ns.base:
        before = statistics.median(runs["before"])
        line += f"; before {before:.0f} us; now / before {now / before:.2f}x"
    print(line)


if __name__ == "__main__":
    main()
