"""Two steps of a plugin's reader of error answers, written by each plugin until now: the
provider's error text out of a JSON body (``error_text``), and a status's error turned into the
class the provider's protocol says it is (``reclassified``: Cog's 409 is throttling, fal's 504
with ``X-Fal-Request-Timeout-Type`` a timeout)::

    def acme_error(response: httpx.Response) -> ProviderError:
        text = error_text(response, "detail", "error")
        error = status_error(response, provider="acme", detail=text)
        if response.status_code == 409:  # Acme's "busy": come back later
            return reclassified(error, ThrottledError, retry_after_s=retry_after_s(response))
        return error
"""

from __future__ import annotations

from typing import Any, TypeVar

import httpx

from .._base._errors import ProviderError

E = TypeVar("E", bound=ProviderError)


def error_text(response: httpx.Response, *fields: str) -> str | None:
    """The first of ``fields`` in ``response``'s JSON object body that is a non-empty string
    (the provider's documented error text), else None: a body that is not JSON, not an
    object, or without such a field."""
    try:
        data = response.json()
    except ValueError:
        return None
    if not isinstance(data, dict):
        return None
    for name in fields:
        if isinstance(text := data.get(name), str) and text:
            return text
    return None


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
