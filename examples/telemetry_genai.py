"""The GenAI client metrics of streamed LLM requests, exported over OTLP/HTTP.

Run: python examples/telemetry_genai.py [OTLP_ENDPOINT]

An OpenAI-compatible endpoint is emulated on loopback (16 tokens an answer, streamed). Twenty
streamed completions run at 4 concurrent with ``telemetry.configure(otlp_endpoint=...)``, which
exports to a local OTLP/HTTP receiver (or to your collector, given its endpoint). Each request
records the semantic conventions' ``gen_ai.client.operation.duration``,
``gen_ai.client.operation.time_to_first_chunk``, ``gen_ai.client.token.usage`` (input and
output) and one ``gen_ai.client.operation.time_per_output_chunk`` per gap between tokens. With
``configure``'s reader alone, gpubench aggregates those histograms itself and the exporter adds
them to each export as the SDK's own points (the SDK's ``Histogram.record`` cost more than the
rest of tracing on these streams): the script prints what the receiver got.
"""

from __future__ import annotations

import sys
import tempfile
from typing import Any

import anyio
from gpubench_openai import OpenAIProvider
from gpubench_openai.emulator import make_app

import gpubench_sdk as gb
from gpubench_sdk import telemetry
from gpubench_sdk.testing import FleetConfig, SimulatedFleet, otlp_receiver, serve

REQUESTS, TOKENS = 20, 16
SHOWN = (
    telemetry.METRIC_GENAI_DURATION,
    telemetry.METRIC_GENAI_TTFC,
    telemetry.METRIC_GENAI_TPOC,
    telemetry.METRIC_GENAI_TOKENS,
)


def measure(otlp_endpoint: str) -> str:
    """Run the streams with telemetry exported to ``otlp_endpoint``; the run's status."""
    setup = telemetry.configure(otlp_endpoint=otlp_endpoint, set_global=False)
    fleet = SimulatedFleet(FleetConfig(min_workers=1, max_workers=1))
    with serve(make_app(fleet, model="tiny")) as served, tempfile.TemporaryDirectory() as tmp:
        provider = OpenAIProvider(base_url=f"{served.url}/v1", model="tiny")
        result = anyio.run(
            lambda: gb.run(
                {"llm": provider},
                gb.LLMCompletion(prompt_tokens=8, max_tokens=TOKENS, stream=True),
                [gb.Burst(total=REQUESTS, concurrency=4)],
                store=f"{tmp}/genai.sqlite",
                instruments=setup.instruments(),
            )
        )
    setup.shutdown()  # the final export: every request's values are in it
    return str(result.status)


def describe(points: list[Any]) -> str:
    """A histogram's points (one per attribute set) as count, mean and the median's bucket."""
    count = sum(p.count for p in points)
    total = sum(p.sum for p in points)
    buckets = [sum(counts) for counts in zip(*(p.bucket_counts for p in points), strict=True)]
    bounds = list(points[0].explicit_bounds)
    seen, median = 0, "+inf"
    for bound, n in zip([*bounds, float("inf")], buckets, strict=True):
        seen += n
        if seen * 2 >= count:
            median = f"<= {bound:g}"
            break
    return f"count {count}, mean {total / max(count, 1):.4g}, median {median}"


def main(endpoint: str | None) -> None:
    if endpoint:
        print(f"run {measure(endpoint)}: metrics sent to {endpoint}")
        return
    with otlp_receiver() as (url, received):
        status = measure(url)
        print(f"run {status}: {len(received.metrics)} OTLP metric exports received")
        for name in SHOWN:
            points = received.metric_points(name)
            print(f"{name}: {describe(points) if points else 'none'}")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else None)
