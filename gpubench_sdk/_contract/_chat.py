"""``LLMChat``: OpenAI-style chat messages, in conversations of several turns.

A conversation (a *session*) of ``turns`` user turns resends its growing history with each
turn, as a chat client does, so each turn's prompt is longer than the last: the way latency
and cost grow with context is what this workload measures. Request ``seq`` is turn
``seq % turns`` of session ``seq // turns`` (``Workload.turns``); the ``users`` shape sends a
session's turns one after another with a think time between them, any other shape sends the
same requests without waiting.

The history is built, not recorded from the model's replies: turn i's user message and the
reply it asked for are drawn from the lengths given, seeded by the workload's ``seed`` and that
turn's own seq, and the reply is stood in for by that many words. So every turn of every session
is the same request on every run and in every process, whatever the model answered; what the
model is asked to read (its context) is exactly what the plan says.
"""

from __future__ import annotations

import itertools
import random
from typing import Any

from pydantic import Field

from .._base._types import REQUESTED, Request
from ._lengths import Length, draw_length, highest_length
from ._workload import (
    _VOCABULARY,
    TokenizerOptions,
    TokenWorkload,
    WorkloadOptions,
)

MAX_TURNS = 1000


class LLMChatOptions(TokenizerOptions):
    turns: int = Field(
        default=1, ge=1, le=MAX_TURNS, description="user turns per session (conversation)"
    )
    prompt_tokens: Length = Field(
        default=64, description="words of each user message: a number or a distribution"
    )
    max_tokens: Length = Field(
        default=64, description="tokens asked of each reply (the history holds that many words)"
    )
    system_prompt_tokens: int = Field(
        default=0,
        ge=0,
        le=1_000_000,
        description="words of a system message every session starts with (the same text: a "
        "prefix a server may cache)",
    )
    temperature: float = Field(default=0.0, ge=0)
    stream: bool = False
    seed: int = 0


class LLMChat(TokenWorkload):
    """Chat completions (``messages``) in sessions of ``turns`` turns with a growing history.

    Each request stores its ``session`` and ``turn`` and what it asked for in its detail:
    ``{"session": s, "turn": t, "requested": {"prompt_tokens": <words in all messages>,
    "max_tokens": m}}``. Counts are read as ``llm``'s: the server's ``usage``, else words.
    """

    name = "chat"
    kind = "llm"  # a provider maps it as an LLM request (the openai plugin: /chat/completions)
    Options = LLMChatOptions

    def __init__(self, options: WorkloadOptions | None = None, **fields: Any) -> None:
        super().__init__(options, **fields)
        opts = self.options
        assert isinstance(opts, LLMChatOptions)
        self.turns = opts.turns
        rng = random.Random(f"{opts.seed}:chat")
        # One pool of words; a message is a slice of it at an offset its own seq draws, so
        # sessions do not share a prefix beyond the system message.
        self._span = max(highest_length(opts.prompt_tokens), highest_length(opts.max_tokens))
        words = [rng.choice(_VOCABULARY) for _ in range(2 * self._span)]
        self._pool = " ".join(words)
        self._starts = [0, *itertools.accumulate(len(w) + 1 for w in words)]
        n = opts.system_prompt_tokens
        system = " ".join(rng.choice(_VOCABULARY) for _ in range(n))
        self._system = [{"role": "system", "content": system}] if n else []

    def _words(self, seq: int, n: int, tag: str) -> str:
        assert isinstance(self.options, LLMChatOptions)
        offset = random.Random(f"{self.options.seed}:{seq}:{tag}").randrange(self._span)
        return self._pool[self._starts[offset] : self._starts[offset + n] - 1]

    def _turn(self, seq: int) -> tuple[int, int]:
        """Turn ``seq``'s user message length and the reply length it asks for."""
        opts = self.options
        assert isinstance(opts, LLMChatOptions)
        return (
            draw_length(opts.prompt_tokens, opts.seed, seq, "prompt_tokens"),
            draw_length(opts.max_tokens, opts.seed, seq, "max_tokens"),
        )

    def request(self, seq: int) -> Request:
        opts = self.options
        assert isinstance(opts, LLMChatOptions)
        session, turn = divmod(seq, self.turns)
        first = seq - turn  # the session's first turn
        messages = list(self._system)
        for i in range(first, seq + 1):
            asked, reply = self._turn(i)
            text = f"[{session}.{i - first}] {self._words(i, asked, 'user')}"
            messages.append({"role": "user", "content": text})
            if i < seq:  # an earlier turn's reply, as long as it was asked to be
                messages.append({"role": "assistant", "content": self._words(i, reply, "reply")})
        words = sum(len(m["content"].split()) for m in messages)
        payload = {
            "messages": messages,
            "max_tokens": reply,
            "temperature": opts.temperature,
            "stream": opts.stream,
        }
        detail = {
            "session": session,
            "turn": turn,
            REQUESTED: {"prompt_tokens": words, "max_tokens": reply},
        }
        return Request(
            seq=seq,
            payload=payload,
            kind=self.kind,
            stream=opts.stream,
            prompt_tokens=words,
            max_output_tokens=reply,
            detail=detail,
        )

    def prompt_texts(self, request: Request) -> list[str]:
        """The messages' contents (a server's count adds its chat template's few tokens)."""
        return [m["content"] for m in request.payload["messages"]]
