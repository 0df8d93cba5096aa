"""Multi-process load generation: one run, several processes, merged exactly in the store."""

from __future__ import annotations

import functools
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from aiohttp import web
from conftest import EchoProvider, LoopbackServer

from gpubench_sdk import Burst, ColdStarts, EchoProbe, Outcome, Phase, Rate, Runner, Store
from gpubench_sdk._runner._multiproc import run_processes


def build(url: str, store: str) -> Runner:
    """Module level, so spawned processes can unpickle it."""
    return Runner(
        {"a": EchoProvider(url=url), "b": EchoProvider(url=url)},
        EchoProbe(sleep_ms=2),
        [Burst(total=101, concurrency=6, warmup=3), Rate(rps=80, duration_s=1.0)],
        store=store,
        name="two-procs",
    )


def test_two_processes_share_one_run(external_server: str, tmp_path: Path) -> None:
    store = str(tmp_path / "mp.sqlite")
    progress: list[int] = []
    result = run_processes(
        functools.partial(build, external_server, store), 2, on_progress=progress.append
    )
    assert result.status == "completed"
    with Store(store) as s:
        (run,) = s.runs()
        invs = s.invocations(run.id)
    assert run.id == result.run_id and run.status == "completed"
    assert all(i.outcome is Outcome.OK for i in invs)
    for target in ("a", "b"):
        burst = [
            i.seq
            for i in invs
            if i.target == target and i.scenario == 0 and i.phase is Phase.MEASURE
        ]
        warm = [
            i.seq
            for i in invs
            if i.target == target and i.scenario == 0 and i.phase is Phase.WARMUP
        ]
        rate = [i.seq for i in invs if i.target == target and i.scenario == 1]
        assert sorted(burst) == list(range(101))  # every request exactly once across processes
        assert sorted(warm) == [-3, -2, -1]
        assert sorted(rate) == list(range(80))
    assert result.requests == len(invs) == 2 * (101 + 3 + 80)
    assert progress and max(progress) <= len(invs)
    assert len(result.health) >= 2  # both processes' monitors wrote their windows


def build_small(url: str, store: str) -> Runner:
    return Runner(
        {"a": EchoProvider(url=url)},
        EchoProbe(sleep_ms=1),
        [ColdStarts(2, idle_gap_s=0.3, warm_after=1), Burst(total=10, concurrency=1)],
        store=store,
    )


def test_fewer_slots_than_processes_and_scenarios_in_step(
    external_server: str, tmp_path: Path
) -> None:
    store = str(tmp_path / "mp.sqlite")
    result = run_processes(functools.partial(build_small, external_server, store), 3)
    assert result.status == "completed"
    with Store(store) as s:
        invs = s.invocations(result.run_id)
    cold = [i for i in invs if i.scenario == 0]
    burst = [i for i in invs if i.scenario == 1]
    assert sorted(i.seq for i in cold) == [0, 1, 2, 3]  # sent once, by the first process
    assert sorted(i.seq for i in burst) == list(range(10))  # concurrency 1: one process sends all
    # the processes meet between scenarios: no burst request overlaps the cold starts
    assert min(i.start_ns for i in burst) >= max(i.end_ns for i in cold)


def build_long(url: str, store: str) -> Runner:
    return Runner(
        {"a": EchoProvider(url=url)}, EchoProbe(sleep_ms=2), [Burst(10**6, 4)], store=store
    )


def test_ctrl_c_stops_every_process_and_the_run_reads_cancelled(
    external_server: str, tmp_path: Path
) -> None:
    store = str(tmp_path / "mp.sqlite")
    script = tmp_path / "stop.py"
    tests_dir = str(Path(__file__).parent)
    script.write_text(
        "import functools, sys\n"
        f"sys.path.insert(0, {tests_dir!r})\n"
        "from test_multiproc import build_long\n"
        "from gpubench_sdk._runner._multiproc import run_processes\n"
        "if __name__ == '__main__':  # spawned processes re-import this file\n"
        f"    build = functools.partial(build_long, {external_server!r}, {store!r})\n"
        "    print(run_processes(build, 2).status, flush=True)\n"
    )
    proc = subprocess.Popen(
        [sys.executable, str(script)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # its own process group, as a terminal would make it
    )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        time.sleep(0.3)
        if Path(store).exists():
            with Store(store, readonly=True) as s:
                runs = s.runs()
                if runs and runs[0].samples > 200:
                    break
    os.killpg(proc.pid, signal.SIGINT)  # Ctrl-C reaches the whole group
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    assert out.strip() == "cancelled"
    with Store(store) as s:
        (run,) = s.runs()
        invs = s.invocations(run.id)
    assert run.status == "cancelled" and len(invs) > 200
    assert {i.outcome for i in invs} <= {Outcome.OK, Outcome.CANCELLED}


def build_budget(url: str, store: str) -> Runner:
    return Runner(
        {"a": EchoProvider(url=url)},
        EchoProbe(),
        [Burst(total=50, concurrency=1)],
        store=store,
        max_requests=10,
    )


def test_max_requests_is_one_budget_across_processes(external_server: str, tmp_path: Path) -> None:
    store = str(tmp_path / "mp.sqlite")
    result = run_processes(functools.partial(build_budget, external_server, store), 4)
    assert result.status == "completed"
    with Store(store) as s:
        invs = s.invocations(result.run_id)
    assert len(invs) == 10 and all(i.outcome is Outcome.OK for i in invs)


def _header_checking_app() -> web.Application:
    async def invoke(request: web.Request) -> web.Response:
        if request.headers.get("X-Authentication") != "s3cret-token-4711":
            return web.json_response({"error": "bad credential"}, status=401)
        body = await request.json()
        return web.json_response({"echo": body.get("echo")})

    app = web.Application()
    app.router.add_post("/invoke", invoke)
    return app


def test_cli_processes_send_the_headers_as_written(tmp_path: Path) -> None:
    """Each process gets the plan as written: the stored copy masks header values, and a
    process built from it would send '***' (every request a 401)."""
    plan = tmp_path / "p.toml"
    store = tmp_path / "s.sqlite"
    with LoopbackServer(_header_checking_app()) as server:
        plan.write_text(
            f'[[targets]]\nname = "h"\nprovider = "http"\nurl = "{server.url}/invoke"\n'
            'headers = {"X-Authentication" = "s3cret-token-4711"}\n'
            '[[scenarios]]\nkind = "burst"\ntotal = 8\nconcurrency = 2\n'
        )
        done = subprocess.run(
            [sys.executable, "-m", "gpubench_sdk", "run", str(plan), "--store", str(store),
             "--processes", "2", "--quiet"],
            capture_output=True, text=True, timeout=180,
        )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert "s3cret-token-4711" not in done.stdout + done.stderr
    with Store(store, readonly=True) as s:
        (run,) = s.runs()
        invs = s.invocations(run.id)
    assert len(invs) == 8 and all(i.outcome is Outcome.OK for i in invs)
    assert b"s3cret-token-4711" not in store.read_bytes()
