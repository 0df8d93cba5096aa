"""``VisionChat``: a question about one or more pictures, for vision-language models.

A vision request's prefill (and, on token-priced APIs, its bill) grows with the pictures'
pixels: OpenAI's and vLLM's models turn each picture into hundreds to thousands of tokens
before the question's own. So the pictures' size is the knob: ``image_sizes`` lists the
``"WIDTHxHEIGHT"`` sizes a request draws from (seeded per request), with ``images_per_request``
of them per request, each a generated PNG (``_media.picture_png``: gradients with blocks of
detail, never one flat colour) or a given file.

The payload is neutral, ``{"prompt", "images": ["data:image/png;base64,..."], "max_tokens",
"temperature", "stream"}``: the ``openai`` plugin sends it as a chat message whose content is
the text and an ``image_url`` part per picture (OpenAI's and vLLM's format); a Cog or RunPod
model with an ``images`` input (a list of ``Path``) reads them as files; the input map renames
or drops the fields another model names differently. Units are tokens, as ``llm``'s: the
server's ``usage`` (pictures included), else an estimate of the text alone, said so.
"""

from __future__ import annotations

import functools
import random
from typing import Any, Literal

from pydantic import Field

from .._base._types import REQUESTED, Request
from ._lengths import Length, draw_length, highest_length
from ._media import ImageSize, data_url, parse_size, picture_png, png_size, read_media
from ._workload import (
    _VOCABULARY,
    TokenizerOptions,
    TokenWorkload,
    WorkloadOptions,
)

MAX_IMAGES = 16


class VisionChatOptions(TokenizerOptions):
    image_sizes: list[ImageSize] = Field(
        default=["512x512"],
        min_length=1,
        max_length=64,
        description="picture sizes as 'WIDTHxHEIGHT', one drawn per request (alike)",
    )
    images_per_request: int = Field(default=1, ge=1, le=MAX_IMAGES)
    image_file: str | None = Field(
        default=None, description="send this picture (png, jpg, webp) instead of generated ones"
    )
    image_detail: Literal["auto", "low", "high"] | None = Field(
        default=None, description="OpenAI's image_url detail (unset: the server's default)"
    )
    prompt_tokens: Length = Field(default=16, description="words of the question")
    max_tokens: Length = Field(default=64, description="tokens asked of the answer")
    temperature: float = Field(default=0.0, ge=0)
    stream: bool = False
    seed: int = 0


class VisionChat(TokenWorkload):
    """A question of ``prompt_tokens`` words about ``images_per_request`` pictures.

    Each request stores ``{"requested": {"images": n, "image_size": "WxH", "image_pixels":
    w*h*n, "prompt_tokens", "max_tokens"}}``: latency and cost can be grouped by picture size.
    """

    name = "vision"
    kind = "llm"  # an LLM request with pictures: the openai plugin sends a chat message
    Options = VisionChatOptions

    def __init__(self, options: WorkloadOptions | None = None, **fields: Any) -> None:
        super().__init__(options, **fields)
        opts = self.options
        assert isinstance(opts, VisionChatOptions)
        rng = random.Random(f"{opts.seed}:vision")
        self._words = [rng.choice(_VOCABULARY) for _ in range(highest_length(opts.prompt_tokens))]
        self._given: tuple[str, str] | None = None
        if opts.image_file is not None:
            data, mime = read_media(opts.image_file, "workload.image_file")
            size = png_size(data)
            self._given = (
                data_url(data, mime),
                "given" if size is None else f"{size[0]}x{size[1]}",
            )
        self._extra = {} if opts.image_detail is None else {"image_detail": opts.image_detail}

    @functools.lru_cache(maxsize=64)  # noqa: B019 - one workload per run: bounded
    def _picture(self, size: str, index: int) -> str:
        """The ``index``-th picture of a size: generated once, the same in every process."""
        width, height = parse_size(size)
        assert isinstance(self.options, VisionChatOptions)
        return data_url(picture_png(width, height, self.options.seed * 1000 + index), "image/png")

    def request(self, seq: int) -> Request:
        opts = self.options
        assert isinstance(opts, VisionChatOptions)
        n = draw_length(opts.prompt_tokens, opts.seed, seq, "prompt_tokens")
        out = draw_length(opts.max_tokens, opts.seed, seq, "max_tokens")
        count = opts.images_per_request
        if self._given is not None:
            url, size = self._given
            images = [url] * count
        else:
            size = random.Random(f"{opts.seed}:{seq}:image_size").choice(opts.image_sizes)
            images = [self._picture(size, i) for i in range(count)]
        prompt = f"[{seq}] " + " ".join(self._words[:n])
        pixels = count * _pixels(size)
        payload = {
            "prompt": prompt,
            "images": images,
            "max_tokens": out,
            "temperature": opts.temperature,
            "stream": opts.stream,
            **self._extra,
        }
        asked = {"images": count, "image_size": size, "image_pixels": pixels}
        return Request(
            seq=seq,
            payload=payload,
            kind=self.kind,
            stream=opts.stream,
            prompt_tokens=n,
            max_output_tokens=out,
            detail={REQUESTED: {**asked, "prompt_tokens": n, "max_tokens": out}},
        )


def _pixels(size: str) -> int:
    try:
        width, height = parse_size(size)
    except ValueError:  # a given file that is not a PNG: its size is unknown
        return 0
    return width * height
