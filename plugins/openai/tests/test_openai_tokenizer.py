"""The ``tokenizer`` option through the CLI: ``examples/tokenizer_emulated.toml`` against the
OpenAI emulator with no ``usage``, every count made by the committed tokenizer, said so in the
store and on the console; the same plan without the tokenizer counts words and says that."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpubench_sdk import Invocation, LLMCompletion, Outcome
from gpubench_sdk.testing import CliEndToEnd

pytest.importorskip("tokenizers", reason="pip install 'gpubench-sdk[tokenizers]'")
from tokenizers import Tokenizer

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"
EXAMPLE = EXAMPLES / "tokenizer_emulated.toml"
KEY = "sk-tokens-77aa10"


def run_example(tmp_path: Path, *, tokenizer: bool) -> tuple[list[Invocation], str]:
    e2e = CliEndToEnd(tmp_path)
    e2e.env["OPENAI_API_KEY"] = KEY
    # the plan's files are read beside it: the copy the CLI runs names them in full
    replace = {} if tokenizer else {'tokenizer = "data/tokenizer.json"': ""}
    replace['"data/'] = f'"{EXAMPLES / "data"}/'
    try:
        url = e2e.emulator(
            "gpubench_openai.emulator", "--api-key-env", "OPENAI_API_KEY", "--no-usage"
        )
        done = e2e.run(EXAMPLE, replace={"http://127.0.0.1:8000/v1": url, **replace})
        return done.measured(secret=KEY), done.stdout
    finally:
        e2e.close()


def test_the_example_counts_with_the_tokenizer_and_says_so(tmp_path: Path) -> None:
    invocations, stdout = run_example(tmp_path, tokenizer=True)
    assert len(invocations) == 24 and all(i.outcome is Outcome.OK for i in invocations)
    hf = Tokenizer.from_file(str(EXAMPLES / "data" / "tokenizer.json"))
    workload = LLMCompletion(
        dataset={"path": str(EXAMPLES / "data" / "chats.jsonl")}, max_tokens=16, seed=5
    )
    for inv in invocations:
        assert inv.detail is not None
        assert inv.detail["input_tokens_from"] == inv.detail["output_tokens_from"] == "tokenizer"
        prompt = workload.request(inv.seq).payload["prompt"]
        assert inv.input_units == len(hf.encode(prompt, add_special_tokens=False).ids)
    assert (
        "no-usage: token counts (requests): input by the tokenizer 24; output by the tokenizer 24"
        in stdout
    )


def test_without_a_tokenizer_words_are_counted_and_said_to_be(tmp_path: Path) -> None:
    invocations, stdout = run_example(tmp_path, tokenizer=False)
    assert all(i.detail and i.detail["input_tokens_from"] == "words" for i in invocations)
    assert "input estimated in words 24; output estimated in words 24" in stdout
