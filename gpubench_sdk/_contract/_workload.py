"""Workloads: what is sent, and how the answer is read into units of work."""

from __future__ import annotations

import itertools
import random
from collections.abc import Mapping
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, Field, model_validator

from .._base._errors import InvalidResponseError
from .._base._types import REQUESTED, Request
from ._dataset import DatasetOptions, load_sample
from ._lengths import Length, draw_length, highest_length

Units = tuple[int | None, int | None]


class WorkloadOptions(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Workload:
    """Builds requests and reads results. Subclasses set ``name``, ``Options`` and both methods.

    ``request`` must be cheap (the runner calls it on the hot path): build what you can in
    ``__init__``. ``read`` returns ``(input_units, output_units)``: tokens for an LLM, images
    for image generation, ``None`` where the unit does not apply; it raises
    ``InvalidResponseError`` when the output is not what the workload asked for. A workload
    of conversations sets ``turns`` (requests per session), which session shapes (``users``)
    read to send a session's turns in order. ``detail``
    may return a JSON-able mapping of structured results to store with the request (e.g. a
    GPU probe's measured TFLOP/s); the runner calls it only when the provider gave none.
    """

    name: ClassVar[str] = ""
    kind: ClassVar[str] = "probe"
    turns: int = 1  # requests per session: seq is turn seq % turns of session seq // turns
    units: ClassVar[tuple[str, str]] = ("requests", "requests")
    Options: ClassVar[type[WorkloadOptions]] = WorkloadOptions

    def __init__(self, options: WorkloadOptions | None = None, **fields: Any) -> None:
        self.options = options if options is not None else self.Options(**fields)

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.options!r}>"

    def request(self, seq: int) -> Request:
        raise NotImplementedError

    def read(self, output: Any) -> Units:
        raise NotImplementedError

    def detail(self, output: Any) -> Mapping[str, Any] | None:
        """Structured results of one successful request, stored as JSON; None: nothing."""
        return None


class EchoProbeOptions(WorkloadOptions):
    sleep_ms: float = Field(default=0.0, ge=0, description="server-side sleep per request")
    payload_bytes: int = Field(default=16, ge=0, le=10_000_000, description="size of the echo")


class EchoProbe(Workload):
    """The smallest real request: the handler sleeps ``sleep_ms`` and echoes a string back.

    It isolates platform overhead (queueing, cold start, network) from model time.
    """

    name = "probe"
    kind = "probe"
    Options = EchoProbeOptions

    def __init__(self, options: WorkloadOptions | None = None, **fields: Any) -> None:
        super().__init__(options, **fields)
        assert isinstance(self.options, EchoProbeOptions)
        self._echo = "x" * self.options.payload_bytes
        self._payload = {"sleep_ms": self.options.sleep_ms, "echo": self._echo}

    def request(self, seq: int) -> Request:
        return Request(seq=seq, payload=self._payload, kind=self.kind)

    def read(self, output: Any) -> Units:
        echoed = output.get("echo") if isinstance(output, Mapping) else None
        if echoed != self._echo:
            raise InvalidResponseError("probe output does not echo the request")
        return (None, None)


_VOCABULARY = (
    "the",
    "model",
    "reads",
    "each",
    "document",
    "and",
    "writes",
    "a",
    "short",
    "summary",
    "of",
    "its",
    "main",
    "points",
    "for",
    "the",
    "reviewer",
    "who",
    "decides",
    "whether",
    "the",
    "claim",
    "is",
    "complete",
    "accurate",
    "and",
    "ready",
    "to",
    "approve",
    "today",
)


