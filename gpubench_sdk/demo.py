"""The local runtime's default handler: a small numpy model with a real load step.

``load()`` does what a model server's start-up does, on the CPU and at toy scale: it reads a
"checkpoint" (dense layers drawn from a seeded RNG), converts it (a randomized low-rank
projection of each layer down to the serving width), calibrates activation scales on a batch,
and runs a warm-up pass. It takes about a second on one core; the work is real compute,
so it scales with the machine the way a real load does. It runs numpy's BLAS on one thread:
see below.

``predict(payload, model)`` answers the built-in workloads (``probe``, ``llm``, ``chat``,
``image``, ``embeddings``) with outputs their ``read`` methods accept, at a few milliseconds of
compute per request.
``echo(payload)`` is the probe alone, with no load step: platform overhead and nothing else.
"""

from __future__ import annotations

import base64
import os
import struct
import time
import zlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

# Workers share the machine and each serves one request at a time, so one BLAS thread each.
# With OpenBLAS's default of a thread per core, its spin-waiting threads oversubscribe the cores:
# measured on 2 busy cores, load() took 11.4 s instead of 1.7 s. Only effective before numpy is
# first imported, i.e. in a worker process; a user's own setting wins.
for _variable in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_variable, "1")

import numpy as np  # noqa: E402 - after the thread settings above
import numpy.typing as npt  # noqa: E402

Array = npt.NDArray[np.float32]

CHECKPOINT_WIDTH = 1024
CHECKPOINT_LAYERS = 12  # tuned so that load() takes about a second on one 2020s server core
WIDTH = 128  # the serving width: a forward pass on one vector costs microseconds
SERVING_LAYERS = 4
CALIBRATION_BATCH = 2048
SEED = 1234
IMAGE_SIDE = 16  # pixels: the images are tokens of work, not pictures worth looking at

_WORDS = (
    "the a model server reads writes each every token image request response worker queue "
    "cold warm start load fast slow small large first last next time latency cost batch "
    "layer weight value signal noise light water stone river cloud field city north south "
    "east west early late open close high low bright dark quiet loud simple clear"
)
VOCABULARY = tuple(_WORDS.split())


@dataclass(frozen=True, slots=True)
class DemoModel:
    """The served model: embeddings, a few square layers, and an output head over words."""

    embeddings: Array  # (vocabulary, WIDTH)
    layers: tuple[Array, ...]  # each (WIDTH, WIDTH)
    head: Array  # (WIDTH, vocabulary)
    positions: Array  # (64, WIDTH)

    def forward(self, x: Array) -> Array:
        for layer in self.layers:
            x = np.tanh(x @ layer)
        return x


