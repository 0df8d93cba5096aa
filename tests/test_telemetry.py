"""Spans and metrics match the stored Invocations, through the OpenTelemetry SDK."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import EchoProvider, LoopbackServer

from gpubench_sdk import Burst, EchoProbe, Store, run, telemetry
from gpubench_sdk._runner._telemetry import Instruments

pytestmark = pytest.mark.anyio


async def test_one_span_per_invocation_with_phase_children(
    echo_server: LoopbackServer, tmp_path: Path
) -> None:
    setup = telemetry.configure(in_memory=True, set_global=False)
    result = await run(
        {"a": EchoProvider(url=echo_server.url, mode="ok")},
        EchoProbe(sleep_ms=1),
        [Burst(total=12, concurrency=3)],
        store=tmp_path / "r.sqlite",
        instruments=setup.instruments(),
    )
    with Store(tmp_path / "r.sqlite") as s:
        invs = {i.seq: i for i in s.invocations(result.run_id)}
    assert setup.spans is not None
    spans = setup.spans.get_finished_spans()
    roots = [sp for sp in spans if sp.name == telemetry.SPAN_INVOKE]
    assert len(roots) == 12
    for sp in roots:
        attrs = dict(sp.attributes or {})
        inv = invs[attrs["gpubench.seq"]]
        assert attrs["gpubench.provider"] == "echo-test"
        assert attrs["gpubench.target"] == "a"
        assert attrs["gpubench.outcome"] == "ok"
        assert attrs["gpubench.request_id"] == "req-1"
        assert attrs["http.response.status_code"] == 200
        assert sp.start_time == inv.wall_start_ns
        assert sp.end_time == inv.wall_start_ns + (inv.end_ns - inv.start_ns)
        children = [
            c for c in spans if c.parent is not None and c.parent.span_id == sp.context.span_id
        ]
        names = {c.name: c for c in children}
        assert set(names) == {telemetry.SPAN_QUEUE, telemetry.SPAN_EXECUTION, "POST"}
        http = dict(names["POST"].attributes or {})  # the HTTP call, by the HTTP semconv
        assert http["http.request.method"] == "POST"
        assert http["http.response.status_code"] == 200
        assert http["url.full"].startswith(echo_server.url)
        assert http["server.address"] == "127.0.0.1"
        assert names["POST"].kind.name == "CLIENT"
        assert sp.start_time <= names["POST"].start_time <= names["POST"].end_time  # type: ignore[operator]
        assert attrs["gpubench.phase"] == "measure"
        assert attrs["gpubench.scenario.index"] == 0
        assert attrs["gpubench.scenario.name"] == "burst-0"
        q, e = names[telemetry.SPAN_QUEUE], names[telemetry.SPAN_EXECUTION]
        assert q.end_time - q.start_time == 500_000  # type: ignore[operator]
        assert e.start_time == q.end_time and e.end_time - e.start_time == 1_500_000  # type: ignore[operator]
    assert setup.metric_reader is not None
    data = setup.metric_reader.get_metrics_data()
    metrics = {
        m.name: m for rm in data.resource_metrics for sm in rm.scope_metrics for m in sm.metrics
    }
    assert sum(p.count for p in metrics[telemetry.METRIC_DURATION].data.data_points) == 12
    requests = metrics[telemetry.METRIC_REQUESTS].data.data_points
    assert {dict(p.attributes)["gpubench.outcome"]: p.value for p in requests} == {"ok": 12}
    setup.shutdown()


async def test_error_spans_carry_status(echo_server: LoopbackServer, tmp_path: Path) -> None:
    setup = telemetry.configure(in_memory=True, set_global=False)
    await run(
        {"a": EchoProvider(url=echo_server.url, mode="503")},
        EchoProbe(),
        [Burst(2, 1)],
        store=tmp_path / "r.sqlite",
        instruments=setup.instruments(),
    )
    assert setup.spans is not None
    spans = setup.spans.get_finished_spans()
    (sp, _) = [s for s in spans if s.name == telemetry.SPAN_INVOKE]
    attrs = dict(sp.attributes or {})
    # semconv: the status code as a string for an HTTP error; gpubench's class stays alongside
    assert attrs["error.type"] == "503"
    assert attrs["gpubench.outcome"] == "http_5xx"
    assert attrs["http.response.status_code"] == 503
    assert sp.status.status_code.name == "ERROR"
    # ... and the HTTP client span of the call says the same, by the HTTP conventions
    http = [s for s in spans if s.parent is not None and s.parent.span_id == sp.context.span_id]
    (call,) = [s for s in http if s.name == "POST"]
    assert (call.attributes or {})["error.type"] == "503"
    assert (call.attributes or {})["http.response.status_code"] == 503
    assert call.status.status_code.name == "ERROR"


async def test_unreachable_collector_never_reaches_the_caller(
    echo_server: LoopbackServer, tmp_path: Path
) -> None:
    setup = telemetry.configure(otlp_endpoint="http://127.0.0.1:9", set_global=False)
    result = await run(
        {"a": EchoProvider(url=echo_server.url)},
        EchoProbe(),
        [Burst(5, 1)],
        store=tmp_path / "r.sqlite",
        instruments=setup.instruments(),
    )
    assert result.status == "completed"
    setup.shutdown()  # export fails inside the SDK; nothing raised here


async def test_without_sdk_instrumentation_is_a_no_op(
    echo_server: LoopbackServer, tmp_path: Path
) -> None:
    instruments = Instruments()  # global API providers, never configured in this process
    result = await run(
        {"a": EchoProvider(url=echo_server.url)},
        EchoProbe(),
        [Burst(3, 1)],
        store=tmp_path / "r.sqlite",
        instruments=instruments,
    )
    assert result.status == "completed"
    assert instruments.enabled is False
    assert telemetry.configure(in_memory=True, set_global=False).instruments().enabled is True


def test_streamed_llm_request_records_genai_metrics() -> None:
    """TTFT on the span and semconv's time to first chunk / time per output chunk metrics."""
    from gpubench_sdk import Invocation, Outcome, Phase

    setup = telemetry.configure(in_memory=True, set_global=False)
    ms = 1_000_000
    tokens = [40 * ms, 45 * ms, 52 * ms, 60 * ms]  # since the run's origin, like start_ns
    inv = Invocation(
        target="t", scenario=0, seq=0, phase=Phase.MEASURE, scheduled_ns=9 * ms,
        start_ns=10 * ms, end_ns=61 * ms, wall_start_ns=1_700_000_000 * 10**9,
        outcome=Outcome.OK, http_status=200, input_units=7, output_units=4,
        token_times_ns=tokens,
    )  # fmt: skip
    base = {"gpubench.workload": "llm", "gpubench.endpoint": "https://api.example.com/v1"}
    setup.instruments().record(inv, base)
    assert setup.spans is not None and setup.metric_reader is not None
    (span,) = setup.spans.get_finished_spans()
    attrs = dict(span.attributes or {})
    assert attrs["gpubench.ttft_ms"] == pytest.approx(31.0)  # from the scheduled send
    assert attrs["server.address"] == "api.example.com" and attrs["server.port"] == 443
    assert attrs["gen_ai.usage.input_tokens"] == 7
    data = setup.metric_reader.get_metrics_data()
    assert data is not None
    found = {
        m.name: m for rm in data.resource_metrics for sm in rm.scope_metrics for m in sm.metrics
    }
    (ttfc,) = found[telemetry.METRIC_GENAI_TTFC].data.data_points
    assert ttfc.count == 1 and ttfc.sum == pytest.approx(0.031)
    (tpoc,) = found[telemetry.METRIC_GENAI_TPOC].data.data_points
    assert tpoc.count == 3 and tpoc.sum == pytest.approx(0.020)  # 5 + 7 + 8 ms
    usage = found[telemetry.METRIC_GENAI_TOKENS].data.data_points
    assert {dict(p.attributes)["gen_ai.token.type"]: p.sum for p in usage} == {
        "input": 7,
        "output": 4,
    }
    setup.shutdown()


