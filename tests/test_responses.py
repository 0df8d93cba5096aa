"""``invalid_response`` and ``json_object``: the plugin's own verdict on a 200, naming the call."""

from __future__ import annotations

import httpx
import pytest

from gpubench_sdk import InvalidResponseError, invalid_response, json_object, remember


def _answer(body: bytes, url: str = "https://api.example/v1/jobs?wait=1") -> httpx.Response:
    return httpx.Response(200, content=body, request=httpx.Request("POST", url))


def test_invalid_response_names_the_call_without_query_or_credentials() -> None:
    remember("s3cr3t-token-value")
    url = "https://user:s3cr3t-token-value@api.example/v1/jobs?token=s3cr3t-token-value"
    error = invalid_response(_answer(b"{}", url), "the answer has no id", provider="acme")
    assert isinstance(error, InvalidResponseError) and error.status_code == 200
    assert str(error).startswith("[acme] POST https://")
    assert str(error).endswith("api.example/v1/jobs: the answer has no id")
    assert "s3cr3t" not in str(error) and "token=" not in str(error)


def test_json_object_reads_an_object_and_refuses_anything_else() -> None:
    assert json_object(_answer(b'{"id": "j1"}'), provider="acme") == {"id": "j1"}
    with pytest.raises(InvalidResponseError, match=r"jobs: response is not JSON$") as info:
        json_object(_answer(b'{"id": "j1'), provider="acme")
    assert isinstance(info.value.__cause__, ValueError)
    with pytest.raises(InvalidResponseError, match="not a JSON object: list"):
        json_object(_answer(b"[1, 2]"), provider="acme")
