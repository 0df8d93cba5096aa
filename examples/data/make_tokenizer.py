"""Writes ``tokenizer.json`` beside this file: a small byte-level BPE tokenizer (GPT-2's scheme:
bytes as symbols, GPT-2's pre-tokenizing split, merges learned from text) trained on
``chats.jsonl``'s messages with Hugging Face ``tokenizers``.

It exists so that the ``tokenizer`` option of the token workloads can be tried and tested with no
download: the tests write the same vocabulary and merges into a GGUF model for llama.cpp's server,
whose ``usage`` then counts tokens as this tokenizer does. Training is deterministic: running this
again rewrites the same file. Public domain (CC0 1.0), as the chats it learned from.

    pip install 'gpubench-sdk[tokenizers]'
    python examples/data/make_tokenizer.py
"""

from __future__ import annotations

import json
from pathlib import Path

from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

HERE = Path(__file__).resolve().parent
VOCAB_SIZE = 600
END = "<|endoftext|>"


def chat_texts(path: Path) -> list[str]:
    """Every message of a ShareGPT-style file, in order."""
    with path.open(encoding="utf-8") as lines:
        return [turn["value"] for line in lines for turn in json.loads(line)["conversations"]]


def train(texts: list[str]) -> Tokenizer:
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=VOCAB_SIZE,
        special_tokens=[END],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tokenizer.train_from_iterator(texts, trainer)
    return tokenizer


def main() -> None:
    train(chat_texts(HERE / "chats.jsonl")).save(str(HERE / "tokenizer.json"))


if __name__ == "__main__":
    main()
