"""Malformed command lines: each answered by one line naming the argument and the fix, exit 2.

Run in-process (click's runner) so the table stays fast; what it checks is what a person sees:
stderr is a single ``error:`` line, the exit code 2, and no traceback. Malformed *plans* have
their own table (tests/test_config.py); a few end-to-end cases run in subprocesses below.
"""

from __future__ import annotations

import errno
import json
import subprocess
import sys
from pathlib import Path

import pytest
from _invocations import big_run
from _plans import local_plan
from _report_store import build_store
from click.testing import CliRunner

from gpubench_sdk import ConfigError, StoreError
from gpubench_sdk._cli import main
from gpubench_sdk._cli._console import fail

PLAN = local_plan(
    """
[run]
name = "usage"
""",
    "",
    """[[scenarios]]
kind = "burst"
total = 1
concurrency = 1
""",
)


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    base = tmp_path_factory.mktemp("usage")
    store = base / "runs.sqlite"
    build_store(store, days=2)  # runs 1 and 2, targets "fast" and "slow"
    plan = base / "plan.toml"
    plan.write_text(PLAN)
    unknown = base / "unknown.toml"
    unknown.write_text(PLAN.replace('provider = "local"', 'provider = "runpodd"'))
    return {
        "STORE": str(store),
        "PLAN": str(plan),
        "UNKNOWN_PLUGIN": str(unknown),
        "DIR": str(base),
        "MISSING": str(base / "missing.sqlite"),
        "UNDER_FILE": str(plan / "out.html"),
    }


