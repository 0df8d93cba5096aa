"""Refusals that cost nothing: bounded up front with the numbers, no file left behind, no
nonsense accepted (a negative price), and a long computation that says how far it is."""

from __future__ import annotations

import copy
import json
import re
import time
from pathlib import Path
from typing import Any

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


# Malformed traces, each refused by file and line (or row) with what a clean one holds.
TRACES: list[tuple[str, str, str]] = [
    ("nulls.jsonl", '{"timestamp": null}\n{"timestamp": 1}\n', "a value in column 'timestamp'"),
    ("array.jsonl", "[1, 2]\n", "array.jsonl:1"),
    ("scalar.jsonl", "5\n", "one JSON object per line"),
    ("text.jsonl", '{"timestamp": "abc"}\n', "a finite number of s"),
    ("nan.jsonl", '{"timestamp": NaN}\n{"timestamp": 1}\n', "got nan"),
    ("bool.jsonl", '{"timestamp": true}\n', "got True"),
    ("object.jsonl", '{"timestamp": {"a": 1}}\n', "a finite number of s"),
    ("list.jsonl", '{"timestamp": [1]}\n', "a finite number of s"),
    ("broken.jsonl", '{"timestamp": 1\n', "(not JSON)"),
    ("inf.csv", "timestamp\ninf\n1\n", "got 'inf'"),
    ("nan.csv", "timestamp\nnan\n1\n", "got 'nan'"),
    ("short.csv", "timestamp,prompt_tokens\n1\n2,3\n", "short.csv:2"),
    ("long.csv", "timestamp\n1,2,3\n", "this one has 3"),
    ("huge-cell.csv", "timestamp,x\n1," + "a" * 200_000 + "\n", "field larger than field limit"),
    ("nul.csv", "timestamp\n\x00\x01\n", "a finite number of s"),
    ("header-only.csv", "timestamp\n", "at least one row"),
    ("no-column.csv", "at_s\n1\n", "a column of the trace (it has at_s)"),
    ("trace.tsv", "timestamp\n1\n", "a .csv or .jsonl"),
    ("big-iso.csv", "timestamp\n9999-99-99\n", "a finite number of s"),
]


@pytest.mark.parametrize(("name", "text", "says"), TRACES, ids=[t[0] for t in TRACES])
def test_a_malformed_trace_is_refused_by_line(
    name: str, text: str, says: str, tmp_path: Path
) -> None:
    from gpubench_sdk import Replay

    trace = tmp_path / name
    trace.write_text(text, encoding="utf-8")
    with pytest.raises(ConfigError) as info:
        Replay(path=str(trace)).arrivals()
    assert says in str(info.value), str(info.value)


def test_a_trace_in_another_encoding_is_refused_naming_utf8(tmp_path: Path) -> None:
    from gpubench_sdk import Replay

    trace = tmp_path / "latin1.csv"
    trace.write_bytes(b"timestamp,x\n1,caf\xe9\n")
    with pytest.raises(ConfigError, match=r"not UTF-8.*save it as UTF-8"):
        Replay(path=str(trace), fields={"x": "x"}).arrivals()


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> str:
    from _report_store import build_store

    path = tmp_path_factory.mktemp("refusals") / "runs.sqlite"
    build_store(path, days=2)
    return str(path)


# (command line, the flag the one error line must name). The model behind each names the
# same field differently (traffic.rate_per_s, replay.time_column, price_sku, cron...).
FLAGS: list[tuple[list[str], str]] = [
    (["advise", "latest", "--p95-ms", "1e3", "--rate", "-1"], "--rate: got -1.0"),
    (["advise", "latest", "--p95-ms", "1e3", "--rate", "0"], "--rate: got 0.0"),
    (["advise", "latest", "--p95-ms", "1e3", "--rate", "1", "--percentile", "200"],
     "--percentile: got 200.0"),
    (["advise", "latest", "--p95-ms", "1e3", "--rate", "1", "--price", "fast=zz:1"],
     "--price: got 'zz'"),
    (["advise", "latest", "--p95-ms", "1e3", "--trace", "TRACE", "--trace-time-column", "t"],
     "--trace-time-column: got 't'"),
    (["advise", "latest", "--p95-ms", "1e3", "--trace", "BAD_TRACE"],
     "--trace-time-column (row 2)"),
    (["cost", "whatif", "-t", "runpod:A100-80GB", "--rps", "1", "--exec-s", "1", "--cold-s", "1"],
     "--target: got 'runpod:A100-80GB'"),
    (["cost", "whatif", "-t", "zz,rate=1", "--rps", "1", "--exec-s", "1", "--cold-s", "1"],
     "--target: got 'zz'"),
    (["cost", "whatif", "-t", "runpod,rate=1", "--rps", "1", "--exec-s", "1", "--cold-s", "1",
      "--profile", "0,0"], "--profile"),
    (["campaign", "create", "PLAN", "--for", "1d", "--cron", "bogus"], "--cron: got 'bogus'"),
]  # fmt: skip


