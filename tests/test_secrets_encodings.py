"""A secret is masked in every form it travels in: as written, URL-encoded, in base64 (either
alphabet, padded or not, aligned or inside a longer base64 string) and as the base64 of the
``user:secret`` pair HTTP Basic auth builds; including where a provider echoes it back."""

from __future__ import annotations

import asyncio
import base64
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote, quote_plus

import httpx
import pytest
import tomli_w
from starlette.applications import Starlette
from starlette.requests import Request as HTTPRequest
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import Route

from gpubench_sdk import make_client
from gpubench_sdk._base._secrets import redact, remember, scrub_headers, scrub_url
from gpubench_sdk.testing import ServedApp, otlp_receiver, serve
from gpubench_sdk.testing._cases import leak_forms


def _b64(raw: str | bytes) -> set[str]:
    """``raw`` in base64, both alphabets, with and without padding."""
    padded = base64.b64encode(raw.encode() if isinstance(raw, str) else raw).decode()
    safe = padded.replace("+", "-").replace("/", "_")
    return {padded, padded.rstrip("="), safe, safe.rstrip("=")}


def every_form(key: str, user: str | None = None) -> set[str]:
    """What must never appear: ``leak_forms`` (as is, URL-encoded, inside base64 at each
    alignment), base64 of the key itself, and base64 of ``user:key`` as Basic sends it."""
    forms = set(leak_forms(key)) | _b64(key)
    if user is not None:
        forms |= _b64(f"{user}:{key}")
    return forms


# -- each form, alone --------------------------------------------------------------------------

# '/', '+' and '=' make every encoding differ from the key, and its base64 hold both alphabets'
# characters ('?' and '>' at these positions give '/' and '+').
UNIT_KEY = "sk-unit/7d3+a9f=1c5e?>>8b2"


def test_the_forms_differ_from_the_key() -> None:
    forms = every_form(UNIT_KEY, "bench-user")
    assert {quote(UNIT_KEY, safe=""), quote_plus(UNIT_KEY)} <= forms
    assert len({f for f in forms if "+" in f or "/" in f}) >= 2  # standard alphabet
    assert len({f for f in forms if "-" in f or "_" in f}) >= 2  # URL-safe alphabet
    assert len(forms) >= 12


@pytest.mark.parametrize("form", sorted(every_form(UNIT_KEY)))
def test_a_remembered_key_is_masked_in_each_form(form: str) -> None:
    remember(UNIT_KEY)
    assert redact(f"said: {form}.") == "said: ***."


@pytest.mark.parametrize("offset", range(3))
def test_a_key_inside_a_longer_base64_string_is_masked(offset: int) -> None:
    # base64 of a document holding the key: no aligned encoding of the key appears in it
    key = f"sk-inside-{offset}-9b1e4f7a2c"
    remember(key)
    blob = base64.b64encode(b"x" * offset + f'{{"token": "{key}"}}'.encode()).decode()
    shown = redact(f"echo {blob}")
    assert "***" in shown and not any(form in shown for form in leak_forms(key)), shown


def test_a_url_s_userinfo_registers_the_basic_pair() -> None:
    key = "pw-basic/4a7d+1c9e2b8f"
    assert scrub_url(f"https://bench-user:{quote(key, safe='')}@example.test/run") == (
        "https://example.test/run"
    )
    for token in _b64(f"bench-user:{key}"):  # what httpx sends, from the decoded parts
        assert redact(f"Authorization: Basic {token}") == "Authorization: Basic ***"
    assert (
        redact(f"as written {quote(key, safe='')}, decoded {key}") == "as written ***, decoded ***"
    )


def test_a_url_with_only_a_user_registers_it_as_the_credential() -> None:
    token = "ghp-only-user-5e2d8c1b9a"
    scrub_url(f"https://{token}@example.test/run")
    assert redact(f"Basic {base64.b64encode(f'{token}:'.encode()).decode()}") == "Basic ***"
    assert redact(f"user {token}") == "user ***"
    scrub_url("https://deploy@example.test/run")  # a short bare user names no secret
    assert redact("deploy the model") == "deploy the model"