# (command line, what the one line must say). STORE, PLAN... are replaced by real paths.
CASES: list[tuple[list[str], str]] = [
    # gpubench
    (["--bogus"], "No such option '--bogus'"),
    (["nope"], "No such command 'nope'"),
    # run
    (["run"], "Missing argument 'CONFIG'"),
    (["run", "MISSING"], "Invalid value for 'CONFIG': File"),
    (["run", "DIR"], "'CONFIG'"),
    (["run", "PLAN", "--stroe", "x"], "Did you mean '--store'"),
    (["run", "PLAN", "-p", "0"], "'--processes': 0 is not in the range"),
    (["run", "PLAN", "-p", "many"], "'--processes': 'many' is not a valid integer"),
    (["run", "PLAN", "-p", "300"], "'--processes': 300 is not in the range"),
    (["run", "PLAN", "-p"], "Option '-p' requires an argument"),
    (["run", "PLAN", "--quiet=yes"], "Option '--quiet' does not take a value"),
    (["run", "PLAN", "extra"], "unexpected extra argument (extra)"),
    (["run", "PLAN", "--store", "DIR"], "'--store'"),
    (["run", "PLAN", "--fail-on", "p96<1s"], "--fail-on: got 'p96<1s'; expected a metric among"),
    (
        ["run", "PLAN", "--fail-on", "p95>+20%"],
        "needs a baseline, so it belongs to gpubench compare",
    ),
    (["run", "PLAN", "--fail-on", "p95>500"], "a unit for a limit on p95: one of ms, s, m"),
    (["run", "PLAN", "--fail-on", "error_rate>2s"], "a unit for a limit on error_rate: one of %"),
    (["run", "PLAN", "--fail-on", "cost_per_1k_requests>2ms"], "on cost_per_1k: one of $"),
    (["run", "PLAN", "--fail-on", "p95>>1s"], "(operators: < <= > >=)"),
    (["run", "PLAN", "--fail-on", "p95 = 1s"], "(operators: < <= > >=)"),
    (["run", "PLAN", "--fail-on", "p95>"], "a number with a unit after '>', e.g. 500ms"),
    (["run", "PLAN", "--fail-on", ""], "rules separated by single commas"),
    (["run", "PLAN", "--fail-on", "p95>1s,"], "rules separated by single commas"),
    (["run", "PLAN", "--otlp-endpoint", "not a url"], "--otlp-endpoint: got 'not a url'"),
    (["run", "PLAN", "--otlp-endpoint", "localhost:4318"], "e.g. http://localhost:4318"),
    (["run", "PLAN", "--otlp-endpoint", "ftp://collector"], "an http(s) URL"),
    (["run", "PLAN", "--otlp-endpoint", "http://"], "an http(s) URL"),
    (["run", "PLAN", "--prometheus-port", "abc"], "--prometheus-port: got 'abc'"),
    (["run", "PLAN", "--prometheus-port", "70000"], "a port (9464) or HOST:PORT"),
    (["run", "PLAN", "--prometheus-port", "9464", "-p", "2"], "a single process (-p 1)"),
    (["run", "UNKNOWN_PLUGIN", "--store", "MISSING"], "pip install gpubench-runpodd"),
    # demo
    (["demo", "--otlp-endpoint", "collector"], "--otlp-endpoint: got 'collector'"),
    (["demo", "--bogus"], "No such option '--bogus'"),
    # results
    (["results", "nope"], "No such command 'nope'"),
    (["results", "list", "--store", "MISSING"], "--store: got"),
    (["results", "list", "--json=1"], "Option '--json' does not take a value"),
    (["results", "show", "99", "--store", "STORE"], "no run '99'; see the stored runs with"),
    (["results", "show", "--store", "MISSING"], "an existing results store"),
    (["results", "export", "--format", "xml"], "'xml' is not one of 'jsonl', 'csv', 'parquet'"),
    (["results", "export", "--format", "parquet", "--store", "STORE"], "a file for Parquet"),
    (["results", "export", "-o", "DIR", "--store", "STORE"], "'-o' / '--output'"),
    (["results", "export", "-o", "UNDER_FILE", "--store", "STORE"], "is a regular file"),
    (["results", "compare", "fast"], "Missing argument 'TARGET_B'"),
    (["results", "compare", "fast", "zz", "--store", "STORE"], "TARGET_B: got 'zz'"),
    (["results", "compare", "fast", "slow", "--scenario", "x"], "'--scenario': 'x' is not"),
    (["results", "compare", "fast", "slow", "--scenario", "9", "--store", "STORE"], "--scenario"),
    # report
    (["report"], "Missing option '-o' / '--output'"),
    (["report", "-o", "r.html", "--store", "STORE"], "or --campaign NAME"),
    (["report", "latest", "--store", "STORE"], "Missing option '-o' / '--output'"),
    (["report", "latest", "-o", "UNDER_FILE", "--store", "STORE"], "is a regular file"),
    (["report", "latest", "-o", "DIR/none/r.html", "--store", "STORE"], "mkdir -p"),
    (["report", "latest", "-o", "r.html", "--format", "pdf"], "'pdf' is not one of"),
    (["report", "latest", "-o", "r.html", "--store", "MISSING"], "--store: got"),
    (["report", "99", "-o", "DIR/r.html", "--store", "STORE"], "no run '99'"),
    # compare
    (["compare", "--fail-on", "p95>+20%"], "Missing option '--baseline'"),
    (["compare", "--baseline", "1"], "Missing option '--fail-on'"),
    (["compare", "--baseline", "1", "--fail-on", "p95>+20kg"], "a unit for p95: one of %, ms, s"),
    (["compare", "--baseline", "1", "--fail-on", "p95>=+20%"], "p95>CHANGE or p95<CHANGE"),
    (["compare", "--baseline", "99", "--fail-on", "p95>+20%", "--store", "STORE"], "--baseline"),
    (
        [
            "compare",
            "--baseline",
            "1",
            "--candidate",
            "1",
            "--fail-on",
            "p95>+2%",
            "--store",
            "STORE",
        ],
        "--candidate: got '1'; expected other runs than the baseline's",
    ),
    (["compare", "--baseline", "1", "--fail-on", "p95>+2%", "--scenario", "-1"], "--scenario"),
    (
        [
            "compare",
            "--baseline",
            "1",
            "--fail-on",
            "p95>+2%",
            "--target",
            "zz",
            "--store",
            "STORE",
        ],
        "--target: got 'zz'",
    ),
    # cost
    (["cost", "scenario", "-t", "runpod"], "--target"),
    (["cost", "scenario", "--requests", "-5"], "'--requests': -5 is not in the range"),
    (["cost", "scenario", "--prices", "MISSING"], "'--prices'"),
    (["cost", "whatif", "-t", "runpod:A100 80GB", "--exec-s", "1", "--cold-s", "1"], "--rps"),
    (
        [
            "cost",
            "whatif",
            "-t",
            "runpod:A100 80GB",
            "--exec-s",
            "1",
            "--cold-s",
            "1",
            "--rps",
            "1",
            "--profile",
            "a,b",
        ],
        "--profile: got 'a,b'; expected comma-separated numbers",
    ),
    (["cost", "run", "--price", "nonsense", "--store", "STORE"], "TARGET=provider[:SKU]"),
    # campaign
    (["campaign", "create", "PLAN"], "Missing option '--for'"),
    (["campaign", "create", "PLAN", "--for", "5x", "--every", "1h", "--store", "MISSING"], "--for"),
    (
        ["campaign", "create", "PLAN", "--for", "1d", "--every", "1h", "--start", "yesterday"],
        "--start: got 'yesterday'; expected \"now\" or an ISO 8601 time",
    ),
    (["campaign", "status", "--store", "MISSING"], "--store: got"),
    # local
    (["local", "serve", "--port", "70000"], "'--port': 70000 is not in the range"),
    (["local", "serve", "--min-workers", "3", "--max-workers", "1"], "--max-workers: got 1"),
    (["local", "serve", "--api-key-env", "GPUBENCH_TEST_NEVER_SET"], "--api-key-env: got"),
]


