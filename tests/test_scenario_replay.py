"""``replay``: a trace's arrivals and inputs, its published schemas, speed, window and loops."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from _scenario_fleet import FleetProvider, fleet_server, require_fair_measurement

from gpubench_sdk import ConfigError, LLMCompletion, Replay, Runner, Store, metrics
from gpubench_sdk._plugins import build_scenario
from gpubench_sdk.testing import FleetConfig

pytestmark = pytest.mark.anyio

BURSTGPT = """Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type
5,ChatGPT,12,7,19,Conversation log
5.2,ChatGPT,3,5,8,Conversation log
5.5,GPT-4,8,2,10,Conversation log
6.0,ChatGPT,20,9,29,Conversation log
7.0,GPT-4,4,4,8,Conversation log
"""


def _burstgpt(tmp_path: Path) -> Path:
    path = tmp_path / "burst.csv"
    path.write_text(BURSTGPT)
    return path


def test_window_speed_and_loops(tmp_path: Path) -> None:
    sc = Replay(
        path=str(_burstgpt(tmp_path)),
        time_column="Timestamp",
        fields={"prompt_tokens": "Request tokens", "max_tokens": "Response tokens"},
        start_s=0.2,  # from 5.2 s ...
        duration_s=1.5,  # ... to 6.7 s: three rows
        speed=2.0,
        loops=2,
    )
    assert list(sc.offsets_s()) == pytest.approx([0, 0.15, 0.4, 0.75, 0.9, 1.15])
    assert sc.planned(3) == 18
    assert [sc.request_fields(i) for i in (0, 2, 3)] == [
        {"prompt_tokens": 3, "max_tokens": 5},
        {"prompt_tokens": 20, "max_tokens": 9},
        {"prompt_tokens": 3, "max_tokens": 5},  # the second loop replays the first row
    ]


def test_published_schemas_read_as_they_are(tmp_path: Path) -> None:
    # Azure LLM inference trace 2023: TIMESTAMP date-times, ContextTokens, GeneratedTokens
    azure_llm = tmp_path / "azure_llm.csv"
    azure_llm.write_text(
        "TIMESTAMP,ContextTokens,GeneratedTokens\n"
        "2023-11-16 18:15:46.6805900,374,44\n"
        "2023-11-16 18:15:50.9951690,396,109\n"
    )
    llm = build_scenario(
        {
            "kind": "replay",
            "path": str(azure_llm),
            "time_column": "TIMESTAMP",
            "time_unit": "iso",
            "fields": {"prompt_tokens": "ContextTokens", "max_tokens": "GeneratedTokens"},
        },
        "scenarios[0]",
    )
    assert isinstance(llm, Replay)
    assert list(llm.offsets_s()) == pytest.approx([0, 4.314579])
    assert llm.request_fields(1) == {"prompt_tokens": 396, "max_tokens": 109}
    # Azure Functions invocation trace 2021, as JSON lines: arrival = end_timestamp - duration
    functions = tmp_path / "functions.jsonl"
    rows = [
        {"app": "a1", "func": "f1", "end_timestamp": 5160.142, "duration": 0.134},
        {"app": "a2", "func": "f2", "end_timestamp": 5161.281, "duration": 0.013},
        {"app": "a3", "func": "f3", "end_timestamp": 5241.567, "duration": 42.356},
    ]
    functions.write_text("".join(json.dumps(r) + "\n" for r in rows))
    fn = Replay(path=str(functions), time_column="end_timestamp", duration_column="duration")
    arrivals = sorted(r["end_timestamp"] - r["duration"] for r in rows)
    assert list(fn.offsets_s()) == pytest.approx([a - arrivals[0] for a in arrivals])


def test_bad_traces_name_the_field(tmp_path: Path) -> None:
    path = str(_burstgpt(tmp_path))
    cases = [
        ({"path": path}, "replay.time_column"),  # no "timestamp" column in BurstGPT
        ({"path": path, "time_column": "Timestamp", "fields": {"x": "Nope"}}, "replay.fields.x"),
        ({"path": path, "time_column": "Model"}, "replay.time_column (row 2)"),
        ({"path": str(tmp_path / "missing.csv")}, "replay.path"),
        ({"path": path, "time_column": "Timestamp", "start_s": 100}, "replay.start_s"),
        ({"path": path, "time_column": "Timestamp", "speed": 0}, "replay.speed"),
    ]
    for fields, field in cases:
        with pytest.raises(ConfigError) as info:
            build_scenario({"kind": "replay", **fields}, "scenarios[0]")
        assert info.value.field == f"scenarios[0].{field}", info.value


async def test_replay_sends_the_traces_inputs_on_its_times(tmp_path: Path) -> None:
    sc = Replay(
        path=str(_burstgpt(tmp_path)),
        time_column="Timestamp",
        fields={"prompt_tokens": "Request tokens", "max_tokens": "Response tokens"},
        speed=4.0,
    )
    with fleet_server(FleetConfig(max_workers=5)) as server:
        result = await Runner(
            {"fleet": FleetProvider(url=server.url)},
            LLMCompletion(prompt_tokens=50, max_tokens=64),
            [sc],
            store=tmp_path / "r.sqlite",
        ).run()
        payloads = list(server.payloads)
    with Store(tmp_path / "r.sqlite") as store:
        invs = sorted(store.invocations(result.run_id), key=lambda i: i.seq)
    assert [i.seq for i in invs] == list(range(5))
    assert all(i.ok for i in invs), [(i.outcome, i.error) for i in invs]
    t0 = metrics.schedule_origin_ns(invs, list(sc.offsets_s()))
    planned = [0.0, 0.05, 0.125, 0.25, 0.5]  # the trace's gaps, four times as fast
    assert [(i.scheduled_ns - t0) / 1e9 for i in invs] == pytest.approx(planned, abs=1e-6)
    sent = sorted((len(p["prompt"].split()), p["max_tokens"]) for p in payloads)
    assert sent == sorted([(12, 7), (3, 5), (8, 2), (20, 9), (4, 4)])
    require_fair_measurement(result)
    assert max((i.start_ns - i.scheduled_ns) / 1e6 for i in invs) < 100
