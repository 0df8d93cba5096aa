"""``Transcription``: speech to text, a clip per request, priced by the minute of audio.

Transcription is billed by the audio's duration (OpenAI's ``whisper-1`` per minute; a GPU
endpoint by the seconds a worker spends on it), and its latency grows with the clip: so the
clip's duration is the workload's knob, a number or a distribution of milliseconds
(``Length``), drawn per request from the seed and the request's ``seq``. The clip is generated
(``_media.speech_like_pcm``: voiced syllables and pauses at 16 kHz, so a voice-activity detector
does not skip it), or a given file sent as it is.

The payload is ``{"audio": "data:audio/wav;base64,..."}`` (plus ``language`` where set): a file
inside JSON, as the JSON-bodied platforms take one (a Cog model's ``Path`` input reads a
``data:`` URL; Replicate's and RunPod's handlers are given the same field by the input map). The
``openai`` plugin's ``api = "transcriptions"`` sends the bytes as OpenAI's multipart upload.

Units are ``(audio_ms, words)``: the clip's duration as sent (the cost module prices it per
audio minute) and the transcript's words. Where the server reports the duration it billed
(OpenAI's ``usage: {"type": "duration", "seconds"}``), it is stored as ``billed_audio_s``.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any

from pydantic import Field, model_validator

from .._base._errors import InvalidResponseError
from .._base._types import REQUESTED, Request, Result
from ._lengths import Length, draw_length, highest_length
from ._media import SAMPLE_RATE, data_url, read_media, speech_like_pcm, wav, wav_duration_s
from ._tokens import Units
from ._workload import Workload, WorkloadOptions

MAX_CLIP_MS = 3_600_000  # an hour: longer is a file job, not a request
_CLIP_CACHE = 64  # distinct durations kept encoded (a fixed duration is one)


class TranscriptionOptions(WorkloadOptions):
    duration_ms: Length = Field(
        default=5_000,
        description="the clip's duration in milliseconds: a number or a distribution",
    )
    file: str | None = Field(
        default=None,
        description="send this audio file (wav, mp3, flac, ogg, m4a, webm) instead of a "
        "generated clip; its duration is read from a WAV, else give duration_ms",
    )
    language: str | None = Field(
        default=None, min_length=2, max_length=3, description="ISO-639-1 hint sent as 'language'"
    )
    seed: int = 0

    @model_validator(mode="after")
    def _within_limits(self) -> TranscriptionOptions:
        if highest_length(self.duration_ms) > MAX_CLIP_MS:
            raise ValueError(f"duration_ms: at most {MAX_CLIP_MS} (an hour) per request")
        if self.file is not None and not isinstance(self.duration_ms, int):
            raise ValueError("duration_ms: a given file has one duration, not a distribution")
        return self


class Transcription(Workload):
    """A speech clip to transcribe per request, ``duration_ms`` long (or a given ``file``).

    Each request stores ``{"requested": {"audio_ms": n}}``; units are ``(audio_ms, words)``.
    """

    name = "audio"
    kind = "audio"
    units = ("audio_ms", "words")
    Options = TranscriptionOptions

    def __init__(self, options: WorkloadOptions | None = None, **fields: Any) -> None:
        super().__init__(options, **fields)
        opts = self.options
        assert isinstance(opts, TranscriptionOptions)
        self._extra = {} if opts.language is None else {"language": opts.language}
        self._given: tuple[str, int] | None = None
        if opts.file is not None:
            data, mime = read_media(opts.file, "workload.file")
            seconds = wav_duration_s(data)
            given_ms = opts.duration_ms if seconds is None else round(seconds * 1000)
            assert isinstance(given_ms, int)
            self._given = (data_url(data, mime), given_ms)
        # One clip as long as the longest request, generated once: a request of n ms is its
        # first n ms with a header of its own (the same voice, cut shorter), so a drawn
        # duration costs a slice and an encoding, never a synthesis.
        longest = highest_length(opts.duration_ms) if opts.file is None else 0
        self._pcm = speech_like_pcm(longest / 1000, opts.seed) if longest else b""

    @functools.lru_cache(maxsize=_CLIP_CACHE)  # noqa: B019 - one workload per run: bounded
    def _clip(self, ms: int) -> str:
        frames = self._pcm[: 2 * (ms * SAMPLE_RATE // 1000)]
        return data_url(wav(frames), "audio/wav")

    def request(self, seq: int) -> Request:
        opts = self.options
        assert isinstance(opts, TranscriptionOptions)
        if self._given is not None:
            audio, ms = self._given
        else:
            ms = draw_length(opts.duration_ms, opts.seed, seq, "duration_ms")
            audio = self._clip(ms)
        return Request(
            seq=seq,
            payload={"audio": audio, **self._extra},
            kind=self.kind,
            detail={REQUESTED: {"audio_ms": ms}},
        )

    def read(self, output: Any) -> Units:
        text = transcript_text(output)
        if text is None:
            raise InvalidResponseError("transcription output has no text")
        return (None, len(text.split()))

    def count(
        self, request: Request, result: Result, units: Units
    ) -> tuple[Units, Mapping[str, Any] | None]:
        """The clip's duration as sent (exact: gpubench made or read it) and, where the
        server reported the duration it billed, that too."""
        asked = (request.detail or {}).get(REQUESTED) or {}
        sent = asked.get("audio_ms") if isinstance(asked, Mapping) else None
        usage = result.output.get("usage") if isinstance(result.output, Mapping) else None
        billed = None
        if isinstance(usage, Mapping) and usage.get("type") == "duration":
            seconds = usage.get("seconds")
            billed = seconds if isinstance(seconds, int | float) else None
        return (units[0] if units[0] is not None else sent, units[1]), (
            None if billed is None else {"billed_audio_s": billed}
        )


def transcript_text(output: Any) -> str | None:
    """A transcription answer's text: OpenAI's ``text``, Replicate Whisper's
    ``transcription``, or the answer itself where it is a string."""
    if isinstance(output, str):
        return output
    if isinstance(output, Mapping):
        for key in ("text", "transcription"):
            if isinstance(output.get(key), str):
                return str(output[key])
    return None
