"""Every unit a run's bill is spread over: requests, tokens (per 1k and 1M, in and out),
images, minutes of audio; in Python, the table and ``gpubench cost run --json``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from _invocations import begin_burst_run, measured
from click.testing import CliRunner

from gpubench_sdk import Invocation, Store
from gpubench_sdk._cli import main
from gpubench_sdk.cost._calc import units_of


def _inv(seq: int, start_s: float, out_units: float) -> Invocation:
    return measured(seq, start_s, 2.0, cold=seq == 0, input_units=10.0, output_units=out_units)


def test_units_follow_what_the_workload_counts() -> None:
    tokens = units_of(2.0, 100, ("tokens", "tokens"), 50_000, 200_000)
    assert tokens.per_1k_input_tokens_usd == pytest.approx(0.04)
    assert tokens.per_million_input_tokens_usd == pytest.approx(40.0)
    assert tokens.per_1k_output_tokens_usd == pytest.approx(0.01)
    assert tokens.per_million_output_tokens_usd == pytest.approx(10.0)
    assert tokens.per_image_usd is None and tokens.per_request_usd == pytest.approx(0.02)
    images = units_of(2.0, 100, ("requests", "images"), 100, 400)
    assert images.per_image_usd == pytest.approx(0.005)
    assert images.per_million_output_tokens_usd is None  # not "per 1M out tok" for images
    audio = units_of(3.0, 10, ("audio_seconds", "tokens"), 600, 0)
    assert audio.per_audio_minute_usd == pytest.approx(0.3)


def _image_run(path: Path) -> None:
    with Store(path) as store:
        config = {
            "workload": {"kind": "image"},
            "targets": [{"name": "t", "provider": "runpod", "price_per_s_usd": 0.001}],
        }
        run = begin_burst_run(store, "images", config)
        for seq in range(4):
            store.append(run.id, _inv(seq, 3.0 * seq, out_units=2))
        store.end_run(run.id, "completed")


def test_cost_run_json_and_table_carry_every_unit(tmp_path: Path) -> None:
    path = tmp_path / "img.sqlite"
    _image_run(path)
    runner = CliRunner()
    done = runner.invoke(main, ["cost", "run", "latest", "--store", str(path), "--json"])
    assert done.exit_code == 0, done.output
    (row,) = json.loads(done.output[done.output.index("[") :])
    for key in (
        "per_request_usd",
        "per_1k_requests_usd",
        "per_1k_input_tokens_usd",
        "per_million_input_tokens_usd",
        "per_1k_output_tokens_usd",
        "per_million_output_tokens_usd",
        "per_image_usd",
        "per_audio_minute_usd",
    ):
        assert key in row
    assert row["per_image_usd"] == pytest.approx(row["total_usd"] / 8)  # 4 requests x 2 images
    assert row["per_million_output_tokens_usd"] is None
    table = runner.invoke(main, ["cost", "run", "latest", "--store", str(path)])
    assert "per image $" in table.output and "out tok" not in table.output