def load() -> DemoModel:
    """Build the demo model (about a second of real compute)."""
    rng = np.random.default_rng(SEED)
    scale = np.float32(1.0 / np.sqrt(CHECKPOINT_WIDTH))
    checkpoint = [
        rng.standard_normal((CHECKPOINT_WIDTH, CHECKPOINT_WIDTH), dtype=np.float32) * scale
        for _ in range(CHECKPOINT_LAYERS)
    ]
    # Calibrate: the activation scale of every checkpoint layer on a batch of inputs.
    batch = rng.standard_normal((CALIBRATION_BATCH, CHECKPOINT_WIDTH), dtype=np.float32)
    gains = []
    for weights in checkpoint:
        pre = batch @ weights
        gains.append(float(np.std(pre)) or 1.0)
        batch = np.tanh(pre)
    # Convert: project each layer onto a random WIDTH-dimensional range (randomized SVD's first
    # step), then keep every third one, so the served network is small and fast.
    layers = []
    for weights, gain in zip(checkpoint, gains, strict=True):
        sketch = weights @ rng.standard_normal((CHECKPOINT_WIDTH, WIDTH), dtype=np.float32)
        basis, _ = np.linalg.qr(sketch)
        small = (basis.T @ weights @ basis) / np.float32(gain)
        layers.append(small.astype(np.float32) * np.float32(np.sqrt(CHECKPOINT_WIDTH / WIDTH)))
    model = DemoModel(
        embeddings=rng.standard_normal((len(VOCABULARY), WIDTH), dtype=np.float32),
        layers=tuple(layers[:: CHECKPOINT_LAYERS // SERVING_LAYERS]),
        head=rng.standard_normal((WIDTH, len(VOCABULARY)), dtype=np.float32),
        positions=rng.standard_normal((64, WIDTH), dtype=np.float32) * np.float32(0.5),
    )
    # Warm up: the first call of each code path pays for lazy initialisation inside numpy.
    predict({"sleep_ms": 0, "echo": ""}, model)
    predict({"prompt": "warm up", "max_tokens": 4}, model)
    predict({"prompt": "warm up", "num_inference_steps": 2, "num_images": 1}, model)
    predict({"input": ["warm up"]}, model)
    return model


def predict(payload: Mapping[str, Any], model: DemoModel) -> dict[str, Any]:
    """Answer a probe, LLM or image payload (see the module docstring)."""
    if not isinstance(payload, Mapping):
        raise TypeError(f"the payload must be a JSON object, not {type(payload).__name__}")
    if "num_inference_steps" in payload or "num_images" in payload:
        return _image(payload, model)
    if "prompt" in payload or "messages" in payload:
        return _complete(payload, model)
    if "input" in payload:
        return _embed(payload, model)
    if "echo" in payload or "sleep_ms" in payload:
        return _probe(payload, model)
    raise ValueError(
        "unknown payload: expected a probe {sleep_ms, echo}, an LLM {prompt, max_tokens}, "
        "an image {prompt, num_inference_steps, num_images} or an embeddings {input} request"
    )


def echo(payload: Mapping[str, Any]) -> dict[str, Any]:
    """Sleep ``sleep_ms``, then echo ``echo`` back: a handler with no model and no load step."""
    return _probe(payload, None)


def _probe(payload: Mapping[str, Any], model: DemoModel | None) -> dict[str, Any]:
    started = time.perf_counter()
    sleep_ms = float(payload.get("sleep_ms") or 0.0)
    if sleep_ms > 0:
        time.sleep(sleep_ms / 1e3)
    if model is not None:
        model.forward(model.embeddings[:1])
    return {"echo": payload.get("echo"), "slept_ms": (time.perf_counter() - started) * 1e3}


def _word_index(word: str) -> int:
    return zlib.crc32(word.encode("utf-8")) % len(VOCABULARY)


def _complete(payload: Mapping[str, Any], model: DemoModel) -> dict[str, Any]:
    prompt = str(payload.get("prompt", ""))
    messages = payload.get("messages")
    if isinstance(messages, list):  # a chat: the model reads every message's words
        prompt = " ".join(str(m.get("content", "")) for m in messages if isinstance(m, dict))
    max_tokens = int(payload.get("max_tokens", 16))
    if max_tokens < 0:
        raise ValueError("max_tokens must be >= 0")
    words = prompt.split()
    ids = [_word_index(w) for w in words] or [0]
    state = model.forward(model.embeddings[ids].mean(axis=0, keepdims=True))
    token = ids[-1]
    out = []
    for position in range(max_tokens):
        # Greedy decoding, one forward pass per token, as an autoregressive model does.
        x = state + model.embeddings[token] + model.positions[position % len(model.positions)]
        state = model.forward(x)
        token = int(np.argmax(state @ model.head))
        out.append(VOCABULARY[token])
    return {
        "text": " ".join(out),
        "usage": {"prompt_tokens": len(words), "completion_tokens": max_tokens},
    }


def _embed(payload: Mapping[str, Any], model: DemoModel) -> dict[str, Any]:
    """OpenAI's embeddings answer: each text's words through the model, mean-pooled, one
    unit vector of ``WIDTH`` per text; ``usage.prompt_tokens`` counts the words."""
    texts = payload["input"]
    texts = [texts] if isinstance(texts, str) else texts
    if not isinstance(texts, list) or not texts or not all(isinstance(t, str) for t in texts):
        raise ValueError("input must be a text or a non-empty list of texts")
    data, tokens = [], 0
    for index, text in enumerate(texts):
        ids = [_word_index(w) for w in text.split()] or [0]
        tokens += len(text.split())
        where = np.arange(len(ids)) % len(model.positions)
        states = model.forward(model.embeddings[ids] + model.positions[where])
        vector = states.mean(axis=0)
        vector /= np.linalg.norm(vector) or 1.0
        data.append({"object": "embedding", "index": index, "embedding": vector.tolist()})
    return {
        "object": "list",
        "data": data,
        "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
    }


def _png(pixels: npt.NDArray[np.uint8]) -> bytes:
    """A grayscale PNG, written by hand so the demo needs nothing beyond numpy."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

    height, width = pixels.shape
    rows = b"".join(b"\x00" + pixels[row].tobytes() for row in range(height))
    header = struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(rows))
        + chunk(b"IEND", b"")
    )


def _image(payload: Mapping[str, Any], model: DemoModel) -> dict[str, Any]:
    steps = int(payload.get("num_inference_steps", 20))
    count = int(payload.get("num_images", 1))
    if steps < 1 or count < 1:
        raise ValueError("num_inference_steps and num_images must be >= 1")
    seed = int(payload.get("seed", 0)) ^ zlib.crc32(str(payload.get("prompt", "")).encode())
    rng = np.random.default_rng(seed)
    side = IMAGE_SIDE
    # The latent grows with the pixels asked for, as a diffusion model's does (2 vectors at
    # 512x512, 8 at 1024x1024): a larger image is more work per step, not a larger picture.
    area = int(payload.get("width", 512)) * int(payload.get("height", 512))
    vectors = max(side * side // WIDTH, round(2 * area / 512**2))
    latents = rng.standard_normal((count, vectors, WIDTH), dtype=np.float32)
    for _ in range(steps):  # one forward pass per denoising step, as a diffusion sampler does
        latents = latents - np.float32(0.1) * model.forward(latents)
    first = latents.reshape(count, -1)[:, : side * side]
    pixels = ((np.tanh(first) + 1.0) * 127.5).astype(np.uint8).reshape(count, side, side)
    images = [base64.b64encode(_png(image)).decode("ascii") for image in pixels]
    return {"images": images, "width": side, "height": side}
