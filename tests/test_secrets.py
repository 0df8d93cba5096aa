"""A benchmark run with a known API key leaves it in no artifact: store, exports, logs,
spans, reports, exceptions or reprs."""

from __future__ import annotations

import base64
import itertools
import json
import logging
import os
import subprocess
import sys
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
from _plans import local_target
from aiohttp import web
from conftest import LoopbackServer
from rich.console import Console

from gpubench_sdk import (
    Burst,
    EchoProbe,
    Outcome,
    Provider,
    Request,
    Result,
    ServerHTTPError,
    Store,
    summarize,
    telemetry,
)
from gpubench_sdk._plan._build import build_run
from gpubench_sdk._plan._config import parse_config
from gpubench_sdk._report._summary import render
from gpubench_sdk._runner._multiproc import run_blocking

KEY = "sk-gpb-3f9c2a7e5d1b4c8a"
PLAN = {
    "run": {"name": "secret-test"},
    "workload": {"kind": "probe", "sleep_ms": 1},
    "targets": [local_target(api_key_env="GPB_TEST_KEY", idle_timeout_s=1.0)],
    "scenarios": [
        {"kind": "cold_starts", "n": 1},
        {"kind": "burst", "total": 10, "concurrency": 2},
    ],
}


def _files_text(*paths: Path) -> str:
    return "".join(p.read_bytes().decode("latin-1") for p in paths if p.exists())


