"""The plugin, unchanged, against a real OpenAI-compatible server: llama-cpp-python's.

``python -m llama_cpp.server`` (llama-cpp-python, the llama.cpp bindings from PyPI) serves a
model the test writes itself with the ``gguf`` package: a llama-architecture network with one
layer, 16-wide, random weights and a 339-token SentencePiece vocabulary, 60 KB, nothing
downloaded. It runs on the CPU in well under a millisecond per token, so the test is about
the protocol, not the model: sequential and burst runs, streamed (chat and completions) and
not, must record no error, every token the server generated must be timed, and the plugin's
counts must match the server's own ``usage``.

What this server does differently from our emulator, and the plugin copes with: it ignores
``stream_options.include_usage`` (no usage chunk: the plugin counts chunks and says so), it
sends no ``x-request-id`` (the chunk ``id`` is used), and its ``/v1/models`` items have no
``created`` (the official client's strict schema would refuse them; the plugin never reads it).
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from gpubench_openai import OpenAIProvider

from gpubench_sdk import Burst, Embeddings, LLMChat, LLMCompletion, Outcome, Store, run


def _need(module: str) -> Any:
    """CI installs the extra (.ci/run), so a missing module fails there; a
    developer without it gets a skip that says how to install it."""
    if os.environ.get("CI"):
        return importlib.import_module(module)
    return pytest.importorskip(module, reason="pip install 'gpubench-openai[llama-server]'")


_need("llama_cpp.server")
gguf = _need("gguf")
np = _need("numpy")

MODEL = "tiny-llama"
EMBED, HEADS, FFN = 16, 2, 32
BYTES = [f"<0x{b:02X}>" for b in range(256)]
WORDS = ["▁the", "▁model", "▁reads", "▁each", "▁document", "▁and", "▁writes", "▁a"]
WORDS += [f"▁w{i}" for i in range(72)]
TOKENS = ["<unk>", "<s>", "</s>", *BYTES, *WORDS]
EOS = 2
# Never end early and never emit a lone byte (a partial UTF-8 character streams as no text):
# every generated token is then one word, one chunk. logit_bias is an OpenAI request field.
NO_EOS_NO_BYTES = {str(t): -100 for t in range(EOS, 3 + len(BYTES))}
MAX_TOKENS = 8
DATA = Path(__file__).resolve().parents[3] / "examples" / "data"
END_OF_TEXT = "<|endoftext|>"  # the committed tokenizer's one special token


def write_tiny_llama(path: Path, pooling: Any = None, bpe: Path | None = None) -> None:
    """A llama-architecture GGUF with random weights (tensor names and metadata keys as
    llama.cpp's loader reads them: gguf's ``MODEL_TENSORS[MODEL_ARCH.LLAMA]``). ``pooling``
    (a ``gguf.PoolingType``) makes it an embedding model: one pooled vector per text rather
    than one per token. ``bpe`` (a byte-level BPE ``tokenizer.json``) gives it that
    tokenizer's vocabulary and merges instead of the SentencePiece one."""
    rng = np.random.default_rng(0)
    writer = gguf.GGUFWriter(str(path), "llama")
    if pooling is not None:
        writer.add_pooling_type(pooling)
    tokens = TOKENS if bpe is None else write_bpe_vocabulary(writer, bpe)
    writer.add_context_length(512)
    writer.add_embedding_length(EMBED)
    writer.add_block_count(1)
    writer.add_feed_forward_length(FFN)
    writer.add_head_count(HEADS)
    writer.add_head_count_kv(HEADS)
    writer.add_layer_norm_rms_eps(1e-5)
    writer.add_rope_dimension_count(EMBED // HEADS)
    writer.add_file_type(gguf.LlamaFileType.ALL_F32)
    if bpe is None:
        writer.add_tokenizer_model("llama")
        writer.add_token_list(TOKENS)
        scores = [0.0] * (3 + len(BYTES)) + [-float(i) for i in range(len(WORDS))]
        writer.add_token_scores(scores)
        kinds = [gguf.TokenType.UNKNOWN, gguf.TokenType.CONTROL, gguf.TokenType.CONTROL]
        writer.add_token_types(kinds + [gguf.TokenType.BYTE] * len(BYTES) + [1] * len(WORDS))
        writer.add_bos_token_id(1)
        writer.add_eos_token_id(EOS)
        writer.add_unk_token_id(0)

    def random(name: str, *shape: int) -> None:
        writer.add_tensor(name, (rng.standard_normal(shape) * 0.2).astype(np.float32))

    def ones(name: str) -> None:
        writer.add_tensor(name, np.ones(EMBED, dtype=np.float32))

    random("token_embd.weight", len(tokens), EMBED)
    ones("output_norm.weight")
    random("output.weight", len(tokens), EMBED)
    ones("blk.0.attn_norm.weight")
    for name in ("attn_q", "attn_k", "attn_v", "attn_output"):
        random(f"blk.0.{name}.weight", EMBED, EMBED)
    ones("blk.0.ffn_norm.weight")
    random("blk.0.ffn_gate.weight", FFN, EMBED)
    random("blk.0.ffn_up.weight", FFN, EMBED)
    random("blk.0.ffn_down.weight", EMBED, FFN)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


def write_bpe_vocabulary(writer: Any, tokenizer_json: Path) -> list[str]:
    """A byte-level BPE tokenizer as llama.cpp reads one (``tokenizer.ggml.model = "gpt2"``,
    GPT-2's pre-tokenizing split ``"gpt-2"``, the vocabulary by id, the merges by rank, no BOS
    added): it then tokenizes exactly as Hugging Face ``tokenizers`` does with that file."""
    model = json.loads(tokenizer_json.read_text(encoding="utf-8"))["model"]
    vocab: dict[str, int] = model["vocab"]
    tokens = sorted(vocab, key=vocab.__getitem__)
    merges = [m if isinstance(m, str) else " ".join(m) for m in model["merges"]]
    writer.add_tokenizer_model("gpt2")
    writer.add_tokenizer_pre("gpt-2")
    writer.add_token_list(tokens)
    end = vocab[END_OF_TEXT]
    control, normal = gguf.TokenType.CONTROL, gguf.TokenType.NORMAL
    writer.add_token_types([control if t == END_OF_TEXT else normal for t in tokens])
    writer.add_token_merges(merges)
    writer.add_bos_token_id(end)
    writer.add_eos_token_id(end)
    writer.add_add_bos_token(False)
    return tokens


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@contextlib.contextmanager
def llama_cpp_server(
    folder: Path, *options: str, pooling: Any = None, bpe: Path | None = None
) -> Iterator[str]:
    """``python -m llama_cpp.server`` on the tiny model and a free port, until the block ends."""
    name = "tiny" if pooling is None else "tiny-embed"
    model = folder / (f"{name}.gguf" if bpe is None else f"{name}-bpe.gguf")
    if not model.exists():
        write_tiny_llama(model, pooling, bpe)
    port = free_port()
    args = ["--model", str(model), "--model_alias", MODEL, "--host", "127.0.0.1"]
    args += ["--port", str(port), "--n_ctx", "512", "--n_threads", "1", *options]
    log_path = folder / f"server-{port}.log"
    with log_path.open("wb") as log:
        server = subprocess.Popen(
            [sys.executable, "-m", "llama_cpp.server", *args], stdout=log, stderr=log
        )
        url = f"http://127.0.0.1:{port}/v1"
        try:
            deadline = time.monotonic() + 60
            while True:
                if server.poll() is not None:
                    raise RuntimeError(f"llama_cpp.server exited: {log_path.read_text()}")
                try:
                    if httpx.get(f"{url}/models", timeout=1).status_code == 200:
                        break
                except httpx.TransportError:
                    pass
                if time.monotonic() > deadline:
                    raise RuntimeError("llama_cpp.server did not start within 60 s")
                time.sleep(0.1)
            yield url
        finally:
            server.terminate()
            server.wait(10)


@pytest.fixture(scope="module")
def llama_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    # one request at a time, in turn: by default the server cuts a running stream short when
    # the next request arrives (llama_cpp/server/settings.py, ServerSettings.interrupt_requests)
    with llama_cpp_server(tmp_path_factory.mktemp("llama"), "--interrupt_requests", "False") as url:
        yield url


def target(url: str, **options: Any) -> OpenAIProvider:
    return OpenAIProvider(
        base_url=url,
        model=MODEL,
        extra_body={"logit_bias": NO_EOS_NO_BYTES, "temperature": 0},
        **options,
    )


def run_and_read(url: str, path: Path, stream: bool, **options: Any) -> list[Any]:
    workload = LLMCompletion(prompt_tokens=12, max_tokens=MAX_TOKENS, stream=stream)
    scenarios = [Burst(total=15, concurrency=1), Burst(total=15, concurrency=4)]
    outcome = asyncio.run(run({"llama": target(url, **options)}, workload, scenarios, store=path))
    assert outcome.status == "completed"
    with Store(path) as store:
        invocations = store.invocations(outcome.run_id)
    assert len(invocations) == 30
    assert [(i.outcome, i.error) for i in invocations if i.outcome is not Outcome.OK] == []
    return invocations


@pytest.mark.parametrize("api", ["chat", "completions"])
def test_streamed_runs_time_every_token(llama_server: str, tmp_path: Path, api: str) -> None:
    for inv in run_and_read(llama_server, tmp_path / "s.sqlite", stream=True, api=api):
        # no usage chunk from this server: the plugin counted the chunks and said so; the
        # prompt, with no tokenizer named, is counted in words, and said so
        assert inv.output_units == MAX_TOKENS
        assert inv.detail == {"output_tokens_from": "chunks", "input_tokens_from": "words"}
        times = inv.token_times_ns
        assert times is not None and len(times) == MAX_TOKENS and times == sorted(times)
        assert inv.first_byte_ns <= times[0] <= inv.end_ns
        assert inv.request_id  # the chunks' id: the server sends no x-request-id


def test_non_streamed_run_reads_the_servers_usage(llama_server: str, tmp_path: Path) -> None:
    for inv in run_and_read(llama_server, tmp_path / "n.sqlite", stream=False):
        assert inv.output_units == MAX_TOKENS and inv.input_units is not None
        assert inv.input_units > 0
        assert inv.detail == {"input_tokens_from": "server", "output_tokens_from": "server"}


def test_streams_cut_short_by_the_server_are_not_successes(tmp_path: Path) -> None:
    """With its default ``interrupt_requests``, a request arriving mid-stream makes the server
    end the running stream early with ``data: [DONE]`` and no ``finish_reason``: such a
    partial answer is recorded as invalid, never as a success with fewer tokens."""
    workload = LLMCompletion(prompt_tokens=12, max_tokens=64, stream=True)
    with llama_cpp_server(tmp_path) as url:
        outcome = asyncio.run(
            run(
                {"llama": target(url, api="completions")},
                workload,
                [Burst(total=20, concurrency=4)],
                store=tmp_path / "cut.sqlite",
            )
        )
    with Store(tmp_path / "cut.sqlite") as store:
        invocations = store.invocations(outcome.run_id)
    assert len(invocations) == 20
    # 4 in flight against one slot: nearly every stream is cut (19 of 20 in trials; before
    # the plugin checked finish_reason, all 20 were stored as successes with a few tokens)
    assert sum(inv.outcome is not Outcome.OK for inv in invocations) >= 5
    for inv in invocations:
        if inv.outcome is Outcome.OK:
            assert inv.output_units == 64 and len(inv.token_times_ns or ()) == 64
        else:
            assert inv.outcome is Outcome.INVALID_RESPONSE and "cut the answer short" in (
                inv.error or ""
            )


def test_embeddings_counts_agree_with_the_servers_usage(tmp_path: Path) -> None:
    """``api = "embeddings"`` against llama.cpp's own ``/v1/embeddings`` (``--embedding``, a
    mean-pooled model): one vector per text, the model's width, and the stored input tokens
    exactly the server's ``usage.prompt_tokens`` for the same body sent again by hand."""
    workload = Embeddings(inputs_per_request={"dist": "uniform", "min": 1, "max": 5}, seed=4)
    path = tmp_path / "e.sqlite"
    pooled = gguf.PoolingType.MEAN
    with llama_cpp_server(tmp_path, "--embedding", "True", pooling=pooled) as url:
        provider = OpenAIProvider(base_url=url, model=MODEL, api="embeddings")
        scenarios = [Burst(total=10, concurrency=1)]
        outcome = asyncio.run(run({"llama": provider}, workload, scenarios, store=path))
        with Store(path) as store:
            invocations = store.invocations(outcome.run_id)
        assert [(i.outcome, i.error) for i in invocations if i.outcome is not Outcome.OK] == []
        for inv in invocations[:4]:
            body = {"model": MODEL, **workload.request(inv.seq).payload}
            answer = httpx.post(f"{url}/embeddings", json=body, timeout=30).json()
            assert inv.input_units == answer["usage"]["prompt_tokens"]
    assert len(invocations) == 10
    for inv in invocations:
        assert inv.detail is not None
        assert inv.output_units == inv.detail["requested"]["inputs"]
        assert inv.detail["dimensions"] == EMBED
        assert inv.detail["input_tokens_from"] == "server"  # its usage, not our words


def test_a_local_tokenizer_counts_prompts_as_the_servers_usage_does(tmp_path: Path) -> None:
    """The committed dataset sample's prompts, sent to llama.cpp's server with a model that has
    the committed tokenizer's vocabulary: its ``usage`` (stored as the server's count) and the
    workload's ``tokenizer`` estimate (stored where the server gave no usage: the streamed run,
    whose chunks carry none) agree within 1% in all, request by request."""
    pytest.importorskip("tokenizers", reason="pip install 'gpubench-sdk[tokenizers]'")
    chats = str(DATA / "chats.jsonl")
    counted: dict[bool, dict[int, tuple[int | None, str]]] = {}
    with llama_cpp_server(
        tmp_path, "--interrupt_requests", "False", bpe=DATA / "tokenizer.json"
    ) as url:
        for stream in (False, True):
            workload = LLMCompletion(
                dataset={"path": chats}, max_tokens=4, stream=stream,
                tokenizer=str(DATA / "tokenizer.json"),
            )  # fmt: skip
            path = tmp_path / f"tok-{stream}.sqlite"
            provider = target(url, api="completions")
            outcome = asyncio.run(
                run({"llama": provider}, workload, [Burst(total=24, concurrency=1)], store=path)
            )
            with Store(path) as store:
                invocations = store.invocations(outcome.run_id)
            assert [(i.outcome, i.error) for i in invocations if i.outcome is not Outcome.OK] == []
            counted[stream] = {
                i.seq: (i.input_units, (i.detail or {}).get("input_tokens_from", ""))
                for i in invocations
            }
    assert {source for _, source in counted[False].values()} == {"server"}
    assert {source for _, source in counted[True].values()} == {"tokenizer"}
    usage = sum(n or 0 for n, _ in counted[False].values())
    estimate = sum(n or 0 for n, _ in counted[True].values())
    assert usage > 24 * 5  # real prompts, not empty ones
    assert abs(estimate - usage) <= 0.01 * usage, (estimate, usage)


def test_chat_sessions_grow_their_context_turn_by_turn(llama_server: str, tmp_path: Path) -> None:
    """The ``chat`` workload's conversations against llama.cpp's own chat route: every turn
    answered, and the server's prompt count (its chat template and the resent history) larger
    at each turn of a session than at the one before."""
    workload = LLMChat(turns=3, prompt_tokens=6, max_tokens=MAX_TOKENS, system_prompt_tokens=8)
    path = tmp_path / "chat.sqlite"
    outcome = asyncio.run(
        run({"llama": target(llama_server)}, workload, [Burst(total=9, concurrency=1)], store=path)
    )
    with Store(path) as store:
        invocations = store.invocations(outcome.run_id)
    assert [(i.outcome, i.error) for i in invocations if i.outcome is not Outcome.OK] == []
    prompts: dict[int, list[int]] = {}
    for inv in sorted(invocations, key=lambda i: i.seq):
        assert inv.detail is not None and inv.detail["input_tokens_from"] == "server"
        prompts.setdefault(inv.detail["session"], []).append(inv.input_units or 0)
    assert len(prompts) == 3
    for counts in prompts.values():
        assert counts == sorted(counts) and len(set(counts)) == 3, counts
