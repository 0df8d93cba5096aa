"""Refusals that cost nothing: bounded up front with the numbers, no file left behind, no
nonsense accepted (a negative price), and a long computation that says how far it is."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from gpubench_sdk import ConfigError
from gpubench_sdk._cli import main
from gpubench_sdk.cost import poisson_arrivals

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def cli(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(main, list(args))
    assert isinstance(result.exception, SystemExit | None), repr(result.exception)
    assert "Traceback" not in result.output and "internal error" not in result.output
    return result.exit_code, result.stdout, result.stderr


def test_a_whatif_too_large_to_simulate_is_refused_up_front_with_the_numbers() -> None:
    started = time.monotonic()
    code, _, stderr = cli("cost", "whatif", "-t", "runpod,rate=0.0004", "--rps", "1e6",
                          "--exec-s", "0.5", "--cold-s", "10")  # fmt: skip
    assert time.monotonic() - started < 5  # refused, not attempted (it once asked for 644 GiB)
    assert code == 2 and "--rps" in stderr and "86,400,000,000" in stderr, stderr
    assert "--max-requests" in stderr


def test_a_long_whatif_says_how_far_it_is_and_the_bound_can_be_raised() -> None:
    args = ["cost", "whatif", "-t", "runpod,rate=0.0004", "--rps", "2.5", "--exec-s", "0.2",
            "--cold-s", "5", "--scale-down", "5", "--min-workers", "0"]  # fmt: skip
    code, _, stderr = cli(*args, "--max-requests", "100000")
    assert code == 2 and "--max-requests=100,000" in stderr, stderr
    code, stdout, stderr = cli(*args)  # ~216,000 requests: long enough to report progress
    assert code == 0, stderr
    assert "simulated 1/1 settings on" in stderr and "cheapest meeting" in stdout


@pytest.mark.parametrize("spec", ["runpod,rate=-1", "runpod,rate=inf", "runpod,rate=1,cold=-5"])
def test_a_negative_or_infinite_price_or_cold_start_is_refused(spec: str) -> None:
    code, _, stderr = cli("cost", "whatif", "-t", spec, "--rps", "1", "--exec-s", "0.5",
                          "--cold-s", "10")  # fmt: skip
    assert code == 2 and "--target" in stderr and ">= 0" in stderr, stderr


def test_poisson_arrivals_refuses_more_than_its_limit() -> None:
    with pytest.raises(ConfigError, match="about 86,400,000,000"):
        poisson_arrivals(1e6, 86_400)
    assert poisson_arrivals(10, 100, limit=2_000).size > 0


def test_a_refused_campaign_create_leaves_no_store(tmp_path: Path) -> None:
    store = tmp_path / "campaign.sqlite"
    plan = str(EXAMPLES / "campaign.toml")
    for refused in (["--jitter", "5h"], ["--start", "bogus"], ["--tz", "Nowhere/X"]):
        code, _, stderr = cli("campaign", "create", plan, "--store", str(store), "--for", "1d",
                              "--every", "4h", *refused)  # fmt: skip
        assert code == 2, stderr
        assert list(tmp_path.iterdir()) == [], (refused, list(tmp_path.iterdir()))
    code, _, stderr = cli("campaign", "create", plan, "--store", str(store), "--for", "1d",
                          "--every", "4h")  # fmt: skip
    assert code == 0 and store.is_file(), stderr


BOM = "\ufeff"  # what Notepad, Excel's "CSV UTF-8" and some editors put first


def test_a_bom_is_accepted_where_an_editor_or_a_spreadsheet_writes_one(tmp_path: Path) -> None:
    from gpubench_sdk import Replay, load_config
    from gpubench_sdk._base._validate import resolve_secret

    plan = tmp_path / "plan.toml"
    plan.write_text(BOM + (EXAMPLES / "quickstart.toml").read_text(), encoding="utf-8")
    assert load_config(plan).targets
    csv_trace, jsonl_trace = tmp_path / "trace.csv", tmp_path / "trace.jsonl"
    csv_trace.write_text(BOM + "timestamp,prompt_tokens\n0.5,3\n0.1,7\n", encoding="utf-8")
    jsonl_trace.write_text(BOM + '{"timestamp": 0.5}\n{"timestamp": 0.1}\n', encoding="utf-8")
    for trace in (csv_trace, jsonl_trace):
        arrivals = Replay(path=str(trace)).arrivals()
        assert [round(a.at_s, 3) for a in arrivals] == [0.0, 0.4], trace.name
    key_file = tmp_path / "key.txt"
    key_file.write_text(BOM + "sk-live-0123456789\n", encoding="utf-8")
    secret = resolve_secret("api_key", env=None, file=str(key_file))
    assert secret is not None and secret.get_secret_value() == "sk-live-0123456789"
    code, _, stderr = cli("run", str(plan), "--dry-run")
    assert code == 0, stderr
