"""``error_text`` and ``reclassified`` (``_contract._error_text``): a provider's error text out
of its JSON body, and a status's error as the class the protocol says it is."""

from __future__ import annotations

from typing import Any

import httpx

from gpubench_sdk import (
    ClientHTTPError,
    RequestTimeoutError,
    ThrottledError,
    error_text,
    reclassified,
    retry_after_s,
    status_error,
)


def _answer(status: int, **kw: Any) -> httpx.Response:
    request = httpx.Request("POST", "https://api.example/v1/predictions")
    return httpx.Response(status, request=request, **kw)


def test_error_text_is_the_first_text_field_of_a_json_object() -> None:
    assert error_text(_answer(422, json={"detail": "bad input"}), "detail", "error") == "bad input"
    assert error_text(_answer(409, json={"error": "busy", "status": "failed"}), "detail", "error")
    # a field that is not a text is passed over; FastAPI's list of problems is read as its fields
    assert error_text(_answer(422, json={"detail": 3, "error": "invalid"}), "detail", "error")
    problems = {"detail": [{"loc": ["body"], "msg": "x"}], "error": "invalid"}
    assert error_text(_answer(422, json=problems), "detail", "error") == "body: x"
    assert error_text(_answer(422, json={"detail": ""}), "detail") is None
    assert error_text(_answer(500, text="<html>oops</html>"), "detail") is None
    assert error_text(_answer(500, json=["not", "an", "object"]), "detail") is None


def test_reclassified_keeps_the_message_provider_status_and_request_id() -> None:
    response = _answer(409, json={"error": "At capacity"}, headers={"Retry-After": "3"})
    error = status_error(response, provider="acme", detail="At capacity", request_id="r1")
    assert isinstance(error, ClientHTTPError)
    busy = reclassified(error, ThrottledError, retry_after_s=retry_after_s(response))
    assert isinstance(busy, ThrottledError) and str(busy) == str(error)
    assert (busy.provider, busy.status_code, busy.request_id) == ("acme", 409, "r1")
    assert busy.retry_after_s == 3.0
    late = reclassified(error, RequestTimeoutError)
    assert str(late).count("[acme]") == 1 and late.outcome is RequestTimeoutError.outcome