class ModelOptions(EchoProvider.Options):
    model: str = "llama-3-8b"


class ModelProvider(EchoProvider):
    Options = ModelOptions


async def test_spans_name_the_model_a_provider_is_asked_for(
    echo_server: LoopbackServer, tmp_path: Path
) -> None:
    setup = telemetry.configure(in_memory=True, set_global=False)
    await run(
        {"m": ModelProvider(url=echo_server.url), "plain": EchoProvider(url=echo_server.url)},
        EchoProbe(),
        [Burst(2, 1)],
        store=tmp_path / "r.sqlite",
        instruments=setup.instruments(),
    )
    assert setup.spans is not None
    models = {
        (s.attributes or {}).get("gpubench.target"): (s.attributes or {}).get(
            "gen_ai.request.model"
        )
        for s in setup.spans.get_finished_spans()
        if s.name == "gpubench.invoke"
    }
    assert models == {"m": "llama-3-8b", "plain": None}


async def test_a_sampled_out_request_is_sampled_once_and_drops_its_http_spans(
    echo_server: LoopbackServer, tmp_path: Path
) -> None:
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
    from opentelemetry.sdk.trace.sampling import ParentBased, TraceIdRatioBased

    exporter = InMemorySpanExporter()
    tracer_provider = TracerProvider(sampler=ParentBased(TraceIdRatioBased(0.5)))
    tracer_provider.add_span_processor(SimpleSpanProcessor(exporter))
    instruments = Instruments(tracer_provider=tracer_provider, meter_provider=MeterProvider())
    await run(
        {"a": EchoProvider(url=echo_server.url, mode="ok")},
        EchoProbe(sleep_ms=0),
        [Burst(total=60, concurrency=6)],
        store=tmp_path / "r.sqlite",
        instruments=instruments,
    )
    spans = exporter.get_finished_spans()
    roots = {s.context.span_id for s in spans if s.name == telemetry.SPAN_INVOKE}
    calls = [s for s in spans if s.name == "POST"]
    assert 0 < len(roots) < 60  # sampled: some in, some out (p of failing ~ 2^-59)
    # Decided once per request: every HTTP call kept has its invoke span, and every invoke
    # span kept has its HTTP call (none sampled in a second time without its children).
    assert sorted(c.parent.span_id for c in calls if c.parent) == sorted(roots)
    assert len(calls) == len(roots)
