"""Exhausted resources: a plan whose concurrency cannot fit the open-files limit is refused up
front with the limit and the fix named; one just under it runs and stores every request; the
store's file is open before the first socket; a cause we can name never surfaces as an
ExceptionGroup or an "internal error"."""

from __future__ import annotations

import asyncio
import errno
import subprocess
import sys
from pathlib import Path

import pytest
from aiohttp import web
from conftest import LoopbackServer

from gpubench_sdk import Burst, ConfigError, EchoProbe, Outcome, Provider, Request, Result, Store
from gpubench_sdk._base._errors import ResourceError
from gpubench_sdk._runner._multiproc import run_blocking
from gpubench_sdk._runner._resources import DESCRIPTOR_MARGIN, descriptors_needed, out_of_files
from gpubench_sdk._runner._runner import Runner

resource = pytest.importorskip("resource")  # POSIX

LIMIT = 256  # open files allowed to the benchmark process below
FITS = LIMIT - DESCRIPTOR_MARGIN  # the most requests in flight a plan may ask for under it

PLAN = """
[workload]
kind = "probe"

[[targets]]
name = "slow"
provider = "http"
url = "{url}/work"
auth_scheme = "none"

[[scenarios]]
{scenario}
"""
BURST = """kind = "burst"
total = {total}
concurrency = {concurrency}"""
RATE = """kind = "rate"
rps = 1000
duration_s = 0.5
{extra}"""


async def _slow(request: web.Request) -> web.Response:
    await asyncio.sleep(0.3)  # long enough that every slot of the burst is in flight at once
    return web.json_response(await request.json())


def _limited(n: int) -> None:
    resource.setrlimit(resource.RLIMIT_NOFILE, (n, n))


def _run(plan: Path, url: str, scenario: str, store: Path) -> subprocess.CompletedProcess[str]:
    """``gpubench run`` of PLAN with ``scenario``, against ``url``, under the open-files LIMIT."""
    plan.write_text(PLAN.format(url=url, scenario=scenario))
    return subprocess.run(
        [sys.executable, "-m", "gpubench_sdk", "run", str(plan), "--store", str(store), "--quiet"],
        capture_output=True, text=True, timeout=180, preexec_fn=lambda: _limited(LIMIT),
    )  # fmt: skip


def _burst(tmp_path: Path, url: str, concurrency: int) -> subprocess.CompletedProcess[str]:
    burst = BURST.format(total=2 * concurrency, concurrency=concurrency)
    return _run(tmp_path / f"c{concurrency}.toml", url, burst, tmp_path / "s.sqlite")


@pytest.mark.skipif(resource.getrlimit(resource.RLIMIT_NOFILE)[1] < 1024, reason="low hard limit")
def test_a_plan_above_the_open_files_limit_is_refused_and_one_under_it_runs(
    tmp_path: Path,
) -> None:
    app = web.Application()
    app.router.add_post("/work", _slow)
    with LoopbackServer(app) as server:
        refused = _burst(tmp_path, server.url, FITS + 1)
        ran = _burst(tmp_path, server.url, FITS)
    lines = [line for line in refused.stderr.splitlines() if line.strip()]
    assert refused.returncode == 2 and len(lines) == 1, refused.stderr
    assert "scenarios[0].burst.concurrency" in lines[0] and f"may open {LIMIT}" in lines[0]
    assert "ulimit -n" in lines[0] and f"concurrency <= {FITS}" in lines[0]
    assert "Traceback" not in refused.stderr and "internal error" not in refused.stderr
    assert ran.returncode == 0, ran.stderr
    with Store(tmp_path / "s.sqlite", readonly=True) as store:
        (run,) = store.runs()  # the refused plan recorded nothing
        invs = store.invocations(run.id)
    assert len(invs) == 2 * FITS and all(i.outcome is Outcome.OK for i in invs)


