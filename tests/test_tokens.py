"""Token counts and where each came from: the server's kept, the workload's tokenizer (a
committed tokenizer.json, a folder, a model id only from the local Hugging Face cache) where the
server gave none, else words; a provider's own estimate named and improved on; and a run on the
local runtime storing the source with every count."""

from __future__ import annotations

import json
import runpy
import shutil
from pathlib import Path

import anyio
import pytest

from gpubench_sdk import (
    Burst,
    ConfigError,
    Embeddings,
    LLMChat,
    LLMCompletion,
    LocalProvider,
    Result,
    Store,
    run,
)

pytest.importorskip("tokenizers", reason="pip install 'gpubench-sdk[tokenizers]'")
from tokenizers import Tokenizer as HfTokenizer

DATA = Path(__file__).resolve().parents[1] / "examples" / "data"
TOKENIZER = DATA / "tokenizer.json"


def hf_count(text: str) -> int:
    return len(HfTokenizer.from_file(str(TOKENIZER)).encode(text, add_special_tokens=False).ids)


def test_the_committed_tokenizer_is_what_its_script_writes(tmp_path: Path) -> None:
    copy = tmp_path / "data"
    shutil.copytree(DATA, copy)
    (copy / "tokenizer.json").unlink()
    runpy.run_path(str(copy / "make_tokenizer.py"), run_name="__main__")
    assert (copy / "tokenizer.json").read_bytes() == TOKENIZER.read_bytes()


