"""Chat sessions: the ``chat`` workload's growing history, the ``users`` shape that sends a
session's turns in order with a think time, and latency grouped by turn and prompt length;
end to end through the real CLI against the OpenAI-compatible emulator on loopback, with one
process and with two."""

from __future__ import annotations

import itertools
import json
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import pytest

from gpubench_sdk import ConfigError, Invocation, LLMChat, Outcome, Phase, Users, metrics
from gpubench_sdk.testing import CliEndToEnd

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "chat_users_emulated.toml"
KEY = "sk-chat-e2e-4f1a9c"
CHAT = {
    "turns": 4,
    "prompt_tokens": {"dist": "uniform", "min": 5, "max": 30},
    "max_tokens": {"dist": "uniform", "min": 3, "max": 9},
    "system_prompt_tokens": 12,
    "seed": 9,
}


def test_each_turn_resends_the_history_the_last_one_built() -> None:
    chat = LLMChat(**CHAT)
    system = chat.request(0).payload["messages"][0]
    assert system["role"] == "system" and len(system["content"].split()) == 12
    for session in range(5):
        previous: list[dict[str, str]] = []
        for turn in range(4):
            r = chat.request(session * 4 + turn)
            messages = r.payload["messages"]
            assert r.detail is not None
            assert (r.detail["session"], r.detail["turn"]) == (session, turn)
            assert len(messages) == 1 + 2 * turn + 1
            assert [m["role"] for m in messages[1:]] == ["user", "assistant"] * turn + ["user"]
            assert messages[: len(previous)] == previous  # the history, unchanged
            if previous:  # the previous turn's reply is as long as that turn asked for
                reply = messages[len(previous)]["content"].split()
                assert len(reply) == chat.request(session * 4 + turn - 1).max_output_tokens
            user = messages[-1]["content"].split()
            assert user[0] == f"[{session}.{turn}]" and 5 <= len(user) - 1 <= 30
            words = sum(len(m["content"].split()) for m in messages)
            asked = {"prompt_tokens": words, "max_tokens": r.max_output_tokens}
            assert r.detail["requested"] == asked and r.prompt_tokens == words
            assert 3 <= r.payload["max_tokens"] <= 9
            previous = messages
    # sessions differ beyond the shared system message
    first_users = {chat.request(s * 4).payload["messages"][1]["content"] for s in range(20)}
    assert len(first_users) == 20


def test_the_same_turns_in_another_process() -> None:
    chat = LLMChat(**CHAT)
    script = (
        "import json, sys; from gpubench_sdk import LLMChat\n"
        "w = LLMChat(**json.loads(sys.argv[1]))\n"
        "print(json.dumps([w.request(s).payload for s in range(40)]))"
    )
    done = subprocess.run(
        [sys.executable, "-c", script, json.dumps(CHAT)],
        capture_output=True, text=True, env={"PYTHONHASHSEED": "77", "PATH": ""}, timeout=60,
        check=True,
    )  # fmt: skip
    assert json.loads(done.stdout) == [chat.request(s).payload for s in range(40)]
    assert LLMChat(**{**CHAT, "seed": 10}).request(5).payload != chat.request(5).payload


@pytest.mark.parametrize(
    ("fields", "field"),
    [
        ({"users": 0, "duration_s": 1}, "users.users"),
        ({"users": 2, "duration_s": 0}, "users.duration_s"),
        ({"users": 2, "duration_s": 1, "think_s": -1}, "users.think_s"),
    ],
)
def test_users_refuses_what_cannot_run(fields: dict[str, float], field: str) -> None:
    with pytest.raises(ConfigError) as caught:
        Users(**fields)
    assert caught.value.field == field


