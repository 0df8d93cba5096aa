"""SageMaker asynchronous inference through the runner, its spans at a real OTLP/HTTP receiver:
each request's S3 upload, ``InvokeEndpointAsync`` and S3 output polls are HTTP client spans by
the semantic conventions (botocore's calls, opened from its events), against moto over HTTP."""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from pathlib import Path

from test_sagemaker_moto import SECRET, moto_url, provider, queue_results

from gpubench_sdk import Burst, EchoProbe, run, telemetry
from gpubench_sdk.testing import check_exported, otlp_receiver
from gpubench_sdk.testing import span_attributes as attributes

__all__ = ["moto_url"]  # the module-scoped moto server fixture, shared


def test_async_inference_calls_are_http_client_spans(moto_url: str, tmp_path: Path) -> None:
    probe = EchoProbe(sleep_ms=0, payload_bytes=24)
    echo = json.dumps({"echo": probe.request(0).payload["echo"]})
    queue_results(moto_url, "async-endpoint-results", [{"data": echo}])
    with otlp_receiver() as (url, received):
        setup = telemetry.configure(otlp_endpoint=url, set_global=False)
        result = asyncio.run(
            run(
                {
                    "sm": provider(
                        moto_url, async_input_s3="s3://inputs/spans", async_poll_interval_s=0.05
                    )
                },
                probe,
                [Burst(total=2, concurrency=1, warmup=1)],
                store=tmp_path / "s.sqlite",
                instruments=setup.instruments(),
            )
        )
        setup.shutdown()
    assert result.status == "completed"
    calls = check_exported(received, secret=SECRET, warmup=1, measured=2)
    assert calls >= 3 * 3  # per request: the S3 upload, the async invoke, >= 1 output read
    methods = Counter(
        attributes(s)["http.request.method"]
        for s in received.spans()
        if not s.name.startswith("gpubench.")
    )
    assert methods["PUT"] >= 3 and methods["POST"] >= 3 and methods["GET"] >= 3, methods
