"""The plugin kit's small readers and guards (``_contract._kit``, ``_jobs``, ``_provider``): each
is what several plugins wrote for themselves, so each is checked here on its own."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from pydantic import SecretStr

from gpubench_sdk import (
    CallResponse,
    ClientHTTPError,
    ConfigError,
    InvalidResponseError,
    Job,
    Provider,
    ProviderOptions,
    Request,
    Result,
    ServerHTTPError,
    ThrottledError,
    TransportError,
    WarmBaseline,
    http_result,
    json_body,
    json_result,
    key_headers,
    naming_errors,
    refused_as_config,
    required,
    stream_error,
    whole_number,
)


def _answer(content: bytes) -> httpx.Response:
    request = httpx.Request("GET", "http://127.0.0.1:1/things?key=s3cret")
    return httpx.Response(200, content=content, request=request)


def test_json_body_is_any_json_value_or_invalid_naming_the_call() -> None:
    assert json_body(_answer(b'["a", 1]'), provider="p") == ["a", 1]
    assert json_body(_answer(b'"text"'), provider="p") == "text"
    with pytest.raises(InvalidResponseError) as info:
        json_body(_answer(b"<html>"), provider="p", problem="the answer is not JSON")
    assert str(info.value) == "[p] GET http://127.0.0.1:1/things: the answer is not JSON"
    with pytest.raises(InvalidResponseError, match="response is not JSON"):
        json_result(_answer(b"<html>"), provider="p")  # json_result reads through it
    assert json_result(_answer(b"[1]"), provider="p").output == [1]


def test_http_result_is_the_answers_status_and_first_byte_and_the_fields_given() -> None:
    answer = _answer(b"ok")
    answer.extensions["gpubench.first_byte_ns"] = 123  # where the measuring client puts it
    result = http_result(answer, output="ok", request_id="r-1", cold=True)
    assert (result.http_status, result.first_byte_ns) == (200, 123)
    assert (result.output, result.request_id, result.cold) == ("ok", "r-1", True)
    assert http_result(answer, first_byte_ns=456).first_byte_ns == 456  # a stream's first piece
    url = httpx.URL("http://127.0.0.1:1/x")
    read = CallResponse(503, {}, b"", 789, "POST", url)  # a PreparedCall's answer
    assert (http_result(read).http_status, http_result(read).first_byte_ns) == (503, 789)


@pytest.mark.parametrize(
    ("value", "read"), [(3, 3), (0, 0), (True, None), (2.0, None), ("4", None)]
)
def test_whole_number_is_an_integer_that_is_no_bool(value: Any, read: int | None) -> None:
    assert whole_number(value) == read


def test_required_gives_the_value_or_names_the_option() -> None:
    assert required("x", "app", "the app's id") == "x"
    assert required(0, "copies", "a count") == 0  # only None is missing
    with pytest.raises(ConfigError) as info:
        required(None, "app", "the app's resource id, to control it")
    assert (info.value.field, info.value.value) == ("app", None)
    assert str(info.value) == "app: got None; expected the app's resource id, to control it"


def test_a_refused_write_is_a_config_error_and_anything_else_passes() -> None:
    refusal = ClientHTTPError("minReplica must be <= maxReplica", provider="p", status_code=400)
    with pytest.raises(ConfigError) as info, refused_as_config("scaling", {"min": 3}, "Acme"):
        raise refusal
    assert info.value.field == "scaling" and info.value.value == {"min": 3}
    assert info.value.expected == f"values Acme accepts ({refusal})"
    assert info.value.__cause__ is refusal
    for other in (ServerHTTPError("down", provider="p"), ThrottledError("busy", provider="p")):
        with pytest.raises(type(other)), refused_as_config("scaling", {}, "Acme"):
            raise other


def test_a_stream_error_is_a_server_error_with_the_start_of_its_detail() -> None:
    error = stream_error({"message": "x" * 500}, provider="p", status_code=200)
    assert isinstance(error, ServerHTTPError) and error.status_code == 200
    assert str(error).startswith("[p] stream error: {'message': 'xxx")
    assert len(str(error)) == len("[p] stream error: ") + 200
    assert stream_error("out of memory", provider="p").status_code is None


def test_the_warm_baseline_judges_and_learns_apart_or_together() -> None:
    warm = WarmBaseline(threshold_ms=100, factor=3, window=3)
    assert warm.median_ms is None and warm.is_cold(150)  # no baseline yet: the threshold alone
    assert warm.median_ms is None  # is_cold learns nothing
    warm.add(60)
    assert not warm.is_cold(150)  # 150 < 3 x 60
    assert warm.is_cold(200) and warm.median_ms == 60
    assert not warm.cold(90) and warm.median_ms == 75  # a warm wait joins the baseline
    assert warm.cold(500) and warm.median_ms == 75  # a cold one does not
    for ms in (10, 20, 30):
        warm.add(ms)
    assert warm.median_ms == 20  # only the last ``window`` waits count


class _Toy(Job[Any]):
    terminal = frozenset({"DONE", "FAILED"})

    async def submit(self) -> None:
        return None

    async def status(self) -> Any:
        return {}

    async def result(self, state: Any) -> Result:
        return Result(output=None)


def test_a_jobs_default_end_is_a_terminal_status() -> None:
    job = _Toy()
    assert job.finished({"status": "DONE"}) and job.finished({"status": "FAILED"})
    assert not job.finished({"status": "RUNNING"}) and not job.finished({})
    assert not job.finished("DONE")  # a state that is no mapping: override finished


def test_naming_errors_names_the_request_known_when_it_fails() -> None:
    call_id: str | None = None
    with pytest.raises(TransportError) as info, naming_errors("p", lambda: call_id):
        call_id = "fc-1"
        raise httpx.ConnectError("refused", request=httpx.Request("GET", "http://h/x"))
    assert info.value.request_id == "fc-1" and info.value.provider == "p"
    assert isinstance(info.value.__cause__, httpx.ConnectError)
    own = ServerHTTPError("failed", provider="p")
    with pytest.raises(ServerHTTPError) as raised, naming_errors("p", lambda: "fc-2"):
        raise own
    assert raised.value is own and own.request_id == "fc-2"  # its id set, itself raised


class _Keyed(Provider):
    name = "keyed"

    async def invoke(self, request: Request) -> Result:
        raise NotImplementedError


@pytest.mark.parametrize("scheme", ["bearer", "api-key", "key", "modal", "none"])
def test_auth_headers_send_the_key_as_the_class_says(scheme: Any) -> None:
    key = SecretStr("id:secret")
    keyed = type("Keyed", (_Keyed,), {"key_scheme": scheme})(ProviderOptions(api_key=key))
    assert keyed.auth_headers() == key_headers(key, scheme)
    assert type("Keyed", (_Keyed,), {"key_scheme": scheme})().auth_headers() == {}
    assert _Keyed(ProviderOptions(api_key=key)).auth_headers() == {
        "Authorization": "Bearer id:secret"  # the default: bearer
    }
