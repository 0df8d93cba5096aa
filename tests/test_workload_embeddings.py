"""The ``embeddings`` workload: seeded batches, the plan's limits named, dataset texts, the
units read from any provider's answer, and latency grouped by batch size (the console line and
the report's table included, from a run on the local runtime)."""

from __future__ import annotations

import json
from pathlib import Path

import anyio
import pytest

from gpubench_sdk import (
    Burst,
    ConfigError,
    Embeddings,
    InvalidResponseError,
    Invocation,
    LocalProvider,
    Outcome,
    Phase,
    Store,
    build_report,
    load_config,
    load_workload,
    metrics,
    render_report,
    run,
)


def test_it_is_a_workload_plugin_with_a_plan_table(tmp_path: Path) -> None:
    assert isinstance(load_workload("embeddings"), Embeddings)
    plan = tmp_path / "p.toml"
    plan.write_text(
        '[workload]\nkind = "embeddings"\ninputs_per_request = 4\ninput_tokens = 8\n'
        'dimensions = 256\nencoding_format = "base64"\n'
        '[[targets]]\nname = "t"\nprovider = "local"\n[[scenarios]]\nkind = "burst"\ntotal = 1\n'
        "concurrency = 1\n"
    )
    table = load_config(plan).workload
    request = load_workload(table.kind, **table.workload_options()).request(0)
    assert len(request.payload["input"]) == 4
    assert request.payload["dimensions"] == 256 and request.payload["encoding_format"] == "base64"


@pytest.mark.parametrize(
    ("fields", "says"),
    [
        ({"inputs_per_request": 4096}, "at most 2048 texts per request"),
        ({"inputs_per_request": {"dist": "uniform", "min": 1, "max": 3000}}, "at most 2048"),
        ({"dimensions": 0}, "dimensions"),
        ({"encoding_format": "int8"}, "encoding_format"),
        ({"input_tokens": 8, "dataset": {"path": "x.jsonl"}}, "no input_tokens with a dataset"),
    ],
)
def test_what_cannot_be_sent_is_refused_by_name(fields: dict[str, object], says: str) -> None:
    with pytest.raises((ConfigError, ValueError), match=says):
        Embeddings(**fields)


def test_a_batch_of_generated_texts_says_what_it_asked() -> None:
    embed = Embeddings(inputs_per_request=3, input_tokens=5, seed=1)
    request = embed.request(7)
    texts = request.payload["input"]
    assert [t.split()[0] for t in texts] == ["[7.0]", "[7.1]", "[7.2]"]
    assert all(len(t.split()) == 6 for t in texts)
    assert len(set(texts)) == 3  # no two texts equal
    assert request.detail == {"requested": {"inputs": 3, "prompt_tokens": 15}}
    assert request.kind == "embeddings" and request.prompt_tokens == 15
    assert embed.request(7).payload == request.payload


def test_dataset_texts_are_taken_in_order(tmp_path: Path) -> None:
    data = tmp_path / "docs.jsonl"
    rows = [{"prompt": f"document {i} " + "word " * i} for i in range(1, 6)]
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    embed = Embeddings(inputs_per_request=2, dataset={"path": str(data)})
    seen = [t for seq in range(5) for t in embed.request(seq).payload["input"]]
    assert sorted(set(seen)) == sorted(r["prompt"] for r in rows)
    first = embed.request(0)
    assert first.detail is not None
    assert first.detail["requested"]["prompt_tokens"] == sum(
        len(t.split()) for t in first.payload["input"]
    )


def test_units_from_the_plugins_summary_an_openai_body_or_bare_vectors() -> None:
    read = Embeddings().read
    assert read({"embeddings": 4, "usage": {"prompt_tokens": 90}}) == (90, 4)
    assert read({"data": [{"embedding": [0.1]}] * 3, "usage": {"prompt_tokens": 12}}) == (12, 3)
    assert read({"data": [{"embedding": [0.1]}]}) == (None, 1)
    assert read([[0.1, 0.2], [0.3, 0.4]]) == (None, 2)
    with pytest.raises(InvalidResponseError, match="neither a count, data nor vectors"):
        read({"text": "not an embedding"})


def inv(inputs: int, latency_ms: float) -> Invocation:
    return Invocation(
        target="t", scenario=0, seq=0, phase=Phase.MEASURE, scheduled_ns=0, start_ns=0,
        end_ns=int(latency_ms * 1e6), wall_start_ns=0, outcome=Outcome.OK,
        detail={"requested": {"inputs": inputs, "prompt_tokens": inputs * 10}},
    )  # fmt: skip


def test_batches_are_grouped_in_doubling_buckets() -> None:
    invs = [inv(n, 10.0 * n) for n in (1, 1, 2, 3, 4, 7, 8, 2048)]
    groups = metrics.by_batch_size(invs)
    assert [(g.label, g.requests) for g in groups] == [
        ("1 text", 2), ("2-3 texts", 2), ("4-7 texts", 2), ("8-15 texts", 1),
        ("2048-4095 texts", 1),
    ]  # fmt: skip
    assert groups[1].latency_p50_ms == pytest.approx(25.0)
    varied = {"kind": "embeddings", "inputs_per_request": {"dist": "uniform", "min": 1, "max": 9}}
    assert metrics.groupings_of(varied) == ["batch size"]
    assert metrics.groupings_of({"kind": "embeddings", "inputs_per_request": 8}) == []
    lengths = {"kind": "embeddings", "input_tokens": {"dist": "uniform", "min": 1, "max": 9}}
    assert metrics.groupings_of(lengths) == ["prompt length"]


def test_a_run_on_the_local_runtime_reports_latency_by_batch_size(tmp_path: Path) -> None:
    """The local runtime's demo model reads any payload: what matters here is the store, the
    console's line and the report's table for a batch-size distribution."""
    path = tmp_path / "e.sqlite"
    workload = Embeddings(inputs_per_request={"dist": "empirical", "values": [1, 16]}, seed=2)

    async def main() -> None:
        async with LocalProvider(max_workers=1) as local:
            await run({"local": local}, workload, [Burst(total=12, concurrency=2)], store=path)

    anyio.run(main)
    with Store(path) as store:
        (info,) = store.runs()
        invs = store.invocations(info.id)
        lines = metrics.shape_summary(store, info.id)
        report = build_report(store, [info.id])
    assert len(invs) == 12
    assert {i.detail["requested"]["inputs"] for i in invs if i.detail} == {1, 16}
    assert any("p50 latency by batch size: 1 text" in line for line in lines), lines
    rows = report.tables["latency_groups"]
    assert {r["grouping"] for r in rows} == {"batch size"}
    assert [r["group"] for r in rows] == ["1 text", "16-31 texts"]
    assert "<h3>By batch size</h3>" in render_report(report)