def inv(turn: int | None, prompt: int, latency_ms: float, ok: bool = True) -> Invocation:
    detail = {"requested": {"prompt_tokens": prompt, "max_tokens": 8}}
    if turn is not None:
        detail["turn"] = turn
    return Invocation(
        target="t", scenario=0, seq=0, phase=Phase.MEASURE, scheduled_ns=0, start_ns=0,
        end_ns=int(latency_ms * 1e6), wall_start_ns=0,
        outcome=Outcome.OK if ok else Outcome.HTTP_5XX,
        first_byte_ns=int(latency_ms * 1e6 / 2), token_times_ns=None, detail=detail,
    )  # fmt: skip


def test_groups_by_turn_and_by_prompt_length() -> None:
    invs = [inv(0, 100, 10), inv(0, 120, 30), inv(1, 300, 50), inv(1, 320, 70, ok=False),
            inv(None, 5000, 900)]  # fmt: skip
    turns = metrics.by_turn(invs)
    assert [(g.label, g.requests, g.errors) for g in turns] == [("turn 1", 2, 0), ("turn 2", 1, 1)]
    assert turns[0].latency_p50_ms == pytest.approx(20) and turns[0].ttft_p50_ms == pytest.approx(
        10
    )
    assert turns[1].prompt_tokens_p50 == pytest.approx(310)  # failed requests asked too
    buckets = metrics.by_prompt_length(invs)
    assert [(g.label, g.requests) for g in buckets] == [
        ("0-127 tokens", 2), ("256-511 tokens", 1), ("4096-8191 tokens", 1)
    ]  # fmt: skip
    assert [g.label for g in metrics.by_prompt_length(invs, edges=[0, 1000])] == [
        "0-999 tokens", "1000+ tokens"
    ]  # fmt: skip
    with pytest.raises(ValueError, match="ascending"):
        metrics.by_prompt_length(invs, edges=[10, 5])


def sessions_of(invs: list[Invocation]) -> dict[int, list[Invocation]]:
    by: dict[int, list[Invocation]] = defaultdict(list)
    for i in invs:
        assert i.detail is not None
        by[i.detail["session"]].append(i)
    return by


@pytest.mark.slow
@pytest.mark.parametrize("processes", [1, 2])
def test_users_hold_conversations_whose_ttft_grows_with_the_context(
    tmp_path: Path, processes: int
) -> None:
    e2e = CliEndToEnd(tmp_path)
    e2e.env["OPENAI_API_KEY"] = KEY
    try:
        url = e2e.emulator(
            "gpubench_openai.emulator", "--api-key-env", "OPENAI_API_KEY",
            "--prefill-ms-per-token", "1", "--tokens-per-s", "200", "--max-workers", "4",
        )  # fmt: skip
        done = e2e.run(
            EXAMPLE,
            replace={"http://127.0.0.1:8000/v1": url},
            args=("--quiet", "-p", str(processes)),
        )
        invs = done.measured(secret=KEY)
    finally:
        e2e.close()
    sessions = sessions_of(invs)
    assert len(sessions) >= 4  # 4 users, each at least one conversation
    for session, turns in sessions.items():
        turns.sort(key=lambda i: i.start_ns)
        assert [i.detail["turn"] for i in turns] == list(range(len(turns)))
        assert {i.seq for i in turns} == {session * 4 + t for t in range(len(turns))}
        for before, after in itertools.pairwise(turns):
            # the next turn waits for the answer, then the user's 0.2 s of thinking
            assert after.start_ns - before.end_ns >= 0.19e9
    assert len({i.seq for i in invs}) == len(invs)  # each request sent once, by one process
    growth = metrics.by_turn(invs)
    assert [g.label for g in growth][:2] == ["turn 1", "turn 2"]
    first, last = growth[0], growth[-1]
    assert last.prompt_tokens_p50 > first.prompt_tokens_p50 + 100
    # 1 ms per prompt token before the first token: the later turn's TTFT is that much longer
    extra_ms = last.prompt_tokens_p50 - first.prompt_tokens_p50
    assert last.ttft_p50_ms - first.ttft_p50_ms >= 0.7 * extra_ms
    assert "users-0 on vllm-emu: TTFT p50 by turn" in done.stdout