def test_a_basic_header_registers_the_password_it_encodes() -> None:
    password = "pw/header+8e3f1a6c"
    token = base64.b64encode(f"svc:{password}".encode()).decode()
    assert scrub_headers({"Proxy-Authorization": f"Basic {token}"}) == {
        "Proxy-Authorization": "***"
    }
    shown = redact(
        f"bad password {password} ({quote(password, safe='')}, {sorted(_b64(password))[0]})"
    )
    assert shown == "bad password *** (***, ***)"


def test_short_values_mask_no_ordinary_words() -> None:
    scrub_headers({"X-Trace": "on", "X-Mode": "fast1"})  # presumed, but no credential
    remember("q7zx")  # a known secret's base64 ("cTd6eA") is too short to mask on its own
    text = "turn it on, fast1 mode; cTd6eA and ZmFzdDE= are ids"
    assert redact(text) == text


def test_overlapping_secrets_are_masked_whole() -> None:
    # Replaced one after the other, the first would cut the second and leave its tail.
    first, second = "sk-overlap-aaaa1111", "1111bbbb-tail-zzzz"
    remember(first)
    remember(second)
    assert redact(f"[{first}bbbb-tail-zzzz]") == "[***]"
    assert redact(f"[sk-overlap-aaaa{second}]") == "[***]"
    assert redact(f"{first} {second}") == "*** ***"


# -- end to end: a server that echoes every credential back, in every encoding -----------------

USER = "bench-user"
URL_KEY = "sk-url/4f9c+2a7e=5d1b>8c"  # in the target URL's userinfo: Basic auth
HDR_KEY = "sk-hdr/8e2d+7c9a=1f3e>4b"  # api_key_env, sent as Authorization: Bearer


def _echoed(value: str) -> list[str]:
    """``value`` as a careless provider may quote it: as is, URL-encoded, base64 of it and of
    the token after its scheme, and a Basic credential decoded."""
    token = value.split(None, 1)[-1]
    forms = [value, quote(value, safe=""), quote_plus(value), quote(token, safe="")]
    forms += sorted(_b64(value) | _b64(token))
    if value.lower().startswith("basic "):
        forms.append(base64.b64decode(token).decode())
    return forms


_ARRIVED: dict[str, int] = {}  # per credential sent, the requests that carried it
_ECHOED: dict[str, set[int]] = {}  # per credential sent, which of its forms an error quoted


async def _echo_everything(request: HTTPRequest) -> Response:
    """Every third request answered; the others a 401 or 500 quoting the credential, each
    time in the next of its forms (an error body is stored shortened), then the URL and every
    header, as a debugging proxy or a verbose error page does."""
    body = await request.body()
    auth = request.headers.get("authorization", "")
    seq = _ARRIVED[auth] = _ARRIVED.get(auth, 0) + 1
    if seq % 3 == 0 or not auth:
        return JSONResponse(json.loads(body))
    errors = seq - seq // 3 - 1  # the errors this credential got before this one
    forms = _echoed(auth)
    _ECHOED.setdefault(auth, set()).add(errors % len(forms))
    quoted = f"refused {forms[errors % len(forms)]} at {request.url} with {dict(request.headers)}"
    return PlainTextResponse(quoted, status_code=500 if errors % 2 else 401)


@pytest.fixture(scope="module")
def echoing() -> Iterator[ServedApp]:
    app = Starlette(routes=[Route("/run", _echo_everything, methods=["POST"])])
    with serve(app) as served:
        yield served


