"""Prompts from a dataset file: the streamed reader (JSON lines, one JSON array, CSV), the
seeded reservoir sample and its length filter, the chat formats, the errors that name the
field, memory that does not grow with the file, and the example plan run by the real CLI."""

from __future__ import annotations

import collections
import csv
import json
import subprocess
import sys
import tracemalloc
from pathlib import Path
from typing import Any

import pytest

from gpubench_sdk import ConfigError, LLMCompletion, Store
from gpubench_sdk._base import _records
from gpubench_sdk._base._records import records
from gpubench_sdk._contract._dataset import DatasetOptions, load_sample

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
CHATS = EXAMPLES / "data" / "chats.jsonl"


def write_jsonl(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def prompts(n: int) -> list[dict[str, Any]]:
    return [{"prompt": " ".join(["w"] * (1 + i % 50)), "id": i} for i in range(n)]


def test_a_json_array_reads_as_its_json_lines_do(tmp_path: Path) -> None:
    # records far larger than the reader's chunk, and an array pretty-printed over many lines
    rows = [{"prompt": "x" * (i * 9000), "n": i} for i in range(30)]
    lines = write_jsonl(tmp_path / "a.jsonl", rows)
    array = tmp_path / "a.json"
    array.write_text(json.dumps(rows, indent=2))
    from_lines = [r for _, r in records(lines, "f")]
    from_array = [r for _, r in records(array, "f")]
    assert from_lines == from_array == rows
    # the line numbers of an array's records are where each record starts
    text = array.read_text().splitlines()
    for line, record in records(array, "f"):
        assert (
            text[line - 1].strip() == "{"
            and text[line].strip() == f'"prompt": "{record["prompt"]}",'
        )
    assert [n for n, _ in records(lines, "f")] == list(range(1, 31))


@pytest.mark.parametrize(
    ("content", "where", "expected"),
    [
        ('[{"prompt": "a"},\n {"prompt": "b"', "a.json:2", "cut short"),
        ('[{"prompt": "a"},\n {"prompt": }]', "a.json:2", "an array of JSON objects"),
        ('[{"prompt": "a"},\n 7]', "a.json:2", "an array of JSON objects, e.g."),
        ('{"prompt": "a"}\n{"prompt": \n', "a.json:2", "one JSON object per line"),
    ],
)
def test_a_broken_file_is_refused_at_its_line(
    tmp_path: Path, content: str, where: str, expected: str
) -> None:
    path = tmp_path / "a.json"
    path.write_text(content)
    with pytest.raises(ConfigError) as caught:
        list(records(path, "workload.dataset.path"))
    assert caught.value.field == f"workload.dataset.path ({where})"
    assert expected in str(caught.value)


def test_a_runaway_record_is_refused_not_buffered(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_records, "MAX_RECORD_CHARS", 1 << 20)
    path = tmp_path / "a.json"
    path.write_text('[{"prompt": "' + "x" * 3_000_000)  # a string never closed
    with pytest.raises(ConfigError, match="records under 1 MiB each: this one is longer"):
        list(records(path, "f"))


def test_the_sample_is_seeded_uniform_and_filtered(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "p.jsonl", prompts(500))
    options = DatasetOptions(path=str(path), sample=50, min_prompt_words=11, max_prompt_words=40)
    a, b = load_sample(options, 1), load_sample(options.model_copy(), 1)
    assert [p.line for p in a.prompts] == [p.line for p in b.prompts]
    assert a.scanned == 500 and a.matched == 300  # 30 of every 50 lengths are within 11..40
    assert all(11 <= p.words <= 40 for p in a.prompts) and len(a.prompts) == 50
    assert [p.line for p in load_sample(options, 2).prompts] != [p.line for p in a.prompts]
    # every matching record is equally likely to be kept: 50/300 each, over many seeds
    kept: collections.Counter[int] = collections.Counter()
    seeds = 400
    for seed in range(seeds):
        kept.update(p.line for p in load_sample(options, seed).prompts)
    assert set(kept) == {n for n in range(1, 501) if 11 <= 1 + (n - 1) % 50 <= 40}
    share = [kept[n] / seeds for n in kept]
    assert abs(sum(share) / len(share) - 50 / 300) < 1e-9
    assert max(share) < 0.3 and min(share) > 0.06  # binomial(400, 1/6): about 0.11 to 0.22
    # and shuffled: file order (lengths cycling 1..50) does not come through
    lines = [p.line for p in a.prompts]
    assert lines != sorted(lines)


def test_chat_formats_and_records(tmp_path: Path) -> None:
    share = [{"conversations": [{"from": "system", "value": "be brief"},
                                {"from": "human", "value": "one two three"},
                                {"from": "gpt", "value": "four five"}]},
             {"conversations": [{"from": "system", "value": "no user turn"}]}]  # fmt: skip
    openai = [{"messages": [{"role": "user", "content": "a b"},
                            {"role": "assistant", "content": "c d e f"}]}]  # fmt: skip
    for name, rows, fmt in (("s.jsonl", share, "auto"), ("o.jsonl", openai, "openai")):
        path = write_jsonl(tmp_path / name, rows)
        (p,) = load_sample(DatasetOptions(path=str(path), format=fmt), 0).prompts
        assert (p.text, p.output_words) == (
            ("one two three", 2) if name == "s.jsonl" else ("a b", 4)
        )
    table = tmp_path / "t.csv"
    with table.open("w", newline="") as fp:
        w = csv.writer(fp)
        w.writerow(["question", "answer_tokens"])
        w.writerows([["how are you", "12"], ["what time is it now", "30"]])
    sample = load_sample(
        DatasetOptions(path=str(table), prompt="question", output_tokens="answer_tokens"), 0
    )
    assert sorted((p.words, p.output_words, p.line) for p in sample.prompts) == [
        (3, 12, 2),
        (5, 30, 3),
    ]


@pytest.mark.parametrize(
    ("rows", "options", "field", "expected"),
    [
        ([{"text": "a"}], {}, "workload.dataset.path (d.jsonl:1)", "a text column 'prompt'"),
        ([{"prompt": "a"}], {"min_prompt_words": 5}, "workload.dataset.path", "none within"),
        ([{"prompt": "a", "out": "x"}], {"output_tokens": "out"},
         "workload.dataset.path (d.jsonl:1)", "a whole number of tokens in 'out'"),
        ([{"messages": "hi"}], {}, "workload.dataset.path (d.jsonl:1)", "a 'messages' list"),
        ([{"conversations": [{"from": "human"}]}], {}, "workload.dataset.path (d.jsonl:1)",
         "'from' and 'value' text"),
    ],
)  # fmt: skip
def test_a_dataset_that_does_not_fit_names_the_field(
    tmp_path: Path, rows: list[dict[str, Any]], options: dict[str, Any], field: str, expected: str
) -> None:
    path = write_jsonl(tmp_path / "d.jsonl", rows)
    with pytest.raises(ConfigError) as caught:
        LLMCompletion(dataset={"path": str(path), **options})
    assert caught.value.field == field and expected in str(caught.value)


def cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "gpubench_sdk", *args],
                          capture_output=True, text=True, cwd=cwd, timeout=240)  # fmt: skip