@pytest.mark.parametrize(("args", "says"), FLAGS, ids=[" ".join(a[:4]) for a, _ in FLAGS])
def test_a_refusal_names_the_flag_the_user_typed(
    args: list[str], says: str, store: str, tmp_path: Path
) -> None:
    trace, bad = tmp_path / "trace.csv", tmp_path / "bad.csv"
    trace.write_text("timestamp\n0.5\n1.5\n")
    bad.write_text("timestamp\nnan\n")
    given = {"TRACE": str(trace), "BAD_TRACE": str(bad), "PLAN": str(EXAMPLES / "campaign.toml")}
    filled = [given.get(a, a) for a in args]
    code, _, stderr = cli(*filled, "--store", store if args[0] != "campaign" else
                          str(tmp_path / "c.sqlite"))  # fmt: skip
    lines = stderr.strip().splitlines()
    assert code == 2 and len(lines) == 1, stderr
    assert says in lines[0], lines[0]


def _mutate(advice: dict[str, Any], path: str, value: Any) -> dict[str, Any]:
    """``advice`` with the value at ``a.b[0].c`` replaced (``...`` as value: removed)."""
    changed = copy.deepcopy(advice)
    *parents, last = [int(p) if p.isdigit() else p for p in re.findall(r"\w+", path)]
    at: Any = changed
    for p in parents:
        at = at[p]
    if value is ...:
        del at[last]
    else:
        at[last] = value
    return changed


ADVICE_FAULTS: list[tuple[str, Any]] = [
    ("options", 5),
    ("options[0]", 5),
    ("options[0].cost_usd_per_day", "x"),
    ("options[0].latency_ms", {}),
    ("options[0].latency_ms.median", "158"),
    ("options[0].label", None),
    ("options[0].frontier", ...),
    ("options[0].p_meets_all", "high"),
    ("recommended", 5),
    ("traffic", []),
    ("objectives", 1),
    ("objectives.latency_ms", True),
]


@pytest.fixture(scope="module")
def advice(store: str) -> dict[str, Any]:
    # the file's shape is what is tested, not the advice: few resamples
    args = ["--p95-ms", "1000", "--rate", "1", "--price", "slow=runpod:0.0004", "--json"]
    args += ["--resamples", "8"]
    code, stdout, stderr = cli("advise", "latest", "--store", store, *args)
    assert code == 0, stderr
    return dict(json.loads(stdout))


@pytest.mark.parametrize(("path", "value"), ADVICE_FAULTS, ids=[p for p, _ in ADVICE_FAULTS])
def test_an_advice_file_of_the_wrong_shape_is_refused_naming_the_field(
    path: str, value: Any, advice: dict[str, Any], store: str, tmp_path: Path
) -> None:
    saved = tmp_path / "advice.json"
    saved.write_text(json.dumps(_mutate(advice, path, value)))
    for out in ("r.html", "r.csv"):
        code, _, stderr = cli("report", "latest", "--store", store, "--advice", str(saved),
                              "-o", str(tmp_path / out))  # fmt: skip
        assert code == 2 and f"in it, {path}" in stderr, stderr
        assert not (tmp_path / out).exists()
    saved.write_text(json.dumps(advice))  # the file as advise wrote it reads
    assert cli("report", "latest", "--store", store, "--advice", str(saved),
               "-o", str(tmp_path / "r.html"))[0] == 0  # fmt: skip