def _plan(url: str) -> dict[str, Any]:
    host = url.split("://", 1)[1]
    return {
        "run": {"name": "encodings"},
        "workload": {"kind": "probe", "sleep_ms": 1},
        "targets": [
            {
                "name": "userinfo",
                "provider": "http",
                "url": f"http://{USER}:{quote(URL_KEY, safe='')}@{host}/run",
                "auth_scheme": "none",
            },
            {
                "name": "header",
                "provider": "http",
                "url": f"{url}/run",
                "api_key_env": "GPB_ENC_KEY",
            },
        ],
        "scenarios": [{"kind": "burst", "total": 21, "concurrency": 3}],  # 14 errors each
    }


# The CLI with every log record, DEBUG up, on stderr: what caplog would see in-process.
_CLI = (
    "import logging, sys; logging.basicConfig(level=logging.DEBUG); "
    "from gpubench_sdk._cli import main; sys.argv[0] = 'gpubench'; main()"
)


def _cli(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", _CLI, *args], capture_output=True, text=True, timeout=120, env=env
    )


def test_no_form_of_a_key_leaves_the_cli_run(echoing: ServedApp, tmp_path: Path) -> None:
    plan, store = tmp_path / "p.toml", tmp_path / "enc.sqlite"
    plan.write_text(tomli_w.dumps(_plan(echoing.url)))
    env = {**os.environ, "GPB_ENC_KEY": HDR_KEY}
    texts: dict[str, str] = {}
    with otlp_receiver() as (otlp, received):
        run = _cli("run", str(plan), "--store", str(store), "--otlp-endpoint", otlp, env=env)
    texts["run"] = run.stdout + run.stderr
    assert "userinfo" in run.stdout and "header" in run.stdout, texts["run"]
    assert "DEBUG" in run.stderr  # the log records are there to be searched
    texts["spans and metrics"] = b"".join(received.traces + received.metrics).decode("latin-1")
    assert received.traces, "no span was exported"
    basic = base64.b64encode(f"{USER}:{URL_KEY}".encode()).decode()
    for auth in (f"Basic {basic}", f"Bearer {HDR_KEY}"):  # every form was echoed back
        assert _ECHOED.get(auth) == set(range(len(_echoed(auth)))), auth
    for args in (("show", "latest"), ("show", "latest", "--json")):
        shown = _cli("results", *args, "--store", str(store), env=env)
        assert shown.returncode == 0, shown.stderr
        texts[" ".join(args)] = shown.stdout + shown.stderr
    assert "401" in texts["show latest"] and "refused" in texts["show latest --json"]
    for fmt in ("jsonl", "csv"):
        export = _cli(
            "results", "export", "latest", "--store", str(store), "--format", fmt, env=env
        )
        assert export.returncode == 0, export.stderr
        texts[f"export {fmt}"] = export.stdout
    assert "refused" in texts["export jsonl"]
    texts["store"] = "".join(p.read_bytes().decode("latin-1") for p in tmp_path.glob("enc.sqlite*"))
    forms = {"url key": every_form(URL_KEY, USER), "header key": every_form(HDR_KEY)}
    for where, text in texts.items():
        for what, secret in forms.items():
            leaked = sorted(f for f in secret if f in text)
            assert not leaked, f"the {what} leaked into {where} as {leaked}"
    assert "refused Basic ***" in texts["export jsonl"]  # masked whole, not cut


def test_a_basic_credential_httpx_builds_is_masked(echoing: ServedApp) -> None:
    """A plugin passing ``auth=httpx.BasicAuth(...)``: the pair, built in the transport's
    request, is registered as it is sent; the 401 that quotes it is masked."""
    password = "pw-httpx-auth-2c7e9b1f"

    async def call() -> str:
        async with make_client() as client:
            answers = []
            for _ in range(3):
                r = await client.post(
                    f"{echoing.url}/run", json={}, auth=httpx.BasicAuth("svc", password)
                )
                answers.append(r.text)
            return " ".join(answers)

    shown = redact(asyncio.run(call()))
    assert "refused" in shown and "Basic ***" in shown
    leaked = sorted(f for f in every_form(password, "svc") if f in shown)
    assert not leaked, leaked