def test_plan_errors_before_anything_is_sent(tmp_path: Path) -> None:
    plan = tmp_path / "plan.toml"
    base = (EXAMPLES / "llm_dataset_local.toml").read_text()
    plan.write_text(base)  # data/chats.jsonl is not beside this copy
    done = cli("run", str(plan), "--dry-run", cwd=tmp_path)
    assert done.returncode == 2
    assert "error: workload.dataset.path: got" in done.stderr and "a readable file" in done.stderr
    plan.write_text(base.replace("seed = 3", "seed = 3\nprompt_tokens = 100"))
    done = cli("run", str(plan), "--dry-run", cwd=tmp_path)
    assert done.returncode == 2 and "no prompt_tokens with a dataset" in done.stderr
    plan.write_text(base.replace('format = "sharegpt"', 'formats = "sharegpt"'))
    done = cli("run", str(plan), "--dry-run", cwd=tmp_path)
    assert done.returncode == 2 and "unknown key 'formats' in workload.dataset" in done.stderr


def test_memory_does_not_grow_with_the_file(tmp_path: Path) -> None:
    path = tmp_path / "big.jsonl"
    row = {"conversations": [{"from": "human", "value": "word " * 200},
                             {"from": "gpt", "value": "reply " * 300}]}  # fmt: skip
    line = json.dumps(row) + "\n"
    with path.open("w") as fp:
        fp.write(line * 2000)  # ~ 7.5 MB
    size = path.stat().st_size
    tracemalloc.start()
    try:
        sample = load_sample(DatasetOptions(path=str(path), sample=20), 0)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert sample.scanned == 2000 and len(sample.prompts) == 20
    assert peak < size / 20, (peak, size)  # the sample and a record or two, never the file


@pytest.mark.slow
def test_the_example_sends_the_sampled_chats(tmp_path: Path) -> None:
    done = cli("run", str(EXAMPLES / "llm_dataset_local.toml"), "--quiet", cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    with Store(tmp_path / "gpubench-llm-dataset.sqlite") as store:
        (run,) = store.runs()
        invs = store.invocations(run.id)
    chats = [json.loads(x)["conversations"] for x in CHATS.read_text().splitlines()]
    assert run.status == "completed" and len(invs) == 32
    lines = set()
    for inv in invs:
        assert inv.detail is not None
        line = inv.detail["dataset"]["line"]
        question, answer = chats[line - 1][0]["value"], chats[line - 1][1]["value"]
        asked = inv.detail["requested"]
        assert asked == {"prompt_tokens": len(question.split()), "max_tokens": len(answer.split())}
        assert 4 <= asked["prompt_tokens"] <= 60
        assert inv.output_units == asked["max_tokens"]  # the local model writes max_tokens words
        assert inv.input_units == asked["prompt_tokens"] + 1  # and counts the [seq] marker
        lines.add(line)
    assert len(lines) == 16  # the sample, each sent twice over 32 requests
