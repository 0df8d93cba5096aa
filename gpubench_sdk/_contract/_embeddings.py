"""``Embeddings``: batches of texts to embed, each batch one request.

An embedding request's cost and latency follow the tokens it carries, and those are the batch
size times the inputs' lengths: both are a number or a distribution (``Length``), drawn per
request from the workload's seed and the request's ``seq``, so the same plan sends the same
batches on every run and in every process. Inputs are generated words, or a dataset's prompts
taken in order (``dataset``), so real texts with their real spread of lengths can be embedded.

The payload is OpenAI's ``/v1/embeddings`` body without the model: ``{"input": [...]}`` plus
``dimensions`` and ``encoding_format`` where set (OpenAI API reference, "Create embeddings",
platform.openai.com/docs/api-reference/embeddings/create, read 2026-12: ``input`` a string
or an array of at most 2,048 strings; ``encoding_format`` ``float`` or ``base64``;
``dimensions`` for models that can shorten their vectors). Any provider can send it through
the input map; the ``openai`` plugin's ``api = "embeddings"`` sends it as it is.
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from typing import Any, Literal

from pydantic import Field, model_validator

from .._base._errors import InvalidResponseError
from .._base._types import REQUESTED, Request
from .._base._validate import whole_number
from ._dataset import DatasetOptions, load_sample
from ._lengths import Length, highest_length
from ._workload import _VOCABULARY, TokenizerOptions, TokenWorkload, Units, WorkloadOptions

MAX_INPUTS = 2048
"""The most inputs one request may carry (OpenAI's limit for ``input`` as an array)."""


class EmbeddingsOptions(TokenizerOptions):
    inputs_per_request: Length = Field(
        default=1, description="texts per request (the batch size): a number or a distribution"
    )
    input_tokens: Length = Field(
        default=64, description="words of each generated text: a number or a distribution"
    )
    dimensions: int | None = Field(
        default=None, ge=1, le=65_536, description="ask for vectors this long (models that can)"
    )
    encoding_format: Literal["float", "base64"] | None = Field(
        default=None, description="'base64' makes the answer ~4x smaller (unset: the server's)"
    )
    dataset: DatasetOptions | None = Field(
        default=None, description="texts from a file instead of generated words"
    )
    seed: int = 0

    @model_validator(mode="after")
    def _within_limits(self) -> EmbeddingsOptions:
        if highest_length(self.inputs_per_request) > MAX_INPUTS:
            raise ValueError(
                f"inputs_per_request: at most {MAX_INPUTS} texts per request (the API's limit)"
            )
        if self.dataset is not None and "input_tokens" in self.model_fields_set:
            raise ValueError(
                "no input_tokens with a dataset: its texts have their own lengths (bound them "
                "with dataset.min_prompt_words and dataset.max_prompt_words)"
            )
        return self


class Embeddings(TokenWorkload):
    """Texts to embed, ``inputs_per_request`` of them per request, each ``input_tokens``
    words (or a dataset's prompts).

    Each request stores what it asked for: ``{"requested": {"inputs": b, "prompt_tokens":
    <words in all its texts>}}``, so latency can be grouped by batch size and by input length.
    Units are ``(input tokens, embeddings)``: the server's ``usage.prompt_tokens`` and the
    number of vectors it returned; without ``usage`` the texts sent are counted by the
    ``tokenizer``, else in words, and the stored count says which (``TokenWorkload``).
    """

    name = "embeddings"
    kind = "embeddings"
    units = ("tokens", "embeddings")
    options: EmbeddingsOptions
    Options = EmbeddingsOptions

    def __init__(self, options: WorkloadOptions | None = None, **fields: Any) -> None:
        super().__init__(options, **fields)
        opts = self.options
        self._dataset = None if opts.dataset is None else load_sample(opts.dataset, opts.seed)
        rng = random.Random(opts.seed)
        # The words once: an input of n words is n of them from an offset, so a request
        # costs slices, not a vocabulary draw per word.
        words = [rng.choice(_VOCABULARY) for _ in range(highest_length(opts.input_tokens))]
        self._ring = words + words  # any n consecutive words from any offset, as one slice
        self._extra: dict[str, Any] = {}
        if opts.dimensions is not None:
            self._extra["dimensions"] = opts.dimensions
        if opts.encoding_format is not None:
            self._extra["encoding_format"] = opts.encoding_format

    def request(self, seq: int) -> Request:
        opts = self.options
        # One generator per request (seeded by seq alone): the batch and every length in it
        # are the same in any process that builds this request.
        rng = random.Random(f"{opts.seed}:{seq}:embeddings")
        size = _draw(opts.inputs_per_request, rng)
        texts: list[str] = []
        words = 0
        if self._dataset is not None:
            prompts = self._dataset.prompts
            for i in range(size):
                record = prompts[(seq * size + i) % len(prompts)]
                texts.append(record.text)
                words += record.words
        else:
            for i in range(size):
                n = _draw(opts.input_tokens, rng)
                start = (seq + i) % (len(self._ring) // 2)
                # the marker keeps equal texts apart: a server may cache an input it has seen
                texts.append(f"[{seq}.{i}] " + " ".join(self._ring[start : start + n]))
                words += n
        return Request(
            seq=seq,
            payload={"input": texts, **self._extra},
            kind=self.kind,
            prompt_tokens=words,
            detail={REQUESTED: {"inputs": size, "prompt_tokens": words}},
        )

    def read(self, output: Any) -> Units:
        return embedding_units(output)

    def prompt_texts(self, request: Request) -> list[str]:
        return list(request.payload["input"])

    def answer_text(self, output: Any) -> str | None:
        return None  # the answer is vectors: its unit is embeddings, not tokens


def _draw(length: Any, rng: random.Random) -> int:
    return length if isinstance(length, int) else length.draw(rng)


def embedding_units(output: Any) -> Units:
    """(input tokens, embeddings) of an embeddings answer: the ``openai`` plugin's summary
    (``{"embeddings": n, "usage": ...}``) or an OpenAI-style body (``{"data": [...]}``, from
    a generic provider), or a bare list of vectors (input tokens then unknown)."""
    if isinstance(output, Mapping):
        usage = output.get("usage")
        prompt = usage.get("prompt_tokens") if isinstance(usage, Mapping) else None
        count = output.get("embeddings")
        if not isinstance(count, int) and isinstance(output.get("data"), list):
            count = len(output["data"])
        if whole_number(count) is not None:
            return (prompt if isinstance(prompt, int) else None, count)
    if isinstance(output, list) and all(isinstance(v, list) for v in output):
        return (None, len(output))
    raise InvalidResponseError("embeddings output has neither a count, data nor vectors")
