"""The media workloads against Cog's own server (a real model server, not our emulator): a
model whose ``audio`` input is a Cog ``Path`` receives the audio workload's ``data:`` URL as
a file (Cog decodes it, as it downloads an ``https:`` one), reads it as a WAV with the
standard library and says how long it was; the stored request agrees with the server on the
clip's duration, and latency grows with it. A model whose ``images`` input is a list of
``Path`` receives the vision workload's pictures the same way and reads their PNG headers: the
sizes it reads are the sizes the requests stored."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import coglet  # noqa: F401  (the testing extra installs cog and its server: CI never skips)
from _cog_server import cog_server, wait_ready
from gpubench_replicate import CogProvider

from gpubench_sdk import Burst, Outcome, Store, Transcription, VisionChat, metrics, run

TRANSCRIBER = """
import time
import wave

from cog import BaseModel, BaseRunner, Input, Path


class Output(BaseModel):
    text: str
    duration_s: float
    sample_rate: int


class Runner(BaseRunner):
    def run(self, audio: Path = Input(description="speech to transcribe")) -> Output:
        with wave.open(str(audio)) as clip:
            rate = clip.getframerate()
            seconds = clip.getnframes() / rate
        time.sleep(seconds * 0.05)  # a real-time factor of 0.05, as a GPU's Whisper
        words = " ".join(f"word{i}" for i in range(max(1, round(seconds * 2.5))))
        return Output(text=words, duration_s=seconds, sample_rate=rate)
"""


VISION = """
import struct

from cog import BaseModel, BaseRunner, Input, Path


class Output(BaseModel):
    text: str
    sizes: list[str]


class Runner(BaseRunner):
    def run(
        self,
        prompt: str = Input(description="the question"),
        images: list[Path] = Input(description="the pictures"),
        max_tokens: int = Input(default=16, ge=1),
    ) -> Output:
        sizes = []
        for image in images:
            head = image.read_bytes()[:24]
            assert head[:8] == b"\\x89PNG\\r\\n\\x1a\\n", "not a PNG"
            width, height = struct.unpack(">II", head[16:24])
            sizes.append(f"{width}x{height}")
        return Output(text=" ".join(["seen"] * max_tokens), sizes=sizes)
"""


def test_cog_reads_the_vision_workloads_pictures(tmp_path: Path) -> None:
    vision = VisionChat(image_sizes=["64x48", "640x480"], images_per_request=2, max_tokens=3)
    with cog_server(tmp_path, VISION) as (url, _):
        wait_ready(url)

        async def ask(seq: int) -> Any:
            # the model takes no sampling fields: the map drops them
            drop = {"drop": ["temperature", "stream"]}
            async with CogProvider(url=url, timeout_s=60, input=drop) as cog:
                return (await cog.invoke(vision.request(seq))).output

        for seq in range(6):
            asked = vision.request(seq).detail["requested"]  # type: ignore[index]
            answer = anyio.run(ask, seq)
            assert answer["sizes"] == [asked["image_size"]] * 2
            assert vision.read(answer) == (None, 3)


def test_cog_reads_the_generated_clips_as_the_workload_says(tmp_path: Path) -> None:
    workload = Transcription(
        duration_ms={"dist": "empirical", "values": [1000, 8000]}, language="en", seed=3
    )
    path = tmp_path / "audio.sqlite"
    with cog_server(tmp_path, TRANSCRIBER) as (url, _):
        wait_ready(url)
        # the model declares no 'language' input: Cog would refuse it, so the map drops it
        target = CogProvider(url=url, timeout_s=60, input={"drop": ["language"]})

        async def one(seq: int) -> Any:
            async with CogProvider(url=url, timeout_s=60, input={"drop": ["language"]}) as cog:
                return (await cog.invoke(workload.request(seq))).output

        # Cog wrote the data: URL to a file, and the model read a WAV of exactly that length
        for seq in range(4):
            asked = workload.request(seq).detail["requested"]["audio_ms"]  # type: ignore[index]
            read = anyio.run(one, seq)
            assert read["duration_s"] == asked / 1000 and read["sample_rate"] == 16_000
        outcome = anyio.run(
            lambda: run({"cog": target}, workload, [Burst(total=12, concurrency=1)], store=path)
        )
    with Store(path) as store:
        invocations = store.invocations(outcome.run_id)
    assert [(i.outcome, i.error) for i in invocations if i.outcome is not Outcome.OK] == []
    for inv in invocations:
        assert inv.detail is not None
        asked = inv.detail["requested"]["audio_ms"]
        assert inv.input_units == asked  # the clip's duration, stored as sent
        assert inv.output_units == max(1, round(asked / 1000 * 2.5))  # the model's words
    groups = metrics.by_audio_duration(invocations)
    assert [g.label for g in groups] == ["1-2 s", "8-16 s"]
    assert groups[1].latency_p50_ms > groups[0].latency_p50_ms + 200  # 0.05 x 7 s more
