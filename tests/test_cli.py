"""The CLI end to end, in subprocesses, against the real local runtime."""

from __future__ import annotations

import contextlib
import json
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from _plans import local_plan

from gpubench_sdk import Outcome, Store

PLAN = local_plan(
    """
[run]
name = "cli-test"

[workload]
kind = "probe"
sleep_ms = 5
""",
    """max_workers = 2
idle_timeout_s = 2.0
""",
    """[[scenarios]]
kind = "cold_starts"
n = 1
warm_after = 1

[[scenarios]]
kind = "burst"
total = {total}
concurrency = 2
""",
)


def gpubench(*args: str, timeout: float = 120, **kw: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "gpubench_sdk", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        **kw,  # type: ignore[call-overload]
    )


def run_example(script: str, *args: str) -> subprocess.CompletedProcess[str]:
    """Run one of examples/ as a user would: a fresh interpreter, the script's own arguments."""
    path = Path(__file__).parents[1] / "examples" / script
    return subprocess.run(
        [sys.executable, str(path), *args], capture_output=True, text=True, timeout=180
    )


def _local_runtimes() -> set[int]:
    """PIDs of local runtime processes started by spawn_runtime (read from /proc)."""
    pids = set()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                cmdline = (entry / "cmdline").read_bytes()
            except OSError:
                continue
            if b"serve-json" in cmdline or b"_local/_worker.py" in cmdline:
                pids.add(int(entry.name))
    return pids


def _wait_for_samples(store: Path, at_least: int, timeout_s: float = 60) -> int:
    """Poll a run's store from outside until it has committed ``at_least`` samples."""
    seen = 0
    deadline = time.monotonic() + timeout_s
    while seen < at_least and time.monotonic() < deadline:
        time.sleep(0.3)
        if store.exists():
            with sqlite3.connect(store) as db, contextlib.suppress(sqlite3.OperationalError):
                seen = db.execute("select count(*) from invocations").fetchone()[0]
    return seen


@pytest.fixture
def plan(tmp_path: Path) -> Path:
    p = tmp_path / "plan.toml"
    p.write_text(PLAN.format(total=20))
    return p


def test_run_show_export(plan: Path, tmp_path: Path) -> None:
    store = tmp_path / "out.sqlite"
    proc = gpubench("run", str(plan), "--store", str(store), "--quiet")
    assert proc.returncode == 0, proc.stderr
    assert "cli-test" in proc.stdout and "0:cold_starts" in proc.stdout and "1:burst" in proc.stdout
    with Store(store) as s:
        (run,) = s.runs()
        invs = s.invocations(run.id)
    assert run.status == "completed"
    assert len(invs) == 22 and all(i.outcome is Outcome.OK for i in invs)
    cold = [i for i in invs if i.scenario == 0 and i.cold]
    assert len(cold) == 1 and cold[0].cold_confirmed

    show = gpubench("results", "show", "latest", "--store", str(store), "--json")
    assert show.returncode == 0, show.stderr
    summary = json.loads(show.stdout)["summary"]
    assert {r["scenario"] for r in summary} == {"0:cold_starts", "1:burst"}

    export = gpubench("results", "export", str(run.id), "--store", str(store), "--format", "jsonl")
    rows = [json.loads(line) for line in export.stdout.splitlines()]
    assert len(rows) == 22 and rows[0]["target"] == "loc"

    listing = gpubench("results", "list", "--store", str(store))
    assert "cli-test" in listing.stdout


def test_bad_config_exits_2_naming_the_field(tmp_path: Path) -> None:
    p = tmp_path / "bad.toml"
    p.write_text(PLAN.format(total=0))
    proc = gpubench("run", str(p), "--store", str(tmp_path / "x.sqlite"))
    assert proc.returncode == 2
    assert "scenarios[1].burst.total: got 0" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_unknown_provider_exits_with_install_hint(tmp_path: Path) -> None:
    p = tmp_path / "p.toml"
    p.write_text(PLAN.format(total=1).replace('provider = "local"', 'provider = "runpodd"'))
    proc = gpubench("run", str(p), "--store", str(tmp_path / "x.sqlite"))
    assert proc.returncode == 2  # a configuration error, like any other the plan has
    assert "pip install gpubench-runpodd" in proc.stderr


