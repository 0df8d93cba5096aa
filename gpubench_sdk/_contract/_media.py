"""Media the workloads send: a seeded, speech-like WAV clip, a seeded PNG picture, and the
``data:`` URLs that carry either inside a JSON body.

Both are generated, not downloaded, so a plan needs no files; both are seeded, so the same plan
sends the same bytes on every run and in every process. They are made to be *processed* the
way real media is, not to mean anything: the clip is voiced syllables (a pitch with harmonics
under a syllable envelope) with pauses and a little noise, so a voice-activity detector does not
skip it as silence; the picture is smooth gradients with blocks of detail, so a PNG encoder and
a vision encoder cannot shortcut it as one colour.
"""

from __future__ import annotations

import base64
import io
import re
import struct
import wave
import zlib
from pathlib import Path
from typing import Annotated

import numpy as np
from pydantic import AfterValidator

from .._base._errors import ConfigError

SAMPLE_RATE = 16_000
"""Hz: what Whisper-family models resample everything to (so a server spends no time on it)."""

MAX_SIDE = 8192  # pixels: no image API takes a larger side
_SIZE = re.compile(r"^(\d{1,5})x(\d{1,5})$")

_MIME = {
    ".wav": "audio/wav",
    ".mp3": "audio/mpeg",
    ".flac": "audio/flac",
    ".ogg": "audio/ogg",
    ".m4a": "audio/mp4",
    ".webm": "audio/webm",
    ".png": "image/png",
    ".jpg": "image/jpeg",
    ".jpeg": "image/jpeg",
    ".webp": "image/webp",
}


def parse_size(size: str) -> tuple[int, int]:
    """``"1024x768"`` as ``(1024, 768)``; ``ValueError`` naming the form otherwise."""
    match = _SIZE.match(size.strip())
    if not match or not all(8 <= int(side) <= MAX_SIDE for side in match.groups()):
        raise ValueError(f"WIDTHxHEIGHT with sides of 8 to {MAX_SIDE} pixels, e.g. '1024x768'")
    return int(match[1]), int(match[2])


def _checked_size(size: str) -> str:
    parse_size(size)
    return size.strip()


ImageSize = Annotated[str, AfterValidator(_checked_size)]
"""A workload field's picture size, ``"WIDTHxHEIGHT"``, checked where the plan is read."""


def speech_like_pcm(duration_s: float, seed: int, sample_rate: int = SAMPLE_RATE) -> bytes:
    """``duration_s`` seconds of mono 16-bit little-endian PCM: syllables of 120-260 ms at a
    pitch of 90-220 Hz with three harmonics, 40-200 ms pauses between them, noise 40 dB down."""
    rng = np.random.default_rng(seed)
    n = max(1, round(duration_s * sample_rate))
    signal = np.zeros(n)
    at = 0
    while at < n:
        length = int(rng.uniform(0.12, 0.26) * sample_rate)
        t = np.arange(min(length, n - at)) / sample_rate
        pitch = rng.uniform(90, 220)
        voice = sum(np.sin(2 * np.pi * pitch * k * t) / k for k in (1, 2, 3))
        signal[at : at + len(t)] = voice * np.sin(np.pi * t / (length / sample_rate)) ** 2
        at += length + int(rng.uniform(0.04, 0.2) * sample_rate)
    signal = 0.3 * signal / (np.abs(signal).max() or 1.0) + rng.normal(0, 0.003, n)
    return (np.clip(signal, -1, 1) * 32767).astype("<i2").tobytes()


def wav(pcm: bytes, sample_rate: int = SAMPLE_RATE) -> bytes:
    """A WAV file of mono 16-bit PCM samples: the 44-byte RIFF header (``fmt `` chunk of PCM
    format 1, then ``data``) before them."""
    fmt = struct.pack("<IHHIIHH", 16, 1, 1, sample_rate, sample_rate * 2, 2, 16)
    size = struct.pack("<I", len(pcm))
    return b"RIFF" + struct.pack("<I", 36 + len(pcm)) + b"WAVEfmt " + fmt + b"data" + size + pcm


def wav_duration_s(data: bytes) -> float | None:
    """The duration of a WAV file's bytes; None when they are not a WAV file."""
    try:
        with wave.open(io.BytesIO(data), "rb") as clip:
            return clip.getnframes() / clip.getframerate()
    except (wave.Error, EOFError, ZeroDivisionError):
        return None


def picture_png(width: int, height: int, seed: int) -> bytes:
    """An RGB PNG of ``width`` x ``height``: two seeded gradients with seeded noisy blocks."""
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:height, 0:width]
    base = np.stack(
        [
            (x * rng.uniform(0.2, 1.0) + y * rng.uniform(0.2, 1.0)) % 256,
            (x * rng.uniform(0.2, 1.0) - y * rng.uniform(0.2, 1.0)) % 256,
            (x + y) * 255 / max(1, width + height - 2),
        ],
        axis=-1,
    )
    block = 32
    noise = rng.integers(0, 64, (height // block + 1, width // block + 1, 3))
    base += np.repeat(np.repeat(noise, block, axis=0), block, axis=1)[:height, :width]
    return png(np.clip(base, 0, 255).astype(np.uint8))


def png(pixels: np.ndarray) -> bytes:
    """An 8-bit PNG of an ``(h, w)`` grey or ``(h, w, 3)`` RGB array (PNG spec, ISO/IEC 15948:
    signature, IHDR, one zlib IDAT of filter-0 rows, IEND), written with numpy and zlib."""
    height, width = pixels.shape[:2]
    colour = 2 if pixels.ndim == 3 else 0
    rows = np.hstack([np.zeros((height, 1), np.uint8), pixels.reshape(height, -1)])

    def chunk(kind: bytes, body: bytes) -> bytes:
        return (
            struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))
        )

    header = struct.pack(">IIBBBBB", width, height, 8, colour, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(rows.tobytes(), 6))
        + chunk(b"IEND", b"")
    )


def png_size(data: bytes) -> tuple[int, int] | None:
    """A PNG's ``(width, height)`` from its IHDR; None when ``data`` is not a PNG."""
    if data[:8] != b"\x89PNG\r\n\x1a\n" or data[12:16] != b"IHDR":
        return None
    width, height = struct.unpack(">II", data[16:24])
    return width, height


def data_url(data: bytes, mime: str) -> str:
    """``data:<mime>;base64,...`` (RFC 2397): a file inside a JSON string."""
    return f"data:{mime};base64,{base64.b64encode(data).decode()}"


def from_data_url(url: str) -> tuple[bytes, str]:
    """The bytes and MIME type of a base64 ``data:`` URL; ``ValueError`` for anything else."""
    head, sep, body = url.partition(",")
    if not (sep and head.startswith("data:") and head.endswith(";base64")):
        raise ValueError("not a base64 data: URL")
    return base64.b64decode(body, validate=True), head[5:-7] or "application/octet-stream"


def read_media(path: str, field: str) -> tuple[bytes, str]:
    """A given media file's bytes and MIME type (by its extension), or a ``ConfigError``
    naming ``field``."""
    mime = _MIME.get(Path(path).suffix.lower())
    if mime is None:
        kinds = ", ".join(sorted(_MIME))
        raise ConfigError(field, path, f"a file ending in one of {kinds}")
    try:
        return Path(path).read_bytes(), mime
    except OSError as exc:
        raise ConfigError(field, path, f"a readable file ({exc.strerror})") from None
