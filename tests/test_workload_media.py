"""The media the audio and vision workloads send: seeded, well-formed files (a WAV the standard
library reads at the length asked, with voice and pauses in it; a PNG whose header says the
size asked), given files read beside the plan, and bad ones refused by the field's name."""

from __future__ import annotations

import io
import wave
from pathlib import Path

import numpy as np
import pytest

from gpubench_sdk import (
    ConfigError,
    Transcription,
    VisionChat,
    data_url,
    from_data_url,
    load_config,
)
from gpubench_sdk._contract._media import picture_png, png_size, speech_like_pcm, wav


def test_a_generated_clip_is_speech_shaped_and_as_long_as_asked() -> None:
    pcm = np.frombuffer(speech_like_pcm(4.0, seed=1), dtype="<i2").astype(float) / 32767
    assert len(pcm) == 4 * 16_000
    frames = pcm.reshape(-1, 160)  # 10 ms frames
    loud = np.sqrt((frames**2).mean(axis=1)) > 0.02
    assert 0.4 < loud.mean() < 0.95  # syllables and pauses, not a tone or silence
    assert speech_like_pcm(4.0, seed=1) == speech_like_pcm(4.0, seed=1)
    with wave.open(io.BytesIO(wav(speech_like_pcm(0.5, seed=2)))) as clip:
        assert (clip.getnchannels(), clip.getsampwidth(), clip.getframerate()) == (1, 2, 16_000)
        assert clip.getnframes() == 8_000


def test_each_request_is_a_wav_of_its_drawn_duration() -> None:
    audio = Transcription(duration_ms={"dist": "uniform", "min": 200, "max": 3000}, seed=9)
    for seq in range(8):
        request = audio.request(seq)
        data, mime = from_data_url(request.payload["audio"])
        with wave.open(io.BytesIO(data)) as clip:
            seconds = clip.getnframes() / clip.getframerate()
        assert mime == "audio/wav"
        assert seconds * 1000 == request.detail["requested"]["audio_ms"]  # type: ignore[index]


def test_a_given_audio_file_is_sent_as_it_is(tmp_path: Path) -> None:
    clip = tmp_path / "meeting.wav"
    clip.write_bytes(wav(speech_like_pcm(1.25, seed=3)))
    request = Transcription(file=str(clip)).request(0)
    assert from_data_url(request.payload["audio"])[0] == clip.read_bytes()
    assert request.detail == {"requested": {"audio_ms": 1250}}  # read from the WAV header
    mp3 = tmp_path / "call.mp3"
    mp3.write_bytes(b"ID3 not decoded")
    assert Transcription(file=str(mp3), duration_ms=9000).request(0).detail == {
        "requested": {"audio_ms": 9000}  # no header to read: the plan's duration
    }
    with pytest.raises(ConfigError, match=r"workload\.file: .*a file ending in one of"):
        Transcription(file=str(tmp_path / "notes.txt"))
    with pytest.raises(ConfigError, match=r"workload\.file: .*a readable file"):
        Transcription(file=str(tmp_path / "missing.wav"))
    with pytest.raises(ValueError, match="a given file has one duration"):
        Transcription(file=str(clip), duration_ms={"dist": "uniform", "min": 1, "max": 9})


def test_pictures_are_pngs_of_the_drawn_size(tmp_path: Path) -> None:
    assert png_size(picture_png(320, 200, seed=1)) == (320, 200)
    vision = VisionChat(image_sizes=["64x64", "300x100"], images_per_request=3, seed=2)
    for seq in range(6):
        request = vision.request(seq)
        asked = request.detail["requested"]  # type: ignore[index]
        sizes = {png_size(from_data_url(u)[0]) for u in request.payload["images"]}
        assert sizes == {tuple(int(side) for side in asked["image_size"].split("x"))}
        assert asked["image_pixels"] == 3 * np.prod(next(iter(sizes)))
    photo = tmp_path / "photo.png"
    photo.write_bytes(picture_png(40, 30, seed=5))
    given = VisionChat(image_file=str(photo)).request(0)
    assert given.payload["images"] == [data_url(photo.read_bytes(), "image/png")]
    assert given.detail["requested"]["image_size"] == "40x30"  # type: ignore[index]


def test_media_files_are_read_beside_the_plan(tmp_path: Path) -> None:
    (tmp_path / "media").mkdir()
    (tmp_path / "media" / "clip.wav").write_bytes(wav(speech_like_pcm(0.5, seed=1)))
    plan = tmp_path / "plan.toml"
    plan.write_text(
        '[workload]\nkind = "audio"\nfile = "media/clip.wav"\n'
        '[[targets]]\nname = "t"\nprovider = "local"\n'
        '[[scenarios]]\nkind = "burst"\ntotal = 1\nconcurrency = 1\n'
    )
    assert load_config(plan).workload.workload_options()["file"] == str(
        (tmp_path / "media" / "clip.wav").resolve()
    )
    (tmp_path / "media" / "tokenizer.json").write_text("{}")
    plan.write_text(
        plan.read_text().replace(
            'kind = "audio"\nfile = "media/clip.wav"', 'kind = "llm"\ntokenizer = "media"'
        )
    )
    assert load_config(plan).workload.workload_options()["tokenizer"] == str(
        (tmp_path / "media").resolve()
    )
    plan.write_text(plan.read_text().replace('"media"', '"acme/llm"'))  # a model id stays one
    assert load_config(plan).workload.workload_options()["tokenizer"] == "acme/llm"


def test_a_data_url_is_read_back_or_refused() -> None:
    assert from_data_url(data_url(b"\x00\x01", "audio/wav")) == (b"\x00\x01", "audio/wav")
    with pytest.raises(ValueError, match="not a base64 data: URL"):
        from_data_url("https://example.com/clip.wav")