def _fill(args: list[str], files: dict[str, str]) -> list[str]:
    out = []
    for a in args:
        for key, path in sorted(files.items(), key=lambda kv: -len(kv[0])):
            if a == key or a.startswith(key + "/"):
                a = path + a[len(key) :]
                break
        out.append(a)
    return out


def test_the_table_is_large_enough() -> None:
    assert len(CASES) >= 40


@pytest.mark.parametrize(("args", "says"), CASES, ids=[" ".join(a) for a, _ in CASES])
def test_malformed_command_line(
    args: list[str],
    says: str,
    files: dict[str, str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.chdir(tmp_path)  # a relative -o lands here, never in the repository
    monkeypatch.delenv("GPUBENCH_STORE", raising=False)
    result = CliRunner().invoke(main, _fill(args, files))
    lines = result.stderr.strip().splitlines()
    assert result.exit_code == 2, (result.exit_code, result.output, repr(result.exception))
    assert isinstance(result.exception, SystemExit)  # handled, not raised through
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    assert says in lines[0], lines[0]
    assert "Traceback" not in result.output and "internal error" not in result.output


def gpubench(*args: str, **kw: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "gpubench_sdk", *args],
        capture_output=True, text=True, timeout=120, **kw,  # type: ignore[call-overload]
    )  # fmt: skip


def test_help_lists_the_exit_codes() -> None:
    for args in ([], ["run"], ["compare"]):
        shown = gpubench(*args, "--help")
        assert shown.returncode == 0
        text = " ".join(shown.stdout.split())
        assert "0 every threshold held" in text and "130 interrupted" in text, args
        assert "2 configuration or usage error" in text
    assert "95%%" not in gpubench("compare", "--help").stdout


def test_a_closed_pipe_ends_quietly(tmp_path: Path) -> None:
    """`gpubench results export | head -1`: the reader leaves early; no traceback, exit 0."""
    store = tmp_path / "big.sqlite"
    big_run(store, 5_000)  # ~2 MB of JSON lines
    for fmt in ("jsonl", "csv"):
        proc = subprocess.Popen(
            [sys.executable, "-m", "gpubench_sdk", "results", "export", "--format", fmt,
             "--store", str(store)],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        )  # fmt: skip
        assert proc.stdout is not None and proc.stderr is not None
        assert proc.stdout.readline()
        proc.stdout.close()  # as head -1 does after its line
        assert proc.wait(60) == 0
        assert proc.stderr.read() == b""
    whole = gpubench("results", "export", "--store", str(store))
    assert len(whole.stdout.splitlines()) == 5_000  # the same command, read to the end


def test_store_rule_run_then_results(tmp_path: Path) -> None:
    """$GPUBENCH_STORE wins over the plan's run.output, and results finds the run there."""
    plan = tmp_path / "p.toml"
    plan.write_text(PLAN.replace('name = "usage"', 'name = "usage"\noutput = "plan.sqlite"'))
    env = {"GPUBENCH_STORE": str(tmp_path / "env.sqlite"), "PATH": "/usr/bin:/bin"}
    done = gpubench("run", str(plan), "--quiet", env=env, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert not (tmp_path / "plan.sqlite").exists()
    listed = gpubench("results", "list", "--json", env=env, cwd=tmp_path)
    assert [r["name"] for r in json.loads(listed.stdout)] == ["usage"]
    legacy = gpubench("run", str(plan), "--quiet", "-o", "old.sqlite", env=env, cwd=tmp_path)
    assert legacy.returncode == 0 and "deprecated: use --store" in legacy.stderr
    assert (tmp_path / "old.sqlite").exists()


def test_store_rule_env_and_results_list_json(tmp_path: Path) -> None:
    """One rule for every command: --store, else $GPUBENCH_STORE, else gpubench.sqlite."""
    store = tmp_path / "env.sqlite"
    build_store(store, days=2)
    env = {"GPUBENCH_STORE": str(store), "PATH": "/usr/bin:/bin"}
    listed = gpubench("results", "list", "--json", env=env, cwd=tmp_path)
    assert listed.returncode == 0, listed.stderr
    runs = json.loads(listed.stdout)
    assert [r["id"] for r in runs] == [2, 1] and runs[0]["samples"] > 0
    default = gpubench("results", "list", cwd=tmp_path, env={"PATH": "/usr/bin:/bin"})
    assert default.returncode == 2 and "gpubench.sqlite" in default.stderr
    (tmp_path / "gpubench.sqlite").write_bytes(store.read_bytes())
    found = gpubench("results", "list", "--json", cwd=tmp_path, env={"PATH": "/usr/bin:/bin"})
    assert len(json.loads(found.stdout)) == 2


@pytest.mark.parametrize(
    ("exc", "code", "says"),
    [
        (ExceptionGroup("unhandled errors in a TaskGroup", [ConfigError("f", 1, "a fix")]), 2,
         "error: f: got 1; expected a fix"),
        (BaseExceptionGroup("outer", [ExceptionGroup("inner", [StoreError("disk full")])]), 2,
         "error: disk full"),
        (OSError(errno.EMFILE, "Too many open files"), 2, "the open-files limit is"),
        (NotADirectoryError(errno.ENOTDIR, "Not a directory", "a.txt/r.html"), 2,
         "error: a.txt/r.html: Not a directory"),
        (RuntimeError("a bug"), 1, "internal error: RuntimeError: a bug"),
    ],
)  # fmt: skip
def test_causes_we_can_name_are_named(
    exc: BaseException, code: int, says: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """A lone error inside task groups is shown as itself; never 'ExceptionGroup' for it."""
    with pytest.raises(SystemExit) as info:
        fail(exc)
    said = capsys.readouterr().err
    assert info.value.code == code and says in said and len(said.strip().splitlines()) == 1
    assert "ExceptionGroup" not in said and "TaskGroup" not in said