@pytest.fixture
def key_logs(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> pytest.LogCaptureFixture:
    """KEY in GPB_TEST_KEY, and every log record down to DEBUG captured for the test."""
    monkeypatch.setenv("GPB_TEST_KEY", KEY)
    caplog.set_level(logging.DEBUG)
    return caplog


def test_no_artifact_of_a_run_holds_the_key(
    tmp_path: Path, key_logs: pytest.LogCaptureFixture, capfd: pytest.CaptureFixture[str]
) -> None:
    setup = telemetry.configure(in_memory=True, set_global=False)
    store_path = tmp_path / "s.sqlite"
    config = parse_config(PLAN)
    runner = build_run(config, store=store_path, instruments=setup.instruments())
    result = run_blocking(runner)
    assert result.status == "completed"

    artifacts: dict[str, str] = {}
    with Store(store_path) as store:
        invs = store.invocations(result.run_id)
        assert invs and all(i.outcome is Outcome.OK for i in invs)  # the key was accepted
        jsonl = tmp_path / "e.jsonl"
        csv = tmp_path / "e.csv"
        with jsonl.open("w") as fp:
            store.export_jsonl(result.run_id, fp)
        with csv.open("w") as fp:
            store.export_csv(result.run_id, fp)
        console = Console(record=True, width=200)
        console.print(render(summarize(store, result.run), "r"))
        artifacts["report"] = console.export_text()
        artifacts["run info"] = repr(store.run(result.run_id))
    artifacts["store"] = _files_text(store_path, Path(f"{store_path}-wal"))
    artifacts["exports"] = _files_text(jsonl, csv)
    assert setup.spans is not None
    artifacts["spans"] = "".join(sp.to_json() for sp in setup.spans.get_finished_spans())
    artifacts["logs"] = "\n".join(r.getMessage() + str(r.args) for r in key_logs.records)
    out, err = capfd.readouterr()
    artifacts["stdio"] = out + err
    target = runner._targets[0]
    artifacts["reprs"] = repr(target) + repr(target.provider) + repr(target.provider.options)
    artifacts["options dump"] = target.provider.options.model_dump_json()
    artifacts["stored config"] = json.dumps(config.stored())
    assert "GPB_TEST_KEY" in artifacts["stored config"]  # the reference is kept...
    for name, text in artifacts.items():
        assert KEY not in text, f"the API key leaked into the {name}"  # ...the value never


class EchoesKeyBack(Provider):
    """A provider whose server quotes the request's Authorization header in its error."""

    name = "leaky"

    async def invoke(self, request: Request) -> Result:
        assert self.options.headers
        r = await self.client.post(self.options.headers["x-url"], headers=self.auth_headers())
        raise ServerHTTPError(
            f"server said: {r.text}", provider=self.name, status_code=r.status_code
        )


async def _quote_auth(request: web.Request) -> web.Response:
    return web.Response(status=500, text=f"bad token {request.headers.get('Authorization')}")


def test_key_echoed_in_an_error_is_scrubbed(tmp_path: Path) -> None:
    from pydantic import SecretStr

    from gpubench_sdk import Runner

    app = web.Application()
    app.router.add_post("/", _quote_auth)
    with LoopbackServer(app) as server:
        provider = EchoesKeyBack(api_key=SecretStr(KEY), headers={"x-url": server.url + "/"})
        result = run_blocking(
            Runner({"x": provider}, EchoProbe(), [Burst(2, 1)], store=tmp_path / "s.sqlite")
        )
    with Store(tmp_path / "s.sqlite") as store:
        errors = [i.error or "" for i in store.invocations(result.run_id)]
    assert all("bad token Bearer ***" in e for e in errors), errors
    assert KEY not in _files_text(tmp_path / "s.sqlite", tmp_path / "s.sqlite-wal")


def test_cli_output_and_store_hold_no_key(tmp_path: Path) -> None:
    """The CLI as a user runs it: its output, the store and the exports it writes hold none of
    the secrets, in any of their forms (header, Azure Functions code, SAS sig, Basic, Bearer)."""
    plan = tmp_path / "p.toml"
    import tomli_w

    app = web.Application()
    app.router.add_post("/run", _gatekeeper)
    store = tmp_path / "cli.sqlite"
    env = {**os.environ, "GPB_TEST_KEY": KEY}
    with LoopbackServer(app) as server:
        plan.write_text(tomli_w.dumps(_with_gate(PLAN, server.url)))
        proc = subprocess.run(
            [sys.executable, "-m", "gpubench_sdk", "run", str(plan), "--store", str(store)],
            capture_output=True,
            text=True,
            timeout=120,
            env=env,
        )
    texts = {"run output": proc.stdout + proc.stderr}
    assert "gate" in proc.stdout, proc.stdout + proc.stderr  # the run happened
    for fmt in ("jsonl", "csv"):
        export = subprocess.run(
            [sys.executable, "-m", "gpubench_sdk", "results", "export", "latest",
             "--store", str(store), "--format", fmt],
            capture_output=True, text=True, timeout=60, env=env,
        )  # fmt: skip
        assert export.returncode == 0, export.stderr
        texts[f"export {fmt}"] = export.stdout + export.stderr
    texts["store"] = _files_text(store, Path(f"{store}-wal"))
    for name, text in texts.items():
        for what, secret in SECRETS.items():
            assert secret not in text, f"the {what} leaked into the {name}"


def test_a_key_written_in_the_plan_is_refused_without_echo() -> None:
    from gpubench_sdk import ConfigError

    plan = json.loads(json.dumps(PLAN))
    plan["targets"][0]["api_key"] = KEY
    with pytest.raises(ConfigError) as info:
        parse_config(plan)
    assert info.value.field == "targets[loc].api_key"
    assert "api_key_env" in str(info.value) and KEY not in str(info.value)


async def _echo_headers(request: web.Request) -> web.Response:
    return web.json_response({"output": {"echo": "xxxxxxxxxxxxxxxx"}})


def test_credential_headers_are_masked_where_stored(tmp_path: Path) -> None:
    from gpubench_sdk import Runner

    class HeaderProvider(Provider):
        name = "hdr"

        async def invoke(self, request: Request) -> Result:
            r = await self.client.post(self.options.headers["x-url"], headers=self.options.headers)
            return Result(output=r.json()["output"])

    app = web.Application()
    app.router.add_post("/", _echo_headers)
    with LoopbackServer(app) as server:
        headers = {"x-url": server.url + "/", "X-Api-Token": KEY, "Accept": "application/json"}
        provider = HeaderProvider(headers=headers)
        result = run_blocking(
            Runner({"h": provider}, EchoProbe(), [Burst(2, 1)], store=tmp_path / "s.sqlite")
        )
    with Store(tmp_path / "s.sqlite") as store:
        (target,) = store.run(result.run_id).targets
    # default-deny: only the few public headers keep their values
    assert target.options["headers"] == {
        "x-url": "***",
        "X-Api-Token": "***",
        "Accept": "application/json",
    }
    assert KEY not in _files_text(tmp_path / "s.sqlite", tmp_path / "s.sqlite-wal")
    assert KEY not in repr(provider.options)


def test_unknown_or_secret_looking_fields_never_echo_their_value(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from gpubench_sdk import ConfigError

    monkeypatch.setenv("GPB_TEST_KEY", KEY)
    for field in ("key", "x-api-key", "client_secret", "access_token", "authorization"):
        plan = json.loads(json.dumps(PLAN))
        plan["targets"][0][field] = KEY
        with pytest.raises(ConfigError) as info:
            build_run(parse_config(plan), store=tmp_path / "s.sqlite")
        assert KEY not in str(info.value), field
    plan = json.loads(json.dumps(PLAN))
    plan["targets"][0]["colour"] = KEY  # not a secret name, but not an option either
    with pytest.raises(ConfigError, match=r"unknown key 'colour' in targets\[loc\]") as info:
        build_run(parse_config(plan), store=tmp_path / "s.sqlite")
    assert info.value.field == "targets[loc].colour" and KEY not in str(info.value)


def test_stored_plan_masks_headers_and_url_credentials() -> None:
    plan = json.loads(json.dumps(PLAN))
    plan["targets"][0]["url"] = f"https://user:{KEY}@example.test/run?mode=x&token={KEY}"
    plan["targets"][0]["headers"] = {
        "Authorization": f"Bearer {KEY}",
        "X-Trace": "on",
        "User-Agent": "bench/1",
    }
    stored = json.dumps(parse_config(plan).stored())
    assert KEY not in stored
    assert "example.test/run?mode=***&token=***" in stored
    assert '"X-Trace": "***"' in stored and '"User-Agent": "bench/1"' in stored


def test_options_given_in_python_are_validated_and_remembered() -> None:
    from pydantic import SecretStr

    from gpubench_sdk import LocalProvider
    from gpubench_sdk._base import _secrets

    other = "sk-gpb-python-only-4e5f6a7b"
    provider = LocalProvider(LocalProvider.Options(), api_key=other)
    assert isinstance(provider.options.api_key, SecretStr)
    assert provider.auth_headers() == {"Authorization": f"Bearer {other}"}
    assert _secrets.redact(f"echoed {other}") == "echoed ***"


def test_provider_errors_mask_remembered_secrets_themselves() -> None:
    # A plugin quoting a provider's answer that echoes the key needs no redact() of its own.
    from gpubench_sdk._base._secrets import remember

    remember("sk-live-0123456789")
    exc = ServerHTTPError("upstream said: bad key sk-live-0123456789", provider="p")
    assert "sk-live-0123456789" not in str(exc) and "sk-live-0123456789" not in repr(exc)
    assert "***" in str(exc)


# -- default-deny: every header and query value but a few public ones ---------------------------

HDR = "xauth-7c1e9b3f5a2d4e6f"  # X-Authentication: no credential-looking name
CODE = "azfn-code-5b8e2d7c9a1f3e4b"  # Azure Functions key, ?code=
SIG = "sas/sig+9d8c7b6a5f4e3d2c=="  # a SAS signature: '/', '+' and '=' get percent-encoded
BASIC = base64.b64encode(b"bench-user:pw-4a7d1c9e2b8f").decode()
BEARER = "tok-0e1f2a3b4c5d6e7f8a9b"
SECRETS = {
    "api key": KEY,
    "X-Authentication": HDR,
    "code": CODE,
    "sig": SIG,
    "sig (encoded)": quote(SIG, safe=""),
    "basic": BASIC,
    "bearer": BEARER,
}


_ARRIVALS = itertools.count()


async def _gatekeeper(request: web.Request) -> web.Response:
    """Checks every credential, then answers ok, 500 quoting the request, or 429."""
    assert request.query["code"] == CODE and request.query["sig"] == SIG
    assert request.headers["X-Authentication"] == HDR
    assert request.headers["Proxy-Authorization"] == f"Basic {BASIC}"
    assert request.headers["X-Upstream"] == f"Bearer {BEARER}"
    body = await request.json()
    seq = next(_ARRIVALS)
    if seq % 3 == 1:  # an error body that echoes the URL and headers, as real servers do
        quoted = f"bad request to {request.url} with {dict(request.headers)}"
        return web.Response(status=500, text=quoted)
    if seq % 3 == 2:
        headers = {"Retry-After": "2"}
        return web.Response(status=429, text=f"slow down {request.query_string}", headers=headers)
    return web.json_response(body)


def _with_gate(plan: dict[str, Any], url: str) -> dict[str, Any]:
    """``plan`` plus a target behind ``_gatekeeper`` holding every secret form, one burst."""
    plan = json.loads(json.dumps(plan))
    plan["targets"].append(
        {
            "name": "gate",
            "provider": "http",
            "url": f"{url}/run?code={CODE}&sig={quote(SIG, safe='')}&api-version=1",
            "auth_scheme": "none",
            "headers": {
                "X-Authentication": HDR,
                "Proxy-Authorization": f"Basic {BASIC}",
                "X-Upstream": f"Bearer {BEARER}",
                "Accept": "application/json",
            },
        }
    )
    plan["scenarios"] = [{"kind": "burst", "total": 9, "concurrency": 3}]
    return plan


def _worker_environments(root: int) -> dict[int, bytes]:
    """/proc environ of every descendant of ``root`` but its children (the local runtime,
    which receives its own key by environment), i.e. the runtime's workers."""
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            ppid = int(stat.read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        children.setdefault(ppid, []).append(int(stat.parent.name))
    found: dict[int, bytes] = {}
    for runtime in children.get(root, []):
        for worker in children.get(runtime, []):
            try:
                found[worker] = Path(f"/proc/{worker}/environ").read_bytes()
            except OSError:
                continue
    return found


@pytest.mark.skipif(not Path("/proc/self/environ").exists(), reason="reads /proc")
def test_every_secret_form_stays_out_of_every_artifact(
    tmp_path: Path, key_logs: pytest.LogCaptureFixture, capfd: pytest.CaptureFixture[str]
) -> None:
    app = web.Application()
    app.router.add_post("/run", _gatekeeper)
    envs: dict[int, bytes] = {}
    with LoopbackServer(app) as server:
        plan = _with_gate(PLAN, server.url)
        setup = telemetry.configure(in_memory=True, set_global=False)
        store_path = tmp_path / "s.sqlite"
        config = parse_config(plan)

        def look(inv: object) -> None:  # workers are alive while requests complete
            envs.update(_worker_environments(os.getpid()))

        runner = build_run(
            config, store=store_path, instruments=setup.instruments(), observers=[look]
        )
        result = run_blocking(runner)
    assert result.status == "completed"

    artifacts: dict[str, str] = {}
    with Store(store_path) as store:
        invs = store.invocations(result.run_id)
        gate = [i for i in invs if i.target == "gate"]
        assert (
            sorted(i.outcome.value for i in gate)
            == ["http_5xx"] * 3 + ["ok"] * 3 + ["throttled"] * 3
        )  # every credential was accepted; the errors quote them back
        assert {i.retry_after_s for i in gate if i.outcome is Outcome.THROTTLED} == {2.0}
        assert setup.spans is not None
        waits = [
            sp.attributes.get("gpubench.retry_after_s")
            for sp in setup.spans.get_finished_spans()
            if sp.attributes and sp.attributes.get("gpubench.outcome") == "throttled"
        ]
        assert waits == [2.0] * 3  # the span says it too
        exports = {
            "jsonl": tmp_path / "e.jsonl",
            "csv": tmp_path / "e.csv",
            "parquet": tmp_path / "e.parquet",
        }
        with exports["jsonl"].open("w") as fp:
            store.export_jsonl(result.run_id, fp)
        with exports["csv"].open("w") as fp:
            store.export_csv(result.run_id, fp)
        store.export_parquet(result.run_id, exports["parquet"])
        console = Console(record=True, width=200)
        console.print(render(summarize(store, result.run), "r"))
        artifacts["summary"] = console.export_text()
        artifacts["run info"] = repr(store.run(result.run_id))
    artifacts["store"] = _files_text(store_path, Path(f"{store_path}-wal"))
    for name, path in exports.items():
        artifacts[f"export {name}"] = _files_text(path)
    assert setup.spans is not None
    artifacts["spans"] = "".join(sp.to_json() for sp in setup.spans.get_finished_spans())
    artifacts["logs"] = "\n".join(r.getMessage() + str(r.args) for r in key_logs.records)
    for fmt in ("html", "json", "csv", "md"):  # a fresh process: it knows only the store
        out_file = tmp_path / f"report.{fmt}"
        proc = subprocess.run(
            [sys.executable, "-m", "gpubench_sdk", "report", "latest", "--store",
             str(store_path), "-o", str(out_file)],
            capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        assert proc.returncode == 0, proc.stderr
        artifacts[f"report {fmt}"] = out_file.read_text() + proc.stdout + proc.stderr
    out, err = capfd.readouterr()
    artifacts["stdio"] = out + err
    for target in runner._targets:
        artifacts[f"repr {target.name}"] = repr(target.provider.options)
        artifacts[f"public {target.name}"] = json.dumps(target.provider.options.public())
    artifacts["stored config"] = json.dumps(config.stored())
    assert envs, "no local runtime worker was seen"
    for pid, environ in envs.items():
        artifacts[f"worker {pid} environment"] = environ.decode("latin-1")
        assert b"GPB_TEST_KEY=" not in environ
    for name, text in artifacts.items():
        for what, secret in SECRETS.items():
            assert secret not in text, f"the {what} leaked into the {name}"
    assert "api-version=1" in artifacts["stored config"]  # a public query value is kept


def test_a_config_error_masks_before_it_shortens() -> None:
    from gpubench_sdk import ConfigError

    long_key = "sk-" + "9f" * 60
    for field, value in (
        ("targets[x].headers.X-Authentication", long_key),
        ("targets[x].something", f"Bearer {long_key}"),
        ("targets[x].url", f"https://h.test/x?code={long_key}"),
        ("targets[x].options", {"headers": {"X-Authentication": long_key}}),
    ):
        text = str(ConfigError(field, value, "a fix"))
        assert long_key[:12] not in text, (field, text)
        assert text.startswith(field)


def test_a_campaign_refuses_a_plan_it_could_only_store_masked(tmp_path: Path) -> None:
    """A campaign reruns its stored plan: a header or query value that default-deny masks
    would be rerun as '***', so the plan is refused up front (the value never shown)."""
    from gpubench_sdk import ConfigError
    from gpubench_sdk.campaign import Schedule, create_campaign

    schedule = Schedule(1_700_000_000_000_000_000, 2, every_s=60)
    clean = {"url": "https://fn.example.test/api/run?api-version=1", "headers": {}}
    for where, change in (
        ("targets[1].headers.X-Authentication", {"headers": {"X-Authentication": HDR}}),
        ("targets[1].url", {"url": f"https://fn.example.test/api/run?code={CODE}"}),
    ):
        plan = _with_gate(PLAN, "http://127.0.0.1:9")
        plan["targets"][1].update(clean | change)
        with pytest.raises(ConfigError) as info:
            create_campaign(parse_config(plan), schedule, store=tmp_path / "c.sqlite")
        assert info.value.field == where and "api_key_env" in str(info.value)
        assert HDR not in str(info.value) and CODE not in str(info.value)