def test_a_tokenizer_is_a_file_a_folder_or_a_cached_model(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    llm = LLMCompletion(prompt_tokens=20, tokenizer=str(TOKENIZER))
    assert llm.tokenizer is not None and llm.tokenizer.count("cold start") == hf_count("cold start")
    assert LLMCompletion(tokenizer=str(DATA)).tokenizer is not None  # the folder holding it
    with pytest.raises(ConfigError, match=r"tokenizer: .*a path to tokenizer.json"):
        LLMCompletion(tokenizer=str(tmp_path / "missing.json"))
    with pytest.raises(ConfigError, match=r"a folder holding tokenizer\.json"):
        LLMCompletion(tokenizer=str(tmp_path))
    (tmp_path / "bad.json").write_text("{}")
    with pytest.raises(ConfigError, match=r"a readable tokenizer\.json"):
        LLMCompletion(tokenizer=str(tmp_path / "bad.json"))
    # A model id is looked up in the local cache only: an empty cache is a clear refusal,
    # with no download attempted (HF_HUB_OFFLINE would make a fetch fail loudly otherwise).
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(ConfigError, match=r"local Hugging Face cache .*hf download acme/llm"):
        LLMCompletion(tokenizer="acme/llm")


def test_a_model_in_the_local_cache_is_found(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the hub cache's layout: models--org--name/snapshots/<rev>/ and refs/main naming <rev>
    repo = tmp_path / "hub" / "models--acme--llm"
    (repo / "snapshots" / "abc123").mkdir(parents=True)
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text("abc123")
    shutil.copy(TOKENIZER, repo / "snapshots" / "abc123" / "tokenizer.json")
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    import huggingface_hub.constants as hub_constants

    monkeypatch.setattr(hub_constants, "HF_HUB_CACHE", str(tmp_path / "hub"))
    workload = Embeddings(tokenizer="acme/llm")
    assert workload.tokenizer is not None and workload.tokenizer.count("GPU") == hf_count("GPU")


def test_the_servers_count_is_kept_and_named() -> None:
    llm = LLMCompletion(prompt_tokens=12, tokenizer=str(TOKENIZER))
    request = llm.request(0)
    usage = {"text": "a b c", "usage": {"prompt_tokens": 40, "completion_tokens": 3}}
    assert llm.count(request, Result(output=usage), (40, 3)) == (
        (40, 3),
        {"input_tokens_from": "server", "output_tokens_from": "server"},
    )
    # a provider's own count (TGI's details, say) without a mark is the server's too
    given = Result(output={"text": "a b c"}, input_units=41, output_units=3)
    assert llm.count(request, given, (41, 3))[1] == {
        "input_tokens_from": "server",
        "output_tokens_from": "server",
    }


def test_without_usage_the_tokenizer_counts_what_was_sent_and_answered() -> None:
    llm = LLMCompletion(prompt_tokens=30, tokenizer=str(TOKENIZER))
    request = llm.request(3)
    answer = "The cold start is the time a request waits for a worker."
    units, sources = llm.count(request, Result(output={"text": answer}), (None, 12))
    assert units == (hf_count(request.payload["prompt"]), hf_count(answer))
    assert sources == {"input_tokens_from": "tokenizer", "output_tokens_from": "tokenizer"}
    # a stream counted in chunks by the provider: the tokenizer counts the text instead
    marked = {"output_tokens_from": "chunks"}
    chunked = Result(output={"text": answer}, output_units=9, detail=marked)
    assert llm.count(request, chunked, (None, 9))[0][1] == hf_count(answer)


def test_without_usage_or_tokenizer_words_are_counted_and_estimates_keep_their_name() -> None:
    chat = LLMChat(turns=2, prompt_tokens=5, max_tokens=4)
    request = chat.request(1)  # turn 2: system-less history of 3 messages
    words = sum(len(m["content"].split()) for m in request.payload["messages"])
    units, sources = chat.count(request, Result(output={"text": "one two"}), (None, 2))
    assert units == (words, 2)
    assert sources == {"input_tokens_from": "words", "output_tokens_from": "words"}
    chunked = Result(output={"text": "x"}, output_units=7, detail={"output_tokens_from": "chunks"})
    assert chat.count(request, chunked, (None, 7)) == (
        (words, 7),
        {"input_tokens_from": "words", "output_tokens_from": "chunks"},
    )


def test_embeddings_count_their_inputs_only() -> None:
    embed = Embeddings(inputs_per_request=3, input_tokens=6, tokenizer=str(TOKENIZER))
    request = embed.request(0)
    units, sources = embed.count(request, Result(output={"embeddings": 3}), (None, 3))
    assert units == (sum(hf_count(t) for t in request.payload["input"]), 3)
    assert sources == {"input_tokens_from": "tokenizer"}


def test_a_run_stores_each_counts_source(tmp_path: Path) -> None:
    """The local runtime's demo model reports usage in words: stored as the server's count;
    an answer without usage (the handler below) is counted by the tokenizer."""
    chats = [json.loads(line) for line in (DATA / "chats.jsonl").read_text().splitlines()]
    assert chats  # the dataset the plan samples
    workload = LLMCompletion(
        dataset={"path": str(DATA / "chats.jsonl")}, max_tokens=4, tokenizer=str(TOKENIZER)
    )
    path = tmp_path / "t.sqlite"
    # a model server that answers text and no usage
    (tmp_path / "bare_handler.py").write_text(
        "def predict(payload, model=None):\n    return {'text': 'the worker answered in words'}\n"
    )
    env = {"PYTHONPATH": str(tmp_path)}

    async def main() -> None:
        async with (
            LocalProvider(max_workers=1) as served,
            LocalProvider(max_workers=1, handler="bare_handler:predict", load="", env=env) as bare,
        ):
            targets = {"usage": served, "bare": bare}
            await run(targets, workload, [Burst(total=8, concurrency=2)], store=path)

    anyio.run(main)
    with Store(path) as store:
        (info,) = store.runs()
        invocations = store.invocations(info.id)
    assert [(i.outcome.value, i.error) for i in invocations if i.error] == []
    by_target = {t: [i for i in invocations if i.target == t] for t in ("usage", "bare")}
    for inv in by_target["usage"]:
        assert inv.detail and inv.detail["input_tokens_from"] == "server"
        assert inv.output_units == 4
    for inv in by_target["bare"]:
        assert inv.detail and inv.detail["input_tokens_from"] == "tokenizer"
        assert inv.detail["output_tokens_from"] == "tokenizer"
        prompt = workload.request(inv.seq).payload["prompt"]
        assert inv.input_units == hf_count(prompt)
        assert inv.output_units == hf_count("the worker answered in words")
