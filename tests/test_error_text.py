"""``error_text``: a JSON error body's own words for ``status_error``'s ``detail``, FastAPI's
422 field list included (read from a real FastAPI app over loopback)."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from pydantic import BaseModel

from gpubench_sdk import error_text, status_error
from gpubench_sdk.testing import serve


def _answer(body: Any, status: int = 400) -> httpx.Response:
    request = httpx.Request("POST", "http://127.0.0.1:1/predict")
    if isinstance(body, bytes):
        return httpx.Response(status, content=body, request=request)
    return httpx.Response(status, json=body, request=request)


@pytest.mark.parametrize(
    ("body", "text"),
    [
        ({"error": "model not loaded"}, "model not loaded"),
        ({"detail": "Not Found"}, "Not Found"),
        ({"message": "slow down", "code": 7}, "slow down"),
        ({"error": "", "detail": "the second is read"}, "the second is read"),
        ({"error": {"message": "nested"}}, None),  # not text: the body is shown instead
        ({"detail": [{"loc": ["x"], "msg": 3}]}, None),  # not FastAPI's list
        ([1, 2], None),
        (b"<html>bad gateway</html>", None),
    ],
)
def test_the_documented_message_or_none(body: Any, text: str | None) -> None:
    assert error_text(_answer(body)) == text


def test_a_validation_list_names_each_field_or_the_first() -> None:
    detail = [
        {"type": "missing", "loc": ["body", "inputs", 0, "shape"], "msg": "Field required"},
        {"type": "bytes_type", "loc": ["body", "InferenceRequest"], "msg": "not bytes"},
    ]
    response = _answer({"detail": detail}, 422)
    assert error_text(response) == (
        "body.inputs.0.shape: Field required; body.InferenceRequest: not bytes"
    )
    hidden = error_text(response, first_only=True, hide_loc=("body",))
    assert hidden == "inputs.0.shape: Field required"
    error = status_error(response, provider="p", detail=hidden)
    assert str(error).endswith("HTTP 422 Unprocessable Entity: inputs.0.shape: Field required")


class Body(BaseModel):  # at module level: FastAPI resolves the handler's annotation here
    prompt: str
    n: int


def test_fastapis_own_422_over_loopback() -> None:
    fastapi = pytest.importorskip("fastapi")
    app = fastapi.FastAPI()

    @app.post("/predict")
    async def predict(body: Body) -> dict[str, Any]:
        return body.model_dump()

    with serve(app) as served:
        response = httpx.post(f"{served.url}/predict", json={"n": "many"})
    assert response.status_code == 422
    text = error_text(response, hide_loc=("body",))
    assert text is not None
    assert text.startswith("prompt: Field required; n: Input should be a valid integer")