@pytest.mark.skipif(resource.getrlimit(resource.RLIMIT_NOFILE)[1] < 1024, reason="low hard limit")
def test_a_rate_without_max_inflight_fits_itself_to_the_limit(tmp_path: Path) -> None:
    """Open loop: ~300 requests would be in flight (1,000/s x 0.3 s), more than 256 files hold.
    Unset, max_inflight is lowered to fit (the schedule waits, counted in latency); set above
    the limit, it is refused like a burst's concurrency."""
    app = web.Application()
    app.router.add_post("/work", _slow)
    runs = {}
    with LoopbackServer(app) as server:
        for name, extra in (("adapts", ""), ("explicit", "max_inflight = 300")):
            plan, store = tmp_path / f"{name}.toml", tmp_path / f"{name}.sqlite"
            runs[name] = _run(plan, server.url, RATE.format(extra=extra), store)
    assert runs["adapts"].returncode == 0, runs["adapts"].stderr
    assert f"at most {FITS} requests in flight" in runs["adapts"].stderr
    with Store(tmp_path / "adapts.sqlite", readonly=True) as store:
        invs = store.invocations(store.run("latest").id)
    assert len(invs) == 500 and all(i.outcome is Outcome.OK for i in invs)
    events = sorted([(i.start_ns, 1) for i in invs] + [(i.end_ns, -1) for i in invs])
    peak, now = 0, 0
    for _, step in events:
        now += step
        peak = max(peak, now)
    assert FITS // 2 < peak <= FITS  # the cap was reached, never passed
    refused = runs["explicit"]
    assert refused.returncode == 2 and "scenarios[0].rate.max_inflight" in refused.stderr
    assert "ulimit -n" in refused.stderr


def test_descriptors_needed_counts_every_target_and_shard() -> None:
    burst = Burst(total=1000, concurrency=100)
    assert descriptors_needed([burst], targets=3) == 300 + DESCRIPTOR_MARGIN
    assert descriptors_needed([burst], targets=3, shards=4) == 75 + DESCRIPTOR_MARGIN
    assert descriptors_needed([Burst(total=5, concurrency=100)], targets=1) == 5 + DESCRIPTOR_MARGIN


class _Ok(Provider):
    name = "ok"

    async def invoke(self, request: Request) -> Result:
        return Result(output={"echo": request.payload["echo"]})


def test_the_check_runs_before_anything_is_stored(tmp_path: Path) -> None:
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    if hard == resource.RLIM_INFINITY or hard >= 900_000:
        pytest.skip("the hard limit here would hold the plan")
    runner = Runner(
        {"a": _Ok()}, EchoProbe(), [Burst(1_000_000, 1_000_000)], store=tmp_path / "s.sqlite"
    )
    with pytest.raises(ConfigError, match=r"ulimit -n") as info:
        run_blocking(runner)
    assert info.value.field == "scenarios[0].burst.concurrency"
    with Store(tmp_path / "s.sqlite", readonly=True) as store:
        assert store.runs() == []


def test_the_store_is_open_before_the_first_request(tmp_path: Path) -> None:
    seen: list[bool] = []

    class Checks(_Ok):
        async def invoke(self, request: Request) -> Result:
            seen.append(runner.store._writer_ready.is_set())
            return await super().invoke(request)

    runner = Runner({"a": Checks()}, EchoProbe(), [Burst(3, 1)], store=tmp_path / "s.sqlite")
    run_blocking(runner)
    assert seen == [True, True, True]


def test_running_out_of_files_is_named_not_a_group() -> None:
    exhausted = OSError(errno.EMFILE, "Too many open files")
    group = BaseExceptionGroup("unhandled errors in a TaskGroup", [ValueError("x"), exhausted])
    found = out_of_files(group)
    assert isinstance(found, ResourceError)
    assert "open files" in str(found) and "ulimit -n" in str(found)
    assert out_of_files(BaseExceptionGroup("g", [ValueError("x")])) is None