def test_providers_lists_local_with_capabilities() -> None:
    proc = gpubench("providers")
    assert proc.returncode == 0
    assert "local" in proc.stdout and "cold_start_control" in proc.stdout


def test_ctrl_c_keeps_what_was_measured(tmp_path: Path) -> None:
    p = tmp_path / "long.toml"
    p.write_text(PLAN.format(total=100_000))
    store = tmp_path / "long.sqlite"
    proc = subprocess.Popen(
        [sys.executable, "-m", "gpubench_sdk", "run", str(p), "--store", str(store), "--quiet"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert _wait_for_samples(store, 50) >= 50  # the burst is under way
    proc.send_signal(signal.SIGINT)
    stdout, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 130, stderr  # interrupted: partial results kept, and said so
    assert "cancelled" in stdout
    assert f"kept in {store}" in stderr and "(run 1," in stderr and "Traceback" not in stderr
    with Store(store) as s:
        (run,) = s.runs()
        invs = s.invocations(run.id)
    assert run.status == "cancelled"
    assert len([i for i in invs if i.outcome is Outcome.OK]) > 50
    assert all(i.outcome in (Outcome.OK, Outcome.CANCELLED) for i in invs)


def test_examples_quickstart_script_runs(tmp_path: Path) -> None:
    proc = run_example("quickstart.py", str(tmp_path / "q.sqlite"))
    assert proc.returncode == 0, proc.stderr
    assert "0:cold_starts" in proc.stdout and "1:burst" in proc.stdout


@pytest.mark.slow
def test_demo_runs_the_quickstart(tmp_path: Path) -> None:
    proc = gpubench(
        "demo", "--store", str(tmp_path / "demo.sqlite"), "--quiet", timeout=300, cwd=tmp_path
    )
    assert proc.returncode == 0, proc.stderr
    for part in ("0:cold_starts", "1:burst", "2:rate", "p95 ms", "cold start p50 ms"):
        assert part in proc.stdout
    with Store(tmp_path / "demo.sqlite") as s:
        (run,) = s.runs()
        invs = s.invocations(run.id)
    assert run.status == "completed"
    per_scenario = [sum(1 for i in invs if i.scenario == k) for k in range(3)]
    assert per_scenario[0] == 3 * (1 + 2)  # 3 cold samples, 2 warm after each
    assert per_scenario[1] == 200
    assert 150 < per_scenario[2] < 250  # Poisson at 20/s for 10 s, seeded
    cold = [i for i in invs if i.scenario == 0 and i.cold]
    assert len(cold) == 3 and all(i.cold_confirmed for i in cold)
    assert "estimated bill" in proc.stdout  # the plan's notional price
    # ... which makes the demo's run the input of the next question (docs/quickstart.md)
    advice = gpubench("advise", "latest", "--store", str(tmp_path / "demo.sqlite"), "--rate",
                      "1", "--p95-ms", "500", timeout=120, cwd=tmp_path)  # fmt: skip
    assert advice.returncode == 0, advice.stderr
    assert "Recommendation: local-demo" in advice.stdout and "/day" in advice.stdout


def test_examples_own_handler_profiles_a_cold_start(tmp_path: Path) -> None:
    proc = run_example("own_handler.py", str(tmp_path / "o.sqlite"))
    assert proc.returncode == 0, proc.stderr
    boots = proc.stdout.splitlines()[0].split(": ")[1].split(", ")
    assert len(boots) == 3 and all(float(b) > 0 for b in boots)
    with Store(tmp_path / "o.sqlite") as s:
        (run,) = s.runs()
        invs = s.invocations(run.id)
    assert all(i.outcome is Outcome.OK for i in invs) and len(invs) == 12
    assert [i.cold for i in sorted(invs, key=lambda i: i.seq)][:4] == [True, False, False, False]


def test_sigkill_keeps_committed_samples_and_a_sound_database(tmp_path: Path) -> None:
    p = tmp_path / "long.toml"
    p.write_text(PLAN.format(total=100_000))
    store = tmp_path / "killed.sqlite"
    runtimes_before = _local_runtimes()
    proc = subprocess.Popen(
        [sys.executable, "-m", "gpubench_sdk", "run", str(p), "--store", str(store), "--quiet"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    seen = _wait_for_samples(store, 300)
    assert seen >= 300
    proc.kill()  # SIGKILL: no handler runs, nothing is flushed on the way out
    proc.wait(10)
    deadline = time.monotonic() + 15
    while _local_runtimes() - runtimes_before and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not _local_runtimes() - runtimes_before  # its runtime (and workers) did not outlive it
    with sqlite3.connect(store) as db:
        assert db.execute("pragma integrity_check").fetchone()[0] == "ok"
    with Store(store) as s:
        (run,) = s.runs()
        invs = s.invocations(run.id)
    assert run.status == "interrupted"  # stored as running; its process is gone
    assert len(invs) >= seen  # everything committed before the kill is still there
    assert all(i.outcome is Outcome.OK for i in invs)


@contextlib.contextmanager
def local_serve(max_workers: int) -> Iterator[tuple[str, subprocess.Popen[str]]]:
    """`gpubench local serve` on a free port, stopped with Ctrl-C (SIGINT) afterwards."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "gpubench_sdk", "local", "serve", "--port", "0",
         "--handler", "gpubench_sdk.demo:echo", "--max-workers", str(max_workers)],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
    )  # fmt: skip
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert line.startswith("gpubench local runtime listening on http://127.0.0.1:")
        yield line.split()[-1], proc
    finally:
        proc.send_signal(signal.SIGINT)
        proc.wait(20)


def test_local_serve_runs_standalone() -> None:
    import urllib.request

    with local_serve(max_workers=1) as (url, proc):
        health = json.loads(urllib.request.urlopen(f"{url}/health", timeout=10).read())
        assert health["scaling"]["max_workers"] == 1
        body = json.dumps({"sleep_ms": 0, "echo": "hi"}).encode()
        req = urllib.request.Request(f"{url}/invoke", data=body, method="POST")
        answer = json.loads(urllib.request.urlopen(req, timeout=30).read())
        assert answer["output"]["echo"] == "hi" and answer["cold"] is True
    assert proc.returncode == 0


def test_run_with_two_processes_against_a_shared_runtime(tmp_path: Path) -> None:
    store = tmp_path / "p2.sqlite"
    with local_serve(max_workers=2) as (url, _):
        plan = tmp_path / "p.toml"
        with_url = f'provider = "local"\nurl = "{url}"'
        plan.write_text(PLAN.format(total=60).replace('provider = "local"', with_url))
        proc = gpubench("run", str(plan), "--store", str(store), "-p", "2", "--quiet")
        assert proc.returncode == 0, proc.stderr
    with Store(store) as s:
        (run,) = s.runs()
        invs = s.invocations(run.id)
    assert run.status == "completed"
    assert sorted(i.seq for i in invs if i.scenario == 1) == list(range(60))
    assert len([i for i in invs if i.scenario == 0]) == 2  # one cold, one warm, sent once


def test_two_processes_need_a_shared_local_runtime(plan: Path, tmp_path: Path) -> None:
    proc = gpubench("run", str(plan), "--store", str(tmp_path / "x.sqlite"), "-p", "2")
    assert proc.returncode == 2
    assert "targets[0].url" in proc.stderr and "gpubench local serve" in proc.stderr


def test_named_scenario_labels_summary_rows(tmp_path: Path) -> None:
    """A scenario the plan names is shown by its name; an unnamed one by its kind."""
    plan = tmp_path / "plan.toml"
    plan.write_text(
        PLAN.format(total=4).replace('kind = "burst"\n', 'kind = "burst"\nname = "spike"\n')
    )
    store = tmp_path / "out.sqlite"
    proc = gpubench("run", str(plan), "--store", str(store), "--quiet")
    assert proc.returncode == 0, proc.stderr
    assert "0:cold_starts" in proc.stdout and "1:spike" in proc.stdout
    show = gpubench("results", "show", "latest", "--store", str(store), "--json")
    assert {r["scenario"] for r in json.loads(show.stdout)["summary"]} == {
        "0:cold_starts",
        "1:spike",
    }
