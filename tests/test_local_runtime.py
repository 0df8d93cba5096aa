"""The local serverless runtime, end to end: real worker processes, real sockets on loopback."""

from __future__ import annotations

import asyncio
import io
import json
import logging
import os
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from pydantic import SecretStr, ValidationError

from gpubench_sdk._base._errors import (
    ClientHTTPError,
    ColdTimeoutError,
    ConfigError,
    ServerHTTPError,
    ThrottledError,
)
from gpubench_sdk._base._types import Request, ScalingSettings
from gpubench_sdk._contract._workload import EchoProbe, ImageGeneration, LLMCompletion
from gpubench_sdk._local._config import LocalRuntimeConfig
from gpubench_sdk._local._gateway import LISTENING_LINE, LocalRuntime
from gpubench_sdk._local._protocol import encode_job
from gpubench_sdk._local._provider import LocalProvider
from gpubench_sdk._local._spawn import spawn_runtime
from gpubench_sdk._local._worker import FrameError, encode, read_frame_sync
from gpubench_sdk._transport._client import make_client

pytestmark = pytest.mark.anyio

# A user's handler module, written to tmp_path and found by the workers through PYTHONPATH.
# It loads in milliseconds, so these tests measure the runtime, not a model.
HANDLER_SOURCE = """
import asyncio, os, time

def load():
    if os.environ.get("TEST_FAIL_LOAD"):
        raise RuntimeError("weights file missing")
    time.sleep(float(os.environ.get("TEST_LOAD_S", "0")))
    return {"loaded_in": os.getpid()}

def predict(payload, model):
    if payload.get("fail"):
        raise ValueError("bad input: " + str(payload["fail"]))
    time.sleep(payload.get("sleep_s", 0))
    print("handler output goes to stderr")  # must not corrupt the frame stream on stdout
    return {"pid": os.getpid(), "model": model, "echo": payload.get("echo")}

def predict_plain(payload):
    return {"args": 1, "echo": payload.get("echo")}

async def predict_async(payload):
    await asyncio.sleep(0.001)
    return {"async": True}

def predict_unserializable(payload):
    return {"value": object()}
"""

KEY = "sk-local-TEST-0123456789abcdef"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def handler_env(tmp_path: Path) -> dict[str, str]:
    (tmp_path / "bench_handler.py").write_text(HANDLER_SOURCE, encoding="utf-8")
    return {"PYTHONPATH": str(tmp_path)}


def fast_config(env: dict[str, str], **fields: Any) -> LocalRuntimeConfig:
    fields.setdefault("handler", "bench_handler:predict")
    fields.setdefault("load", "bench_handler:load")
    return LocalRuntimeConfig(env=env, **fields)


@pytest.fixture
async def client() -> AsyncIterator[httpx.AsyncClient]:
    async with make_client(timeout_s=30) as c:
        yield c


