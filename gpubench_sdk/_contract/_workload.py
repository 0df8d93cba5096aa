"""Workloads: what is sent, and how the answer is read into units of work."""

from __future__ import annotations

import itertools
import random
from collections.abc import Mapping
from typing import Annotated, Any, ClassVar

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from .._base._errors import InvalidResponseError
from .._base._types import REQUESTED, Request, Result
from ._dataset import DatasetOptions, load_sample
from ._lengths import Length, draw_length, highest_length
from ._media import ImageSize, parse_size
from ._tokens import Tokenizer, counted
from ._tokens import Units as Units  # (input, output) units: defined with the counts


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

    def count(
        self, request: Request, result: Result, units: Units
    ) -> tuple[Units, Mapping[str, str] | None]:
        """A successful request's final units (``units``: the provider's, else ``read``'s)
        and, stored in its detail, where they came from. Token workloads say it per count
        (``input_tokens_from``/``output_tokens_from``); the default keeps ``units``."""
        return units, None


class TokenizerOptions(WorkloadOptions):
    tokenizer: str | None = Field(
        default=None,
        description="the model's tokenizer, to count tokens where the server reports none: "
        "a tokenizer.json, a folder holding one, or a Hugging Face model id in the local cache",
    )


class TokenWorkload(Workload):
    """A workload whose units are tokens: each successful request stores where each count
    came from (the server's, the ``tokenizer``'s, or words; ``_contract/_tokens.py``).

    By default an answer is an LLM's (``llm_units``, ``llm_text``) and what was sent is the
    payload's ``prompt``; a workload that sends other texts (messages, a batch) says which in
    ``prompt_texts``."""

    units = ("tokens", "tokens")

    def __init__(self, options: WorkloadOptions | None = None, **fields: Any) -> None:
        super().__init__(options, **fields)
        source = getattr(self.options, "tokenizer", None)
        self.tokenizer = None if source is None else Tokenizer(source)

    def read(self, output: Any) -> Units:
        return llm_units(output)

    def prompt_texts(self, request: Request) -> list[str]:
        return [request.payload["prompt"]]

    def answer_text(self, output: Any) -> str | None:
        return llm_text(output)

    def count(
        self, request: Request, result: Result, units: Units
    ) -> tuple[Units, Mapping[str, str] | None]:
        return counted(self, request, result, units)


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


class LLMCompletionOptions(TokenizerOptions):
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


class LLMCompletion(TokenWorkload):
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


def llm_units(output: Any) -> Units:
    """An LLM answer's (prompt, completion) tokens: the server's ``usage`` where it sends it,
    else the completion's words (the prompt's count then unknown)."""
    if isinstance(output, Mapping):
        usage = output.get("usage")
        if isinstance(usage, Mapping) and isinstance(usage.get("completion_tokens"), int):
            prompt = usage.get("prompt_tokens")
            return (prompt if isinstance(prompt, int) else None, usage["completion_tokens"])
    text = llm_text(output)
    if text is None:
        raise InvalidResponseError("LLM output has neither usage nor text")
    return (None, len(text.split()))


def llm_text(output: Any) -> str | None:
    """An LLM answer's text: ``text``, OpenAI's first choice, a string, or a token list."""
    text: Any = None
    if isinstance(output, Mapping):
        text = output.get("text")
        if text is None and isinstance(output.get("choices"), list) and output["choices"]:
            choice = output["choices"][0]
            if isinstance(choice, Mapping):
                text = choice.get("text") or (choice.get("message") or {}).get("content")
    elif isinstance(output, str):
        text = output
    elif isinstance(output, list) and all(isinstance(t, str) for t in output):
        text = "".join(output)  # token-list outputs (Replicate, Cog)
    return text if isinstance(text, str) else None


class ImageGenerationOptions(WorkloadOptions):
    prompt: str = "a watercolor lighthouse at dawn"
    width: int = Field(default=512, ge=8, le=8192)
    height: int = Field(default=512, ge=8, le=8192)
    sizes: list[ImageSize] = Field(
        default=[],
        max_length=64,
        description="sizes as 'WIDTHxHEIGHT', one drawn per request (alike); unset: width x height",
    )
    steps: int | list[Annotated[int, Field(ge=1, le=1000)]] = Field(
        default=20, description="denoising steps: a number, or a list to draw from per request"
    )
    num_images: int = Field(default=1, ge=1, le=16)
    seed: int = 0

    @field_validator("steps")
    @classmethod
    def _steps(cls, steps: int | list[int]) -> int | list[int]:
        if isinstance(steps, int) and not 1 <= steps <= 1000:
            raise ValueError("steps: from 1 to 1000")
        if isinstance(steps, list) and not steps:
            raise ValueError("steps: a number, or a non-empty list")
        return steps


class ImageGeneration(Workload):
    """A text-to-image request (Stable Diffusion-style fields). Output units are images.

    ``sizes`` and a list of ``steps`` are drawn per request (seeded by ``seed`` and ``seq``);
    each request stores ``{"requested": {"image_size": "WxH", "steps": n, "images": k}}`` so
    the report and the bill can group by them (``metrics.by_image_size``, ``by_steps``).
    """

    name = "image"
    kind = "image"
    units = ("requests", "images")
    Options = ImageGenerationOptions

    def request(self, seq: int) -> Request:
        opts = self.options
        assert isinstance(opts, ImageGenerationOptions)
        width, height = opts.width, opts.height
        if opts.sizes:
            drawn = random.Random(f"{opts.seed}:{seq}:image_size").choice(opts.sizes)
            width, height = parse_size(drawn)
        steps = opts.steps
        if isinstance(steps, list):
            steps = random.Random(f"{opts.seed}:{seq}:steps").choice(steps)
        payload = {
            "prompt": opts.prompt,
            "width": width,
            "height": height,
            "num_inference_steps": steps,
            "num_images": opts.num_images,
            "seed": opts.seed + seq,
        }
        asked = {"image_size": f"{width}x{height}", "steps": steps, "images": opts.num_images}
        return Request(seq=seq, payload=payload, kind=self.kind, detail={REQUESTED: asked})

    def read(self, output: Any) -> Units:
        images = output.get("images") if isinstance(output, Mapping) else output
        if isinstance(images, str):
            images = [images]
        if not isinstance(images, list) or not images:
            raise InvalidResponseError("image output has no images")
        return (1, len(images))
