"""LLM prompt and output lengths drawn per request: the distributions draw what they say, a
request's lengths depend on the seed and its seq alone (any order, any process, any run), and
the example plan, run by the real CLI on the local runtime with one and with two processes,
stores the same requested lengths per request beside the counted ones."""

from __future__ import annotations

import collections
import json
import random
import signal
import statistics
import subprocess
import sys
from pathlib import Path

import pytest

from gpubench_sdk import (
    LengthDistribution,
    LLMCompletion,
    Request,
    Store,
    build_report,
    draw_length,
    metrics,
    render_report,
)
from gpubench_sdk._scenarios._base import with_fields

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "llm_lengths_local.toml"
N = 20_000


def draws(**dist: object) -> list[int]:
    length = LengthDistribution.model_validate(dist)
    return [draw_length(length, 3, seq, "prompt_tokens") for seq in range(N)]


@pytest.mark.parametrize("dist", ["normal", "lognormal"])
def test_shaped_distributions_have_the_mean_and_stdev_given(dist: str) -> None:
    xs = draws(dist=dist, mean=400, stdev=150, min=1, max=100_000)
    # standard errors at N = 20,000: ~1 token on the mean, ~1% on the stdev
    assert statistics.mean(xs) == pytest.approx(400, abs=6)
    assert statistics.pstdev(xs) == pytest.approx(150, rel=0.04)
    if dist == "lognormal":  # a right tail: the median below the mean
        assert statistics.median(xs) < 380


def test_bounds_truncate_without_piling_up_at_them() -> None:
    xs = draws(dist="normal", mean=100, stdev=50, min=60, max=140)
    assert min(xs) >= 60 and max(xs) <= 140
    # truncated, not clamped: a clamp would put ~21% of draws on each bound
    assert xs.count(60) / N < 0.02 and xs.count(140) / N < 0.02
    far = draws(dist="normal", mean=10, stdev=1, min=10, max=100)  # half the mass is below min
    assert min(far) == 10 and max(far) < 20


def test_uniform_and_empirical_draw_what_they_say() -> None:
    xs = draws(dist="uniform", min=10, max=19)
    counts = collections.Counter(xs)
    assert set(counts) == set(range(10, 20))
    assert all(abs(c / N - 0.1) < 0.015 for c in counts.values())
    ys = collections.Counter(draws(dist="empirical", values=[16, 64, 256], weights=[5, 3, 2]))
    assert set(ys) == {16, 64, 256}
    for value, share in ((16, 0.5), (64, 0.3), (256, 0.2)):
        assert abs(ys[value] / N - share) < 0.02
    # values outside min..max are never drawn; the rest keep their relative weights
    kept = collections.Counter(draws(dist="empirical", values=[1, 50, 5000], max=100))
    assert set(kept) == {1, 50}


def test_defaults_of_the_bounds() -> None:
    assert LengthDistribution(dist="normal", mean=100, stdev=10).highest == 200
    assert LengthDistribution(dist="empirical", values=[3, 9]).highest == 9
    assert LengthDistribution(dist="lognormal", mean=10, stdev=0).highest == 10
    assert set(draws(dist="lognormal", mean=10, stdev=0)) == {10}  # no spread: the mean


def lengths(workload: LLMCompletion, seqs: range) -> dict[int, tuple[int, int]]:
    out = {}
    for seq in seqs:
        r = workload.request(seq)
        assert r.prompt_tokens is not None and r.max_output_tokens is not None
        out[seq] = (r.prompt_tokens, r.max_output_tokens)
    return out


VARIED = {
    "seed": 11,
    "prompt_tokens": {"dist": "lognormal", "mean": 300, "stdev": 200, "min": 16, "max": 2048},
    "max_tokens": {"dist": "uniform", "min": 1, "max": 512},
}


