"""InputMap: the workload's request mapped onto a model's input schema, for every provider."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from conftest import EchoOptions, EchoProvider, LoopbackServer
from pydantic import ValidationError

from gpubench_sdk import (
    Burst,
    ConfigError,
    EchoProbe,
    InputMap,
    LLMCompletion,
    Outcome,
    Request,
    Runner,
    Store,
    load_config,
    run,
)
from gpubench_sdk._plan._config import provider_options

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = {"prompt": "hi", "max_tokens": 8, "temperature": 0.0, "stream": False}


def test_rename_drop_and_set() -> None:
    m = InputMap(rename={"max_tokens": "max_new_tokens"}, drop=["stream"], set={"top_p": 0.9})
    assert m.apply(SAMPLE) == {
        "prompt": "hi",
        "max_new_tokens": 8,
        "temperature": 0.0,
        "top_p": 0.9,
    }
    assert SAMPLE["max_tokens"] == 8  # the workload's payload is never changed
    request = Request(seq=3, payload=SAMPLE, max_output_tokens=8)
    mapped = m.map_request(request)
    assert mapped.seq == 3 and mapped.max_output_tokens == 8 and "stream" not in mapped.payload


def test_a_template_keeps_the_types_of_whole_placeholders() -> None:
    m = InputMap(
        template={
            "inputs": "{prompt}",
            "parameters": {"max_new_tokens": "{max_tokens}", "details": True},
            "tag": "p={prompt} n={max_tokens} {{literal}}",
            "list": ["{temperature}", 1],
        }
    )
    assert m.apply(SAMPLE) == {
        "inputs": "hi",
        "parameters": {"max_new_tokens": 8, "details": True},
        "tag": "p=hi n=8 {literal}",
        "list": [0.0, 1],
    }


@pytest.mark.parametrize(
    ("fields", "words"),
    [
        ({"template": {"a": "{prompt}"}, "set": {"b": 1}}, "template replaces the whole input"),
        ({"rename": {"a": "x", "b": "x"}}, "two fields onto one name"),
        ({"rename": {"a": "x"}, "drop": ["a"]}, "both dropped and renamed"),
        ({"template": {"a": "{prompt"}}, "balanced braces"),
        ({"renames": {}}, "Extra inputs"),
        ({"set": {"hf_token": "hf_abc123"}}, "stored with the run"),
        ({"template": {"auth": {"api_key": "k-1234"}, "p": "{prompt}"}}, "stored with the run"),
    ],
)
def test_contradictions_are_refused_when_built(fields: dict[str, Any], words: str) -> None:
    with pytest.raises((ValidationError, ConfigError), match=words):
        InputMap(**fields)


def test_names_the_sample_lacks_are_config_errors() -> None:
    cases = [
        (InputMap(template={"text": "{prompt}", "n": "{max_new_tokens}"}), "x.template.n"),
        (InputMap(rename={"max_token": "n"}), "x.rename.max_token"),
        (InputMap(drop=["streaming"]), "x.drop"),
        (InputMap(rename={"max_tokens": "prompt"}), "x.rename.max_tokens"),  # a clash
    ]
    for mapping, field in cases:
        with pytest.raises(ConfigError) as info:
            mapping.check(SAMPLE, "x")
        assert info.value.field == field, info.value
        assert "prompt" in str(info.value)  # names what the request does have


def test_a_plan_declares_the_map_and_a_bad_one_fails_before_sending(tmp_path: Path) -> None:
    plan = tmp_path / "plan.toml"
    plan.write_text(
        """
[workload]
kind = "llm"

[[targets]]
name = "llama"
provider = "echo-test"
url = "http://127.0.0.1:9"

[targets.input]
rename = { max_tokens = "max_new_tokens" }
drop = ["stream"]
set = { top_p = 0.9 }