class LLMCompletionOptions(WorkloadOptions):
    prompt_tokens: Length = Field(
        default=128,
        description="prompt length in words: a number, or a distribution drawn per request "
        "({dist = 'normal'|'lognormal', mean, stdev, min, max}, {dist = 'uniform', min, max}, "
        "{dist = 'empirical', values, weights})",
    )
    max_tokens: Length = Field(
        default=64, description="output tokens asked for: a number, or a distribution as above"
    )
    temperature: float = Field(default=0.0, ge=0)
    stream: bool = False
    distinct_prompts: bool = Field(
        default=True, description="vary each prompt so server-side prefix caches do not flatter"
    )
    seed: int = 0
    shared_prefix_tokens: int = Field(
        default=0,
        ge=0,
        le=1_000_000,
        description="words of one prefix (a system prompt, a few-shot block, a document) put "
        "before the prompts of shared_prefix_share of the requests, to measure prefix caching",
    )
    shared_prefix_share: float = Field(
        default=1.0,
        ge=0,
        le=1,
        allow_inf_nan=False,
        description="the share of requests that start with the shared prefix (drawn per request)",
    )
    dataset: DatasetOptions | None = Field(
        default=None,
        description="prompts from a file instead of generated words (docs/workloads.md); "
        "max_tokens, when not set, is each record's own output length where it has one",
    )

    @model_validator(mode="after")
    def _one_source_of_prompts(self) -> LLMCompletionOptions:
        if self.dataset is not None and "prompt_tokens" in self.model_fields_set:
            raise ValueError(
                "no prompt_tokens with a dataset: its prompts have their own lengths (bound "
                "them with dataset.min_prompt_words and dataset.max_prompt_words)"
            )
        return self


class LLMCompletion(Workload):
    """A text completion with a prompt of ``prompt_tokens`` words and ``max_tokens`` to generate.

    Either length may be a distribution (``LengthDistribution``): each request then draws its
    own, seeded by ``seed`` and its ``seq``, and stores what it asked for in its detail
    (``{"requested": {"prompt_tokens": n, "max_tokens": m}}``) beside the counted units.

    With ``shared_prefix_tokens``, a share of the requests (``shared_prefix_share``) start with
    one prefix of that many words, stored as ``"shared_prefix": true`` (false for the others),
    so TTFT with and without it compares what a server's prefix cache saves.

    Token counts come from the response's ``usage`` where present; otherwise the output is
    counted in whitespace-separated words, an approximation that only exact usage replaces.
    """

    name = "llm"
    kind = "llm"
    units = ("tokens", "tokens")
    Options = LLMCompletionOptions

    def __init__(self, options: WorkloadOptions | None = None, **fields: Any) -> None:
        super().__init__(options, **fields)
        opts = self.options
        assert isinstance(opts, LLMCompletionOptions)
        self._dataset = None if opts.dataset is None else load_sample(opts.dataset, opts.seed)
        self._asked_out = "max_tokens" in opts.model_fields_set or opts.dataset is None
        rng = random.Random(opts.seed)
        # The longest prompt's words, once: a shorter prompt is its first n words, so a drawn
        # length costs a slice on the hot path, and a fixed one the same words as ever.
        words = [rng.choice(_VOCABULARY) for _ in range(highest_length(opts.prompt_tokens))]
        self._prompt = " ".join(words)
        self._varies = not (
            isinstance(opts.prompt_tokens, int) and isinstance(opts.max_tokens, int)
        )
        self._ends = list(itertools.accumulate(len(w) + 1 for w in words)) if self._varies else []
        # The one prefix the requests share: its own words, the same for every request.
        shared = random.Random(f"{opts.seed}:prefix")
        self._prefix = " ".join(
            shared.choice(_VOCABULARY) for _ in range(opts.shared_prefix_tokens)
        )

    def request(self, seq: int) -> Request:
        opts = self.options
        assert isinstance(opts, LLMCompletionOptions)
        detail: dict[str, Any] | None = None
        if self._dataset is not None:
            prompts = self._dataset.prompts
            record = prompts[seq % len(prompts)]
            n, text = record.words, record.text
            out = draw_length(opts.max_tokens, opts.seed, seq, "max_tokens")
            if not self._asked_out and record.output_words is not None:
                out = record.output_words
            detail = {
                REQUESTED: {"prompt_tokens": n, "max_tokens": out},
                "dataset": {"line": record.line},
            }
        elif self._varies:
            n = draw_length(opts.prompt_tokens, opts.seed, seq, "prompt_tokens")
            out = draw_length(opts.max_tokens, opts.seed, seq, "max_tokens")
            text = self._prompt[: self._ends[n - 1] - 1]
            detail = {REQUESTED: {"prompt_tokens": n, "max_tokens": out}}
        else:
            assert isinstance(opts.prompt_tokens, int) and isinstance(opts.max_tokens, int)
            n, out, text = opts.prompt_tokens, opts.max_tokens, self._prompt
        prompt = f"[{seq}] {text}" if opts.distinct_prompts else text
        if self._prefix:  # before the distinct marker, so the prefix is all the requests share
            prefixed = opts.shared_prefix_share >= 1 or (
                random.Random(f"{opts.seed}:{seq}:prefix").random() < opts.shared_prefix_share
            )
            if prefixed:
                prompt = f"{self._prefix} {prompt}"
                n += opts.shared_prefix_tokens
            detail = {**(detail or {}), "shared_prefix": prefixed}
            detail[REQUESTED] = {"prompt_tokens": n, "max_tokens": out}
        payload = {
            "prompt": prompt,
            "max_tokens": out,
            "temperature": opts.temperature,
            "stream": opts.stream,
        }
        return Request(
            seq=seq,
            payload=payload,
            kind=self.kind,
            stream=opts.stream,
            prompt_tokens=n,
            max_output_tokens=out,
            detail=detail,
        )

    def read(self, output: Any) -> Units:
        return llm_units(output)


