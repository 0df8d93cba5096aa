"""``job_state``: a job API's answer checked before it is read (a JSON object, a documented
state, the job named), else ``InvalidResponseError`` naming the call."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from gpubench_sdk import InvalidResponseError, job_state

STATES = frozenset({"QUEUED", "DONE"})


def _answer(body: Any) -> httpx.Response:
    request = httpx.Request("GET", "http://127.0.0.1:1/status/j-1")
    if isinstance(body, bytes):
        return httpx.Response(200, content=body, request=request)
    return httpx.Response(200, json=body, request=request)


def test_a_documented_state_is_the_answer() -> None:
    body = {"id": "j-1", "status": "DONE", "output": 3}
    assert job_state(_answer(body), STATES, provider="p", id_key="id") == body
    assert job_state(_answer({"state": "QUEUED"}), STATES, provider="p", key="state")


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ({"id": "j-1", "status": "WHAT"}, "not a job: status 'WHAT'"),
        ({"id": "j-1"}, "not a job: status None"),
        ({"status": "DONE"}, "not a job: status 'DONE'"),  # no id where one is required
        ({"id": "", "status": "DONE"}, "not a job: status 'DONE'"),
    ],
)
def test_anything_else_is_invalid_naming_the_call(body: Any, message: str) -> None:
    with pytest.raises(InvalidResponseError) as info:
        job_state(_answer(body), STATES, provider="p", id_key="id")
    assert str(info.value) == f"[p] GET http://127.0.0.1:1/status/j-1: {message}"
    assert info.value.status_code == 200


def test_what_names_the_thing_and_a_body_that_is_no_object_is_invalid_too() -> None:
    with pytest.raises(InvalidResponseError, match="not a prediction: status 'x'"):
        job_state(_answer({"status": "x"}), STATES, provider="p", what="a prediction")
    for body in ([1], b"<html>"):
        with pytest.raises(InvalidResponseError):
            job_state(_answer(body), STATES, provider="p")
