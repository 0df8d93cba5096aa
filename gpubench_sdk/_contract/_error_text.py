"""The message of a JSON error body, for ``status_error``'s ``detail``: the words a server
wrote about its refusal, in place of the start of its raw body.

Services built on FastAPI (kserve's ``ModelServer``, runpod's local API, a user's own) and
most JSON APIs answer an error as ``{"error": "..."}``, ``{"detail": "..."}`` or
``{"message": "..."}``; FastAPI's 422 for a body that fails validation lists each field
instead: ``{"detail": [{"loc": ["body", "inputs", 0], "msg": "Field required", ...}]}``
(https://fastapi.tiangolo.com/tutorial/handling-errors/).

``reclassified`` turns the core's error for a status into the class a provider's protocol
says it is (Cog's 409 "at capacity" is throttling; fal's 504 marked as the caller's own
timeout a ``RequestTimeoutError``)::

    def acme_error(response: httpx.Response) -> ProviderError:
        error = status_error(response, provider="acme", detail=error_text(response, "detail"))
        if response.status_code == 409:  # Acme's "busy": come back later
            return reclassified(error, ThrottledError, retry_after_s=retry_after_s(response))
        return error
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any, Protocol, TypeVar

from .._base._errors import ProviderError

__all__ = ["error_text", "reclassified"]


E = TypeVar("E", bound=ProviderError)


class _JSONBody(Protocol):  # an httpx.Response or a CallResponse, read
    def json(self) -> Any: ...


def error_text(
    response: _JSONBody,
    *fields: str,
    first_only: bool = False,
    hide_loc: Collection[str] = (),
) -> str | None:
    """The text of the first of ``fields`` (by default ``error``, ``detail``, ``message``) in
    ``response``'s JSON object body that holds a non-empty text, or FastAPI's validation list
    as ``loc: msg`` per entry, joined by ``; `` (``first_only``: the first entry alone;
    ``hide_loc``: parts of ``loc`` left out, such as FastAPI's ``body``); ``None`` for any
    other body, which the error then shows itself."""
    try:
        data = response.json()
    except ValueError:
        return None
    if not isinstance(data, dict):
        return None
    for name in fields or _FIELDS:
        detail = data.get(name)
        if isinstance(detail, str) and detail:
            return detail
        if (
            isinstance(detail, list)
            and detail
            and all(isinstance(d, dict) and isinstance(d.get("msg"), str) for d in detail)
        ):
            entries = detail[:1] if first_only else detail
            return "; ".join(f"{_loc(d.get('loc'), hide_loc)}: {d['msg']}" for d in entries)
    return None


_FIELDS = ("error", "detail", "message")


def _loc(loc: Any, hide: Collection[str]) -> str:
    return ".".join(str(part) for part in loc or () if part not in hide)


def reclassified(error: ProviderError, kind: type[E], **fields: Any) -> E:
    """``error`` as a ``kind`` of the error tree: the same message, provider, status and
    request id, and ``fields`` the class takes besides (a ``ThrottledError``'s
    ``retry_after_s``)."""
    message = str(error).removeprefix(f"[{error.provider}] " if error.provider else "")
    return kind(
        message,
        provider=error.provider,
        status_code=error.status_code,
        request_id=error.request_id,
        **fields,
    )