async def wait_until(check: Callable[[], Awaitable[bool]], timeout_s: float = 10.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not await check():
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not met within {timeout_s} s")
        await asyncio.sleep(0.02)


async def health(client: httpx.AsyncClient, url: str, **kw: Any) -> dict[str, Any]:
    response = await client.get(url + "/health", **kw)
    assert response.status_code == 200
    data: dict[str, Any] = response.json()
    return data


def workers_total(h: dict[str, Any]) -> int:
    return int(h["workers"]["starting"] + h["workers"]["idle"] + h["workers"]["busy"])


def proc_file(pid: int, name: str) -> bytes:
    return Path(f"/proc/{pid}/{name}").read_bytes()


def alive(pid: int) -> bool:
    """Whether a process exists and is not a zombie."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    except OSError:  # no /proc (macOS): ask the kernel
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        return True
    return stat.rsplit(")", 1)[1].split()[0] not in ("Z", "X")


async def gone(pid: int, timeout_s: float = 5.0) -> None:
    async def dead() -> bool:
        return not alive(pid)

    await wait_until(dead, timeout_s)


# ----- the demo handler --------------------------------------------------------------------


async def test_demo_handler_cold_then_warm_and_serves_every_workload(
    client: httpx.AsyncClient,
) -> None:
    async with LocalRuntime(idle_timeout_s=30) as rt:
        probe = EchoProbe(sleep_ms=5, payload_bytes=64)
        first = await client.post(rt.url + "/invoke", json=dict(probe.request(0).payload))
        assert first.status_code == 200
        cold = first.json()
        assert cold["cold"] is True
        assert cold["boot_ms"] > 100  # a real process, numpy import and model load
        assert cold["queue_ms"] >= cold["boot_ms"]
        assert cold["execution_ms"] >= 5
        assert float(first.headers["x-gpubench-queue-ms"]) == pytest.approx(cold["queue_ms"], 1e-3)
        assert float(first.headers["x-gpubench-execution-ms"]) == pytest.approx(
            cold["execution_ms"], 1e-3
        )
        assert probe.read(cold["output"]) == (None, None)

        second = (await client.post(rt.url + "/invoke", json=dict(probe.request(1).payload))).json()
        assert second["cold"] is False and second["boot_ms"] is None
        assert second["worker_id"] == cold["worker_id"]
        assert second["queue_ms"] < cold["boot_ms"] / 10
        assert second["request_id"] != cold["request_id"]

        llm = LLMCompletion(prompt_tokens=12, max_tokens=20)
        out = (await client.post(rt.url + "/invoke", json=dict(llm.request(2).payload))).json()
        assert llm.read(out["output"]) == (13, 20)  # the workload prefixes "[seq]" to the prompt
        assert len(out["output"]["text"].split()) == 20

        image = ImageGeneration(steps=8, num_images=3)
        out = (await client.post(rt.url + "/invoke", json=dict(image.request(3).payload))).json()
        assert image.read(out["output"]) == (1, 3)

        unknown = await client.post(rt.url + "/invoke", json={"what": 1})
        assert unknown.status_code == 500 and "unknown payload" in unknown.json()["error"]

        boot = (await health(client, rt.url))["last_boot"]
        assert boot["load_ms"] > 50 and boot["boot_ms"] == pytest.approx(cold["boot_ms"])


# ----- scaling -----------------------------------------------------------------------------


async def test_scales_to_zero_after_idle_timeout_then_starts_cold(
    client: httpx.AsyncClient, handler_env: dict[str, str]
) -> None:
    async with LocalRuntime(fast_config(handler_env, idle_timeout_s=0.3)) as rt:
        first = (await client.post(rt.url + "/invoke", json={"echo": 1})).json()
        assert first["cold"] is True
        assert first["output"]["model"] == {"loaded_in": first["output"]["pid"]}

        async def zero() -> bool:
            return workers_total(await health(client, rt.url)) == 0

        await wait_until(zero, timeout_s=5)
        await gone(first["output"]["pid"])
        again = (await client.post(rt.url + "/invoke", json={"echo": 2})).json()
        assert again["cold"] is True and again["boot_ms"] > 0
        assert again["worker_id"] != first["worker_id"]
        assert again["output"]["pid"] != first["output"]["pid"]


async def test_burst_queues_and_never_exceeds_max_workers(
    client: httpx.AsyncClient, handler_env: dict[str, str]
) -> None:
    async with LocalRuntime(fast_config(handler_env, max_workers=2, idle_timeout_s=5)) as rt:
        seen_workers: list[int] = []
        seen_queue: list[int] = []
        done = asyncio.Event()

        async def watch() -> None:
            while not done.is_set():
                h = await health(client, rt.url)
                seen_workers.append(workers_total(h))
                seen_queue.append(h["queue"])
                await asyncio.sleep(0.01)

        limit = asyncio.Semaphore(8)

        async def one(i: int) -> dict[str, Any]:
            async with limit:
                response = await client.post(rt.url + "/invoke", json={"sleep_s": 0.05, "echo": i})
                assert response.status_code == 200
                body: dict[str, Any] = response.json()
                return body

        watcher = asyncio.create_task(watch())
        results = await asyncio.gather(*(one(i) for i in range(20)))
        done.set()
        await watcher

        assert max(seen_workers) <= 2
        assert max(seen_queue) >= 4
        assert len({r["worker_id"] for r in results}) == 2
        # w1 boots for request 0 and w2 for request 1; which of the two w2 serves first depends
        # on timing, and only a request that arrived before w2 was started counts as cold.
        assert 1 <= sum(r["cold"] for r in results) <= 2
        assert all(r["boot_ms"] <= r["queue_ms"] for r in results if r["cold"])
        warm_waits = sorted(r["queue_ms"] for r in results if not r["cold"])
        assert warm_waits[-1] > 100  # 8 in flight over 2 workers of 50 ms each: real queueing
        assert [r["output"]["echo"] for r in results] == list(range(20))
        assert (await health(client, rt.url))["jobs"] == {"completed": 20, "failed": 0}


async def test_queue_overflow_answers_429_with_retry_after(
    client: httpx.AsyncClient, handler_env: dict[str, str]
) -> None:
    # A slow load keeps all six requests waiting for the one worker, whatever the machine's speed.
    config = fast_config({**handler_env, "TEST_LOAD_S": "0.3"}, max_workers=1, max_queue=2)
    async with LocalRuntime(config) as rt, LocalProvider(url=rt.url) as provider:
        responses = await asyncio.gather(
            *(client.post(rt.url + "/invoke", json={"sleep_s": 0.2}) for _ in range(6))
        )
        statuses = sorted(r.status_code for r in responses)
        assert statuses == [200, 200, 429, 429, 429, 429]
        throttled = next(r for r in responses if r.status_code == 429)
        assert throttled.headers["Retry-After"] == "1"
        assert "queue full" in throttled.json()["error"]

        calls = [provider.invoke(Request(seq=i, payload={"sleep_s": 0.2})) for i in range(5)]
        outcomes = await asyncio.gather(*calls, return_exceptions=True)
        errors = [o for o in outcomes if isinstance(o, BaseException)]
        assert errors and all(isinstance(e, ThrottledError) for e in errors)
        assert all(e.retry_after_s == 1.0 and e.status_code == 429 for e in errors)  # type: ignore[attr-defined]


async def test_min_workers_are_started_and_kept(
    client: httpx.AsyncClient, handler_env: dict[str, str]
) -> None:
    async with LocalRuntime(fast_config(handler_env, min_workers=1, idle_timeout_s=0.1)) as rt:

        async def one_idle() -> bool:
            return bool((await health(client, rt.url))["workers"]["idle"] == 1)

        await wait_until(one_idle)
        body = (await client.post(rt.url + "/invoke", json={})).json()
        assert body["cold"] is False  # the worker was started before the request arrived
        await asyncio.sleep(0.4)  # past the idle timeout: min_workers keeps it
        h = await health(client, rt.url)
        assert h["workers"]["idle"] == 1 and h["pool"][0]["id"] == body["worker_id"]

        # Scale-to-zero stops it; min_workers starts a fresh one at once.
        after = (await client.post(rt.url + "/admin/scale-to-zero")).json()
        assert after["workers"]["starting"] == 1
        assert after["pool"][0]["id"] != body["worker_id"]


# ----- failures ----------------------------------------------------------------------------


async def test_handler_error_is_500_and_the_worker_survives(
    client: httpx.AsyncClient, handler_env: dict[str, str], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="gpubench")
    async with LocalRuntime(fast_config(handler_env)) as rt:
        failed = await client.post(rt.url + "/invoke", json={"fail": "boom"})
        assert failed.status_code == 500
        error = failed.json()
        assert error["error"] == "ValueError: bad input: boom"
        assert error["request_id"] and error["worker_id"]
        ok = (await client.post(rt.url + "/invoke", json={"echo": "x"})).json()
        assert ok["worker_id"] == error["worker_id"] and ok["cold"] is False
        assert (await health(client, rt.url))["jobs"] == {"completed": 1, "failed": 1}
        assert "bad input: boom" in caplog.text  # the traceback reaches the operator's log


async def test_unserializable_output_is_500(
    client: httpx.AsyncClient, handler_env: dict[str, str]
) -> None:
    config = fast_config(handler_env, handler="bench_handler:predict_unserializable", load=None)
    async with LocalRuntime(config) as rt:
        response = await client.post(rt.url + "/invoke", json={})
        assert response.status_code == 500
        assert "not JSON" in response.json()["error"]
        assert (await client.post(rt.url + "/invoke", json={})).status_code == 500  # still alive


async def test_load_failure_is_503_with_the_reason(
    client: httpx.AsyncClient, handler_env: dict[str, str]
) -> None:
    env = {**handler_env, "TEST_FAIL_LOAD": "1"}
    async with LocalRuntime(fast_config(env)) as rt, LocalProvider(url=rt.url) as provider:
        responses = await asyncio.gather(
            *(client.post(rt.url + "/invoke", json={}) for _ in range(3))
        )
        assert [r.status_code for r in responses] == [503, 503, 503]
        message = responses[0].json()["error"]
        assert message == "handler failed to load: RuntimeError: weights file missing"

        async def all_failed() -> bool:  # one worker was started per waiting request
            return workers_total(await health(client, rt.url)) == 0

        await wait_until(all_failed)
        assert (await health(client, rt.url))["jobs"]["failed"] == 3
        with pytest.raises(ServerHTTPError, match="weights file missing") as caught:
            await provider.invoke(Request(seq=0, payload={}))
        assert caught.value.status_code == 503 and caught.value.provider == "local"


async def test_a_load_that_hangs_is_stopped_at_boot_timeout_and_named(
    client: httpx.AsyncClient, handler_env: dict[str, str]
) -> None:
    # load() sleeps an hour: without a bound the worker would hold its slot, and the request
    # would wait its whole request_timeout_s (300 s) for a worker that never comes.
    env = {**handler_env, "TEST_LOAD_S": "3600"}
    config = fast_config(env, boot_timeout_s=0.5, max_workers=1)
    async with LocalRuntime(config) as rt:
        started = time.monotonic()
        response = await client.post(rt.url + "/invoke", json={})
        assert time.monotonic() - started < 10
        assert response.status_code == 503
        assert "was not ready within boot_timeout_s=0.5" in response.json()["error"]

        async def none_left() -> bool:
            return workers_total(await health(client, rt.url)) == 0

        await wait_until(none_left)


async def test_a_runtime_that_never_says_where_it_listens_is_named() -> None:
    with pytest.raises(RuntimeError, match=r"did not say where it listens within 0\.001 s"):
        await spawn_runtime(startup_timeout_s=0.001)


async def test_unknown_handler_module_is_503(client: httpx.AsyncClient) -> None:
    async with LocalRuntime(handler="no_such_module_here:predict", load=None) as rt:
        response = await client.post(rt.url + "/invoke", json={})
        assert response.status_code == 503
        assert "ModuleNotFoundError" in response.json()["error"]


async def test_worker_killed_mid_request_is_502_and_replaced(
    client: httpx.AsyncClient, handler_env: dict[str, str]
) -> None:
    async with LocalRuntime(fast_config(handler_env)) as rt:
        pending = asyncio.create_task(client.post(rt.url + "/invoke", json={"sleep_s": 30}))

        async def busy() -> bool:
            return bool((await health(client, rt.url))["workers"]["busy"] == 1)

        await wait_until(busy)
        victim = (await health(client, rt.url))["pool"][0]
        os.kill(victim["pid"], signal.SIGKILL)
        response = await pending
        assert response.status_code == 502
        assert f"worker {victim['id']} exited with code -9" in response.json()["error"]
        after = (await client.post(rt.url + "/invoke", json={"echo": "next"})).json()
        assert after["cold"] is True and after["worker_id"] != victim["id"]


async def test_request_timeout_is_504_naming_the_stage(
    client: httpx.AsyncClient, handler_env: dict[str, str]
) -> None:
    async with (
        LocalRuntime(fast_config(handler_env, request_timeout_s=0.5)) as rt,
        LocalProvider(url=rt.url) as provider,
    ):
        slow = await client.post(rt.url + "/invoke", json={"sleep_s": 5})
        assert slow.status_code == 504 and slow.json()["stage"] == "execution"
        assert workers_total(await health(client, rt.url)) == 0  # the stuck worker was stopped
        with pytest.raises(ServerHTTPError) as caught:
            await provider.invoke(Request(seq=0, payload={"sleep_s": 5}))
        assert caught.value.status_code == 504

    env = {**handler_env, "TEST_LOAD_S": "3"}
    async with (
        LocalRuntime(fast_config(env, request_timeout_s=0.3)) as rt,
        LocalProvider(url=rt.url) as provider,
    ):
        with pytest.raises(ColdTimeoutError, match="no worker became free"):
            await provider.invoke(Request(seq=0, payload={}))


async def test_bad_bodies_are_400(client: httpx.AsyncClient, handler_env: dict[str, str]) -> None:
    async with LocalRuntime(fast_config(handler_env)) as rt:
        for body in (b"not json", b"[1, 2]", b'"text"', b"\xff\xfe{}"):
            response = await client.post(rt.url + "/invoke", content=body)
            assert response.status_code == 400, body
            assert "JSON object" in response.json()["error"]
        assert workers_total(await health(client, rt.url)) == 0  # nothing was started for them


# ----- handlers ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("handler", "load", "expected"),
    [
        ("bench_handler:predict_plain", None, {"args": 1, "echo": "e"}),
        ("bench_handler:predict_async", None, {"async": True}),
        ("gpubench_sdk.demo:echo", "", {"echo": "e", "slept_ms": pytest.approx(2, abs=50)}),
    ],
)
async def test_handlers_without_load_and_async_handlers(
    client: httpx.AsyncClient,
    handler_env: dict[str, str],
    handler: str,
    load: str | None,
    expected: Any,
) -> None:
    config = fast_config(handler_env, handler=handler, load=load)  # "" is no load, as in TOML
    assert config.load is None
    async with LocalRuntime(config) as rt:
        response = await client.post(rt.url + "/invoke", json={"echo": "e", "sleep_ms": 2})
        assert response.status_code == 200 and response.json()["output"] == expected


# ----- API key -----------------------------------------------------------------------------


async def test_api_key_is_required_and_never_revealed(
    client: httpx.AsyncClient,
    handler_env: dict[str, str],
    caplog: pytest.LogCaptureFixture,
    capfd: pytest.CaptureFixture[str],
) -> None:
    caplog.set_level(logging.DEBUG)
    config = fast_config(handler_env, api_key=SecretStr(KEY))
    assert KEY not in repr(config) and KEY not in config.model_dump_json()
    seen: list[httpx.Response] = []
    async with LocalRuntime(config) as rt:
        assert KEY not in repr(rt)
        good = {"Authorization": f"Bearer {KEY}"}
        for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": KEY}):
            for method, path in [
                ("POST", "/invoke"),
                ("GET", "/health"),
                ("POST", "/admin/scale-to-zero"),
                ("GET", "/admin/scaling"),
                ("PATCH", "/admin/scaling"),
            ]:
                response = await client.request(method, rt.url + path, json={}, headers=headers)
                assert response.status_code == 401, (method, path, headers)
                assert response.headers["WWW-Authenticate"] == "Bearer"
                seen.append(response)
        ok = await client.post(rt.url + "/invoke", json={"echo": 1}, headers=good)
        assert ok.status_code == 200
        seen.append(ok)
        seen.append(await client.get(rt.url + "/health", headers=good))
        async with LocalProvider(url=rt.url, api_key=SecretStr(KEY)) as provider:
            assert (await provider.invoke(Request(seq=0, payload={}))).http_status == 200
            assert (await provider.state()).ready == 1
        async with LocalProvider(url=rt.url) as keyless:
            with pytest.raises(ClientHTTPError) as caught:
                await keyless.invoke(Request(seq=0, payload={}))
            assert caught.value.status_code == 401
    for response in seen:
        assert KEY not in response.text
        assert all(KEY not in value for value in response.headers.values())
    out, err = capfd.readouterr()
    assert KEY not in out + err + caplog.text


# ----- LocalProvider -----------------------------------------------------------------------


async def test_provider_ensure_cold_and_scaling(
    client: httpx.AsyncClient, handler_env: dict[str, str]
) -> None:
    async with LocalRuntime(fast_config(handler_env, idle_timeout_s=30)) as rt:
        async with LocalProvider(url=rt.url) as provider:
            assert provider.capabilities.names() == [
                "fleet_state",
                "cold_start_control",
                "scaling_settings",
                "server_timings(execution_ms,queue_ms,setup_ms)",
            ]
            first = await provider.invoke(Request(seq=0, payload={"echo": 1}))
            assert first.cold is True and first.setup_ms and first.queue_ms
            assert first.setup_ms <= first.queue_ms and first.first_byte_ns
            warm = await provider.invoke(Request(seq=1, payload={"echo": 1}))
            assert warm.cold is False and warm.setup_ms is None
            assert warm.worker_id == first.worker_id and warm.output["echo"] == 1

            state = await provider.state()
            assert (state.ready, state.busy, state.starting, state.queued) == (1, 0, 0, 0)
            check = await provider.ensure_cold(timeout_s=5)
            assert check.confirmed and check.how == "health: 0 workers"
            assert (await provider.state()).is_cold
            assert (await provider.invoke(Request(seq=2, payload={}))).cold is True

            assert await provider.get_scaling() == ScalingSettings(0, 4, 30.0)
            await provider.set_scaling(ScalingSettings(max_workers=3, idle_timeout_s=1.5))
            assert await provider.get_scaling() == ScalingSettings(0, 3, 1.5)
            with pytest.raises(ConfigError, match=r"scaling\.max_workers"):
                await provider.set_scaling(ScalingSettings(max_workers=0))
            with pytest.raises(ConfigError, match=r"scaling\.min_workers.*must not exceed"):
                await provider.set_scaling(ScalingSettings(min_workers=5))

            await provider.set_scaling(ScalingSettings(min_workers=1))
            check = await provider.ensure_cold(timeout_s=2)
            assert not check.confirmed and "min_workers=1" in check.how
        # Leaving the provider restores the settings it found.
        assert (await client.get(rt.url + "/admin/scaling")).json() == {
            "min_workers": 0,
            "max_workers": 4,
            "idle_timeout_s": 30.0,
        }
        for body, field in [
            ({"idle_timeout_s": "soon"}, "idle_timeout_s"),
            ({"min_workers": 1.5}, "min_workers"),
            ({"max_workers": True}, "max_workers"),
            ({"workers": 2}, "workers"),
            ({"min_workers": 9}, "min_workers"),
        ]:
            response = await client.patch(rt.url + "/admin/scaling", json=body)
            assert response.status_code == 400, body
            assert response.json()["field"] == field
            assert response.json()["error"].startswith(field)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
async def test_provider_starts_and_stops_its_own_runtime(
    handler_env: dict[str, str], capfd: pytest.CaptureFixture[str]
) -> None:
    provider = LocalProvider(
        api_key=SecretStr(KEY),
        handler="bench_handler:predict",
        load="bench_handler:load",
        env=handler_env,
        idle_timeout_s=30,
    )
    async with provider:
        runtime = provider._runtime
        assert runtime is not None and provider.url == runtime.url
        result = await provider.invoke(Request(seq=0, payload={"echo": "own"}))
        assert result.cold is True and result.output["echo"] == "own"
        worker_pid = result.output["pid"]
        # The key reaches the runtime by environment only, and never its workers.
        assert KEY.encode() not in proc_file(runtime.pid, "cmdline")
        assert KEY.encode() not in proc_file(worker_pid, "environ")
    assert runtime.proc.returncode == 0
    await gone(runtime.pid)
    await gone(worker_pid)
    out, err = capfd.readouterr()
    assert KEY not in out + err


async def test_runtime_killed_by_sigkill_leaves_no_worker(
    client: httpx.AsyncClient, handler_env: dict[str, str]
) -> None:
    runtime = await spawn_runtime(fast_config(handler_env, idle_timeout_s=30))
    try:
        body = (await client.post(runtime.url + "/invoke", json={})).json()
        worker_pid = body["output"]["pid"]
        assert alive(worker_pid)
        os.kill(runtime.pid, signal.SIGKILL)
        assert await runtime.proc.wait() == -signal.SIGKILL
        await gone(worker_pid)  # its stdin closed with the runtime
    finally:
        await runtime.stop()


def test_serve_prints_one_line_and_stops_on_sigterm(handler_env: dict[str, str]) -> None:
    code = (
        "from gpubench_sdk._local._config import LocalRuntimeConfig\n"
        "from gpubench_sdk._local._gateway import serve\n"
        "serve(LocalRuntimeConfig(handler='bench_handler:predict_plain', load=None,"
        " min_workers=1))\n"
    )
    root = str(Path(__file__).resolve().parents[1])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([root, handler_env["PYTHONPATH"]])}
    with subprocess.Popen(
        [sys.executable, "-c", code], stdout=subprocess.PIPE, text=True, env=env
    ) as proc:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert line.startswith(LISTENING_LINE + "http://127.0.0.1:")
        url = line.removeprefix(LISTENING_LINE).strip()

        def idle_workers() -> int:
            return int(json.loads(httpx.get(url + "/health").text)["workers"]["idle"])

        deadline = time.monotonic() + 10
        while idle_workers() != 1 and time.monotonic() < deadline:
            time.sleep(0.02)
        pid = json.loads(httpx.get(url + "/health").text)["pool"][0]["pid"]
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=10) == 0
        assert proc.stdout.read() == ""  # exactly one line
    assert not alive(pid)


# ----- frames and config -------------------------------------------------------------------


def test_frames_round_trip_and_reject_garbage() -> None:
    stream = io.BytesIO(encode({"type": "ready", "pid": 1}) + encode_job("abc", b'{"x": [1]}'))
    assert read_frame_sync(stream) == {"type": "ready", "pid": 1}
    assert read_frame_sync(stream) == {"type": "job", "id": "abc", "payload": {"x": [1]}}
    assert read_frame_sync(stream) is None
    with pytest.raises(FrameError):
        read_frame_sync(io.BytesIO(b"\x00\x00\x00\x02[]"))
    with pytest.raises(FrameError):
        read_frame_sync(io.BytesIO(b"\xff\xff\xff\xff"))
    assert read_frame_sync(io.BytesIO(b"\x00\x00\x00\x09{}")) is None  # truncated: end of stream


def test_config_validation() -> None:
    with pytest.raises(ValidationError, match="must not exceed"):
        LocalRuntimeConfig(min_workers=3, max_workers=2)
    with pytest.raises(ValidationError, match="must not exceed"):
        LocalProvider(min_workers=3, max_workers=2)
    with pytest.raises(ValidationError):
        LocalRuntimeConfig(handler="not a spec")
    with pytest.raises(ValidationError):
        LocalRuntimeConfig(workers=2)  # type: ignore[call-arg]
    config = LocalRuntimeConfig(api_key=SecretStr(KEY))
    assert KEY not in repr(config) and KEY not in str(config.model_dump())