def test_a_request_depends_on_the_seed_and_its_seq_alone() -> None:
    workload = LLMCompletion(**VARIED)
    forward = lengths(workload, range(200))
    backward = {seq: lengths(workload, range(seq, seq + 1))[seq] for seq in reversed(range(200))}
    assert forward == backward
    assert lengths(LLMCompletion(**VARIED), range(200)) == forward
    assert len(set(forward.values())) > 150  # they do vary
    other = LLMCompletion(**{**VARIED, "seed": 12})
    assert lengths(other, range(200)) != forward
    # another interpreter, with another hash seed, builds the very same requests
    script = (
        "import json, sys; from gpubench_sdk import LLMCompletion\n"
        "w = LLMCompletion(**json.loads(sys.argv[1]))\n"
        "print(json.dumps([[w.request(s).prompt_tokens, w.request(s).max_output_tokens,"
        " w.request(s).payload['prompt']] for s in range(200)]))"
    )
    env = {"PYTHONHASHSEED": "4242", "PATH": ""}
    done = subprocess.run(
        [sys.executable, "-c", script, json.dumps(VARIED)],
        capture_output=True, text=True, env=env, timeout=60, check=True,
    )  # fmt: skip
    theirs = json.loads(done.stdout)
    ours = [[*forward[s], workload.request(s).payload["prompt"]] for s in range(200)]
    assert theirs == ours


def test_a_prompt_has_the_words_drawn_and_the_request_says_what_it_asked() -> None:
    workload = LLMCompletion(**VARIED)
    plain = LLMCompletion(**{**VARIED, "distinct_prompts": False})
    for seq in range(100):
        r = workload.request(seq)
        n, out = r.prompt_tokens, r.max_output_tokens
        assert r.payload["prompt"].split()[0] == f"[{seq}]"
        assert len(r.payload["prompt"].split()) == n + 1
        assert r.payload["max_tokens"] == out
        assert r.detail == {"requested": {"prompt_tokens": n, "max_tokens": out}}
        p = plain.request(seq)
        assert len(p.payload["prompt"].split()) == p.prompt_tokens
        assert workload.request(seq).payload["prompt"].endswith(p.payload["prompt"])


def test_fixed_lengths_send_what_they_always_sent() -> None:
    workload = LLMCompletion(prompt_tokens=50, max_tokens=8, seed=5)
    # the words before lengths could vary: the seed's first 50 choices of the vocabulary
    from gpubench_sdk._contract._workload import _VOCABULARY

    rng = random.Random(5)
    words = " ".join(rng.choice(_VOCABULARY) for _ in range(50))
    r = workload.request(3)
    assert r.payload == {"prompt": f"[3] {words}", "max_tokens": 8, "temperature": 0.0,
                         "stream": False}  # fmt: skip
    assert r.detail is None and (r.prompt_tokens, r.max_output_tokens) == (50, 8)
    # a drawn length's prompt is a prefix of the same words
    drawn = LLMCompletion(prompt_tokens={"dist": "uniform", "min": 50, "max": 50}, seed=5)
    assert drawn.request(3).payload["prompt"] == f"[3] {words}"


def test_a_replayed_rows_lengths_are_stored_as_requested() -> None:
    base = Request(seq=0, payload={"prompt": "a b", "max_tokens": 4}, kind="llm",
                   prompt_tokens=2, max_output_tokens=4)  # fmt: skip
    sized = with_fields(base, {"prompt_tokens": 5, "max_tokens": 9})
    assert sized.detail == {"requested": {"prompt_tokens": 5, "max_tokens": 9}}
    assert len(sized.payload["prompt"].split()) == 5
    assert with_fields(base, {"temperature": 0.5}).detail is None  # lengths unchanged


def run_example(tmp_path: Path, processes: int, url: str) -> dict[int, tuple[int, int, object]]:
    plan = tmp_path / f"p{processes}.toml"
    text = EXAMPLE.read_text().replace('provider = "local"', f'provider = "local"\nurl = "{url}"')
    plan.write_text(text)
    store = tmp_path / f"p{processes}.sqlite"
    cmd = [sys.executable, "-m", "gpubench_sdk", "run", str(plan), "--store", str(store),
           "-p", str(processes), "--quiet"]  # fmt: skip
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=240, cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    with Store(store) as s:
        (run,) = s.runs()
        invs = s.invocations(run.id)
        report = build_report(s, [run.id])
    assert run.status == "completed" and len(invs) == 40
    # the console and the report split latency by prompt length: the lengths vary here
    assert "burst-0 on local: p50 latency / TTFT by prompt length: " in done.stdout
    rows = report.tables["latency_groups"]
    assert {r["grouping"] for r in rows} == {"prompt length"} and len(rows) >= 2
    assert sum(r["requests"] + r["errors"] for r in rows) == 40
    assert [r["group"] for r in rows] == [g.label for g in metrics.by_prompt_length(invs)]
    assert "<h3>By prompt length</h3>" in render_report(report)
    out = {}
    for inv in invs:
        assert inv.detail is not None
        asked = inv.detail["requested"]
        # the local model counts the prompt's words (the [seq] marker too) and writes max_tokens
        assert inv.input_units == asked["prompt_tokens"] + 1
        assert inv.output_units == asked["max_tokens"]
        out[inv.seq] = (asked["prompt_tokens"], asked["max_tokens"], inv.worker_id is not None)
    return out