def llm_units(output: Any) -> Units:
    """An LLM answer's (prompt, completion) tokens: the server's ``usage`` where it sends it,
    else the completion's words (the prompt's count then unknown)."""
    if isinstance(output, Mapping):
        usage = output.get("usage")
        if isinstance(usage, Mapping) and isinstance(usage.get("completion_tokens"), int):
            prompt = usage.get("prompt_tokens")
            return (prompt if isinstance(prompt, int) else None, usage["completion_tokens"])
        text = output.get("text")
        if text is None and isinstance(output.get("choices"), list) and output["choices"]:
            choice = output["choices"][0]
            text = choice.get("text") or (choice.get("message") or {}).get("content")
    elif isinstance(output, str):
        text = output
    elif isinstance(output, list) and all(isinstance(t, str) for t in output):
        text = "".join(output)  # token-list outputs (Replicate, Cog)
    else:
        text = None
    if not isinstance(text, str):
        raise InvalidResponseError("LLM output has neither usage nor text")
    return (None, len(text.split()))


class ImageGenerationOptions(WorkloadOptions):
    prompt: str = "a watercolor lighthouse at dawn"
    width: int = Field(default=512, ge=8, le=8192)
    height: int = Field(default=512, ge=8, le=8192)
    steps: int = Field(default=20, ge=1, le=1000)
    num_images: int = Field(default=1, ge=1, le=16)
    seed: int = 0


class ImageGeneration(Workload):
    """A text-to-image request (Stable Diffusion-style fields). Output units are images."""

    name = "image"
    kind = "image"
    units = ("requests", "images")
    Options = ImageGenerationOptions

    def request(self, seq: int) -> Request:
        opts = self.options
        assert isinstance(opts, ImageGenerationOptions)
        payload = {
            "prompt": opts.prompt,
            "width": opts.width,
            "height": opts.height,
            "num_inference_steps": opts.steps,
            "num_images": opts.num_images,
            "seed": opts.seed + seq,
        }
        return Request(seq=seq, payload=payload, kind=self.kind)

    def read(self, output: Any) -> Units:
        images = output.get("images") if isinstance(output, Mapping) else output
        if isinstance(images, str):
            images = [images]
        if not isinstance(images, list) or not images:
            raise InvalidResponseError("image output has no images")
        return (1, len(images))
