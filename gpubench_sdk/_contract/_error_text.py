"""The message of a JSON error body, for ``status_error``'s ``detail``: the words a server
wrote about its refusal, in place of the start of its raw body.

Services built on FastAPI (kserve's ``ModelServer``, runpod's local API, a user's own) and
most JSON APIs answer an error as ``{"error": "..."}``, ``{"detail": "..."}`` or
``{"message": "..."}``; FastAPI's 422 for a body that fails validation lists each field
instead: ``{"detail": [{"loc": ["body", "inputs", 0], "msg": "Field required", ...}]}``
(https://fastapi.tiangolo.com/tutorial/handling-errors/).
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any, Protocol

__all__ = ["error_text"]


class _JSONBody(Protocol):  # an httpx.Response or a CallResponse, read
    def json(self) -> Any: ...


def error_text(
    response: _JSONBody, *, first_only: bool = False, hide_loc: Collection[str] = ()
) -> str | None:
    """The text of ``response``'s JSON ``error``, ``detail`` or ``message`` (the first that is
    set), or FastAPI's validation list as ``loc: msg`` per entry, joined by ``; ``
    (``first_only``: the first entry alone; ``hide_loc``: parts of ``loc`` left out, such as
    FastAPI's ``body``); ``None`` for any other body, which the error then shows itself."""
    try:
        data = response.json()
    except ValueError:
        return None
    if not isinstance(data, dict):
        return None
    detail = data.get("error") or data.get("detail") or data.get("message")
    if (
        isinstance(detail, list)
        and detail
        and all(isinstance(d, dict) and isinstance(d.get("msg"), str) for d in detail)
    ):
        entries = detail[:1] if first_only else detail
        return "; ".join(f"{_loc(d.get('loc'), hide_loc)}: {d['msg']}" for d in entries)
    return detail if isinstance(detail, str) else None


def _loc(loc: Any, hide: Collection[str]) -> str:
    return ".".join(str(part) for part in loc or () if part not in hide)
