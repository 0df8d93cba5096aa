"""Transcriptions: the emulator's ``/v1/audio/transcriptions`` as OpenAI's own client sends and
reads it (multipart upload, ``json``/``text``/``verbose_json``, refusals), the plugin's
``api = "transcriptions"`` over real HTTP storing the clip's duration, the words and the
duration the server billed, and the example through the CLI with its latency by duration and
its cost per audio minute."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

import anyio
import openai
import pytest
from gpubench_openai import OpenAIProvider
from gpubench_openai.emulator import make_app

from gpubench_sdk import (
    Burst,
    Outcome,
    ProviderError,
    Request,
    Store,
    Transcription,
    from_data_url,
    metrics,
    run,
)
from gpubench_sdk.testing import CliEndToEnd, quick_fleet, serve

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "audio_emulated.toml"
KEY = "sk-audio-31d7a2"
MODEL = "whisper"


def clip(ms: int) -> bytes:
    return from_data_url(Transcription(duration_ms=ms).request(0).payload["audio"])[0]


def test_the_official_client_uploads_and_reads_each_format() -> None:
    app = make_app(quick_fleet(0.0), api_key=KEY, model=MODEL, audio_rtf=0.0)
    with serve(app) as served:
        client = openai.OpenAI(
            base_url=f"{served.url}/v1", api_key=KEY, _strict_response_validation=True
        )
        audio = ("speech.wav", clip(4000), "audio/wav")
        plain = client.audio.transcriptions.create(model=MODEL, file=audio, language="en")
        text = client.audio.transcriptions.create(model=MODEL, file=audio, response_format="text")
        verbose = client.audio.transcriptions.create(
            model=MODEL, file=audio, response_format="verbose_json"
        )
        with pytest.raises(openai.NotFoundError, match="does not exist"):
            client.audio.transcriptions.create(model="other", file=audio)
        with pytest.raises(openai.BadRequestError, match="response_format"):
            client.audio.transcriptions.create(model=MODEL, file=audio, response_format="srt")
        with pytest.raises(openai.BadRequestError, match="empty or unreadable"):
            client.audio.transcriptions.create(model=MODEL, file=("x.mp3", b"", "audio/mpeg"))
    assert plain.text.split() == [f"word{i}" for i in range(10)]  # 2.5 words a second
    assert plain.usage is not None and plain.usage.type == "duration"
    assert plain.usage.seconds == 4.0
    assert text.strip() == plain.text
    assert verbose.duration == 4.0 and verbose.language == "english"


def test_a_run_stores_the_clip_the_words_and_the_billed_duration(tmp_path: Path) -> None:
    app = make_app(quick_fleet(0.0), api_key=KEY, model=MODEL, audio_rtf=0.1)
    workload = Transcription(duration_ms={"dist": "empirical", "values": [1500, 6000]}, seed=2)
    path = tmp_path / "a.sqlite"
    with serve(app) as served:
        target = OpenAIProvider(
            base_url=f"{served.url}/v1", model=MODEL, api="transcriptions", api_key=KEY
        )
        burst = [Burst(total=10, concurrency=2)]
        outcome = anyio.run(functools.partial(run, {"a": target}, workload, burst, store=path))
    with Store(path) as store:
        invocations = store.invocations(outcome.run_id)
    assert [(i.outcome, i.error) for i in invocations if i.outcome is not Outcome.OK] == []
    for inv in invocations:
        assert inv.detail is not None
        ms = inv.detail["requested"]["audio_ms"]
        assert inv.input_units == ms and inv.detail["billed_audio_s"] == ms / 1000
        assert inv.output_units == round(ms / 1000 * 2.5)
    short, long = metrics.by_audio_duration(invocations)
    assert (short.label, long.label) == ("1-2 s", "4-8 s")
    assert long.latency_p50_ms > short.latency_p50_ms + 300  # 0.1 s per second of audio


def test_a_payload_without_audio_is_refused_by_name() -> None:
    async def invoke(url: str) -> Any:
        async with OpenAIProvider(base_url=f"{url}/v1", model=MODEL, api="transcriptions") as p:
            return await p.invoke(Request(seq=0, payload={"prompt": "not audio"}))

    refused = pytest.raises(ProviderError, match=r"audio workload's \{'audio': 'data:...'\}")
    with serve(make_app(quick_fleet(0.0), model=MODEL)) as served, refused:
        anyio.run(invoke, served.url)


@pytest.mark.slow
def test_the_audio_example_runs_groups_by_duration_and_prices_a_minute(tmp_path: Path) -> None:
    e2e = CliEndToEnd(tmp_path)
    e2e.env["OPENAI_API_KEY"] = KEY
    try:
        url = e2e.emulator(
            "gpubench_openai.emulator", "--api-key-env", "OPENAI_API_KEY",
            "--audio-rtf", "0.02", "--max-workers", "2", "--model", MODEL,
        )  # fmt: skip
        replace = {"http://127.0.0.1:8000/v1": url, 'model = "emulated-llm"': f'model = "{MODEL}"'}
        done = e2e.run(EXAMPLE, replace=replace, args=())
        invs = done.measured(secret=KEY)
    finally:
        e2e.close()
    assert len(invs) == 40 and all(i.outcome is Outcome.OK for i in invs)
    assert "p50 latency by audio duration:" in done.stdout
    assert "per audio min $" in done.stdout
