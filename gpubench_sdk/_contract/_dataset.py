"""Prompts from a dataset file: a seeded sample, streamed, filtered by length.

Three shapes of record are read (from CSV, JSON lines or one JSON array, see
``_base/_records``): a table with a prompt column (``format = "records"``), ShareGPT-style chats
(``{"conversations": [{"from": "human", "value": ...}, {"from": "gpt", "value": ...}]}``) and
OpenAI-style chats (``{"messages": [{"role": "user", "content": ...}, ...]}``). A chat gives its
first user turn as the prompt and the reply that follows as the output length to ask for, as
the published serving benchmarks read ShareGPT.

The sample is a reservoir (Algorithm R) drawn with the workload's seed over the records that
pass the length filter, in file order: one pass, memory for the sample only, and the same
sample on every run and in every process. It is then shuffled with the same seed, so a file
sorted by length does not send its short prompts first.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from .._base._errors import ConfigError
from .._base._records import records
from ._lengths import MAX_LENGTH

FIELD = "workload.dataset"
# Who speaks in a chat's turns, in the two formats' words (ShareGPT "from", OpenAI "role").
_USER = frozenset({"human", "user"})
_ASSISTANT = frozenset({"gpt", "assistant", "chatgpt", "bard", "bing", "model"})


class DatasetOptions(BaseModel):
    """Where a workload's prompts come from: a local file, sampled with the workload's seed."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    path: str = Field(min_length=1, description="a .jsonl, .json (lines or one array) or .csv file")
    format: Literal["auto", "records", "sharegpt", "openai"] = Field(
        default="auto",
        description="'records': a prompt column; 'sharegpt'/'openai': chats (conversations / "
        "messages); 'auto': a chat format if the first record has its key, else records",
    )
    prompt: str = Field(default="prompt", min_length=1, description="records: the prompt column")
    output_tokens: str | None = Field(
        default=None,
        min_length=1,
        description="records: a column holding the output length to ask for (chats: the reply)",
    )
    sample: int = Field(default=1000, ge=1, le=1_000_000, description="prompts kept")
    min_prompt_words: int = Field(default=1, ge=1, le=MAX_LENGTH)
    max_prompt_words: int = Field(default=MAX_LENGTH, ge=1, le=MAX_LENGTH)

    @model_validator(mode="after")
    def _bounds(self) -> DatasetOptions:
        if self.min_prompt_words > self.max_prompt_words:
            raise ValueError(
                f"min_prompt_words at most max_prompt_words ({self.min_prompt_words} > "
                f"{self.max_prompt_words})"
            )
        return self


@dataclass(frozen=True, slots=True)
class Prompt:
    """One sampled record: its prompt, the prompt's length in words, the output length its
    record asks for (a chat's reply, an ``output_tokens`` column; None: not given) and the
    line of the file it came from."""

    text: str
    words: int
    output_words: int | None
    line: int


@dataclass(frozen=True, slots=True)
class Sample:
    prompts: Sequence[Prompt]
    scanned: int  # records read
    matched: int  # of those, within the length filter


_CACHE: dict[tuple[Any, ...], Sample] = {}


def load_sample(options: DatasetOptions, seed: int) -> Sample:
    """``options``' sample, read once per file version in this process."""
    path = Path(options.path)
    try:
        stamp = path.stat().st_mtime_ns
    except OSError as exc:
        raise ConfigError(
            f"{FIELD}.path", options.path, f"a readable file ({exc.strerror})"
        ) from None
    key = (str(path.resolve()), stamp, options, seed)
    if key not in _CACHE:
        sample = _sample(path, options, seed)
        _CACHE.clear()  # one dataset at a time; never grows over a campaign
        _CACHE[key] = sample
    return _CACHE[key]


def _sample(path: Path, options: DatasetOptions, seed: int) -> Sample:
    rng = random.Random(f"{seed}:dataset")
    kept: list[Prompt] = []
    scanned = matched = 0
    fmt = options.format
    for line, record in records(path, f"{FIELD}.path"):
        if fmt == "auto":
            fmt = (
                "sharegpt"
                if "conversations" in record
                else "openai"
                if "messages" in record
                else "records"
            )
        scanned += 1
        prompt = _prompt(record, fmt, options, path, line)
        if (
            prompt is None
            or not options.min_prompt_words <= prompt.words <= options.max_prompt_words
        ):
            continue
        if matched < options.sample:
            kept.append(prompt)
        else:  # Algorithm R: the i-th match replaces a kept one with probability sample / (i+1)
            j = rng.randrange(matched + 1)
            if j < options.sample:
                kept[j] = prompt
        matched += 1
    if not kept:
        what = f"{scanned} records read" if scanned else "no record"
        raise ConfigError(
            f"{FIELD}.path",
            options.path,
            f"a dataset with prompts of {options.min_prompt_words}..{options.max_prompt_words} "
            f"words ({what}, none within; check dataset.format, dataset.prompt and the bounds)",
        )
    rng.shuffle(kept)
    return Sample(tuple(kept), scanned, matched)


def _prompt(
    record: Mapping[str, Any], fmt: str, options: DatasetOptions, path: Path, line: int
) -> Prompt | None:
    where = f"{FIELD}.path ({path.name}:{line})"
    if fmt == "records":
        text = record.get(options.prompt)
        if not isinstance(text, str):
            keys = ", ".join(sorted(map(str, record))[:8])
            raise ConfigError(where, "(a record)", f"a text column {options.prompt!r} "
                              f"(dataset.prompt); this record has: {keys}")  # fmt: skip
        out = None
        if options.output_tokens is not None:
            out = _count(record.get(options.output_tokens), where, options.output_tokens)
        return Prompt(text, len(text.split()), out, line)
    turns = record.get("conversations" if fmt == "sharegpt" else "messages")
    if not isinstance(turns, list):
        key = "conversations" if fmt == "sharegpt" else "messages"
        raise ConfigError(
            where, "(a record)", f"a chat with a {key!r} list (dataset.format = {fmt!r})"
        )
    speaker, said = ("from", "value") if fmt == "sharegpt" else ("role", "content")
    for i, turn in enumerate(turns):
        if not isinstance(turn, dict) or not isinstance(turn.get(said), str):
            raise ConfigError(
                where, "(a turn)", f"each turn a table with {speaker!r} and {said!r} text"
            )
        if turn.get(speaker) in _USER:
            text = turn[said]
            reply = turns[i + 1] if i + 1 < len(turns) else None
            out = None
            if isinstance(reply, dict) and reply.get(speaker) in _ASSISTANT:
                out = max(1, len(str(reply.get(said) or "").split()))
            return Prompt(text, len(text.split()), out, line)
    return None  # a chat without a user turn (a system prompt alone): nothing to send


def _count(value: Any, where: str, column: str) -> int:
    if isinstance(value, str) and value.strip().isdigit():
        value = int(value)  # CSV cells are text
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_LENGTH:
        raise ConfigError(
            where, value, f"a whole number of tokens in {column!r} (dataset.output_tokens)"
        )
    return value
