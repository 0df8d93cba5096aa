"""`gpubench run --otlp-endpoint`: spans and metrics arrive at a real OTLP/HTTP receiver."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from aiohttp import web
from conftest import LoopbackServer
from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import (
    ExportMetricsServiceRequest,
)
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from gpubench_sdk import Store

PLAN = """
[workload]
kind = "probe"

[[targets]]
name = "loc"
provider = "local"
handler = "gpubench_sdk._local.demo:echo"
load = ""

[[scenarios]]
kind = "burst"
total = 15
concurrency = 3
"""


def otlp_receiver() -> tuple[web.Application, dict[str, list[bytes]]]:
    received: dict[str, list[bytes]] = {"traces": [], "metrics": []}

    async def collect(request: web.Request) -> web.Response:
        assert request.content_type == "application/x-protobuf"
        received[request.match_info["signal"]].append(await request.read())
        return web.Response(body=b"", content_type="application/x-protobuf")

    app = web.Application()
    app.router.add_post("/v1/{signal}", collect)
    return app, received


def test_spans_and_metrics_reach_the_collector(tmp_path: Path) -> None:
    app, received = otlp_receiver()
    plan = tmp_path / "p.toml"
    plan.write_text(PLAN)
    with LoopbackServer(app) as collector:
        proc = subprocess.run(
            [
                sys.executable,
                "-m",
                "gpubench_sdk",
                "run",
                str(plan),
                "-o",
                str(tmp_path / "o.sqlite"),
                "--quiet",
                "--otlp-endpoint",
                collector.url,
            ],
            capture_output=True,
            text=True,
            timeout=120,
        )
    assert proc.returncode == 0, proc.stderr
    spans = []
    for body in received["traces"]:
        req = ExportTraceServiceRequest.FromString(body)
        for rs in req.resource_spans:
            service = {a.key: a.value.string_value for a in rs.resource.attributes}["service.name"]
            assert service == "gpubench"
            spans += [sp for ss in rs.scope_spans for sp in ss.spans]
    invoke = [sp for sp in spans if sp.name == "gpubench.invoke"]
    assert len(invoke) == 15
    with Store(tmp_path / "o.sqlite") as s:
        invs = {i.seq: i for i in s.invocations(s.run("latest").id)}
    for sp in invoke:
        attrs = {a.key: a.value for a in sp.attributes}
        inv = invs[attrs["gpubench.seq"].int_value]
        assert attrs["gpubench.provider"].string_value == "local"
        assert attrs["gpubench.outcome"].string_value == "ok"
        assert sp.start_time_unix_nano == inv.wall_start_ns
        children = [c for c in spans if c.parent_span_id == sp.span_id]
        expected = {"gpubench.queue", "gpubench.execution"}
        if inv.cold:  # the fresh runtime's first worker boots for a request: a cold start
            expected.add("gpubench.cold_start")
        assert {c.name for c in children} == expected
    metric_names = set()
    for body in received["metrics"]:
        req = ExportMetricsServiceRequest.FromString(body)
        for rm in req.resource_metrics:
            for sm in rm.scope_metrics:
                metric_names |= {m.name for m in sm.metrics}
    assert any(i.cold for i in invs.values())
    assert {"gpubench.request.duration", "gpubench.requests", "gpubench.cold_start.duration"} <= (
        metric_names
    )