[[scenarios]]
kind = "burst"
total = 1
concurrency = 1
"""
    )
    (target,) = load_config(plan).targets
    options = provider_options(target, EchoOptions)
    assert options.input == InputMap(
        rename={"max_tokens": "max_new_tokens"}, drop=("stream",), set={"top_p": 0.9}
    )
    assert options.public()["input"]["rename"] == {"max_tokens": "max_new_tokens"}  # stored

    bad = EchoProvider(url="http://127.0.0.1:9", input=InputMap(template={"q": "{question}"}))
    with pytest.raises(ConfigError) as info:
        Runner({"llama": bad}, LLMCompletion(), [Burst(1, 1)], store=tmp_path / "s.sqlite")
    assert info.value.field == "targets[llama].input.template.q"
    assert not (tmp_path / "s.sqlite").exists()


def strict_model() -> tuple[web.Application, list[dict[str, Any]]]:
    """A model endpoint that, like Cog or a FastAPI schema, refuses inputs it does not know."""
    seen: list[dict[str, Any]] = []

    async def invoke(request: web.Request) -> web.Response:
        body = await request.json()
        seen.append(body)
        unknown = sorted(set(body) - {"text", "temperature"})
        if unknown:
            return web.json_response({"detail": f"unexpected inputs: {unknown}"}, status=422)
        return web.json_response(
            {"output": {"echo": body["text"]}, "id": "r", "queue_ms": 0, "execution_ms": 0}
        )

    app = web.Application()
    app.router.add_post("/invoke", invoke)
    return app, seen


PROBE_MAP = InputMap(rename={"echo": "text"}, drop=["sleep_ms"], set={"temperature": 0})


@pytest.mark.anyio
async def test_every_caller_sends_the_mapped_input(tmp_path: Path) -> None:
    app, seen = strict_model()
    with LoopbackServer(app) as server:
        plain = EchoProvider(url=server.url)
        mapped = EchoProvider(url=server.url, input=PROBE_MAP)
        workload = EchoProbe()
        result = await run(
            {"plain": plain, "mapped": mapped},
            workload,
            [Burst(total=4, concurrency=1)],
            store=tmp_path / "s.sqlite",
        )
        async with mapped:  # a direct call maps too
            direct = await mapped.invoke(workload.request(99))
    with Store(tmp_path / "s.sqlite") as store:
        rows = store.invocations(result.run_id)
    by_target = {t: {r.outcome for r in rows if r.target == t} for t in ("plain", "mapped")}
    assert by_target == {"plain": {Outcome.HTTP_4XX}, "mapped": {Outcome.OK}}
    assert any("unexpected inputs: ['echo', 'sleep_ms']" in (r.error or "") for r in rows)
    assert direct.output == {"echo": "x" * 16}
    assert seen[-1] == {"text": "x" * 16, "temperature": 0}


def test_the_example_maps_sdxls_schema(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "input_map.py"), str(tmp_path / "e.sqlite")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert "as sent: 6 requests, outcomes ['http_4xx'], 0 images" in done.stdout
    # the model's own refusal (FastAPI's validation list), kept in the error field by field
    assert "num_images: Extra inputs are not permitted" in done.stdout
    assert "mapped: 6 requests, outcomes ['ok'], 12 images" in done.stdout


def test_a_credential_constant_is_refused_without_being_shown(tmp_path: Path) -> None:
    plan = tmp_path / "plan.toml"
    plan.write_text(
        """
[[targets]]
name = "m"
provider = "echo-test"
url = "http://127.0.0.1:9"
input = { set = { hf_token = "hf_Zq8rT5vLm2nP0x" } }

[[scenarios]]
kind = "burst"
total = 1
concurrency = 1
"""
    )
    (target,) = load_config(plan).targets
    with pytest.raises(ConfigError) as info:
        provider_options(target, EchoOptions)
    assert "set.hf_token" in str(info.value) and "stored with the run" in str(info.value)
    assert "hf_Zq8rT5vLm2nP0x" not in str(info.value)