@pytest.mark.slow
def test_the_example_stores_the_same_lengths_with_one_process_and_with_two(
    tmp_path: Path,
) -> None:
    serve = subprocess.Popen(
        [sys.executable, "-m", "gpubench_sdk", "local", "serve", "--port", "0",
         "--max-workers", "2", "--idle-timeout", "30"],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
    )  # fmt: skip
    try:
        assert serve.stdout is not None
        url = serve.stdout.readline().split()[-1]
        assert url.startswith("http://127.0.0.1:")
        one = run_example(tmp_path, 1, url)
        two = run_example(tmp_path, 2, url)
    finally:
        serve.send_signal(signal.SIGINT)
        serve.wait(30)
    assert sorted(one) == sorted(two) == list(range(40))
    assert one == two
    workload = LLMCompletion(
        seed=7,
        prompt_tokens={"dist": "lognormal", "mean": 300, "stdev": 200, "min": 16, "max": 2048},
        max_tokens={"dist": "empirical", "values": [16, 64, 256], "weights": [5, 3, 1]},
    )
    assert {seq: v[:2] for seq, v in one.items()} == lengths(workload, range(40))
    assert len({v[1] for v in one.values()}) == 3  # all three answer sizes came up


def test_a_shared_prefix_leads_the_share_of_requests_it_is_given() -> None:
    workload = LLMCompletion(
        prompt_tokens={"dist": "uniform", "min": 5, "max": 40},
        shared_prefix_tokens=30,
        shared_prefix_share=0.25,
        seed=4,
    )
    requests = [workload.request(seq) for seq in range(2000)]
    prefixes = set()
    flags = []
    for r in requests:
        assert r.detail is not None
        words = r.payload["prompt"].split()
        marker = words.index(f"[{r.seq}]")
        flags.append(r.detail["shared_prefix"])
        # the prefix comes before the distinct marker, so it is all the requests share
        assert marker == (30 if r.detail["shared_prefix"] else 0)
        prefixes.add(" ".join(words[:marker]))
        assert r.prompt_tokens == len(words) - 1  # the marker is not asked for
        assert r.detail["requested"]["prompt_tokens"] == r.prompt_tokens
    assert prefixes == {"", prefixes.difference({""}).pop()}  # one prefix, or none
    assert abs(sum(flags) / len(flags) - 0.25) < 0.03
    again = LLMCompletion(**workload.options.model_dump())
    assert [again.request(s) for s in range(50)] == requests[:50]
    everyone = LLMCompletion(prompt_tokens=8, shared_prefix_tokens=3)
    assert all(everyone.request(s).detail == {"shared_prefix": True, "requested": {
        "prompt_tokens": 11, "max_tokens": 64}} for s in range(20))  # fmt: skip


def test_the_groupings_shown_follow_what_the_workload_varies() -> None:
    assert metrics.groupings_of({"kind": "llm", "prompt_tokens": 64}) == []
    assert metrics.groupings_of({"prompt_tokens": {"dist": "uniform", "min": 1, "max": 9}}) == [
        "prompt length"
    ]
    assert metrics.groupings_of({"dataset": {"path": "chats.jsonl"}}) == ["prompt length"]
    assert metrics.groupings_of({}, ["burst", "replay"]) == ["prompt length"]
    assert metrics.groupings_of({"kind": "chat", "turns": 4}) == ["turn"]
    assert metrics.groupings_of({"kind": "chat"}) == []  # one turn: nothing grows
    prefix = {"shared_prefix_tokens": 512, "shared_prefix_share": 0.5}
    assert metrics.groupings_of(prefix) == ["shared prefix"]
    assert metrics.groupings_of({**prefix, "shared_prefix_share": 1.0}) == []  # all alike
    assert set(metrics.GROUPINGS) == {
        "prompt length",
        "turn",
        "shared prefix",
        "batch size",
        "image size",
        "steps",
        "audio duration",
    }
