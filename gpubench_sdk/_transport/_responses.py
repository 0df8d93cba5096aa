"""A provider's answer that its protocol does not allow: the ``InvalidResponseError`` that says
which call answered what.

``as_provider_error`` already covers what the transport knows (a status, a timeout, a reset);
these two cover what only the plugin knows: that a 200's body is not JSON, not an object, or
lacks the field the protocol promises. They name the call the same way (method and URL without
credentials or query), so every error of a plugin reads alike.
"""

from __future__ import annotations

from typing import Any

import httpx

from .._base._errors import InvalidResponseError
from .._base._secrets import scrub_url


def invalid_response(
    response: httpx.Response, problem: str, *, provider: str
) -> InvalidResponseError:
    """``InvalidResponseError`` for ``problem`` with ``response``, naming the call and carrying
    its status: ``raise invalid_response(response, "the answer has no request_id",
    provider=self.name)`` reads ``[name] POST https://host/path: the answer has no request_id``.
    """
    request = response.request
    where = f"{request.method} {scrub_url(str(request.url)).split('?', 1)[0]}"
    return InvalidResponseError(
        f"{where}: {problem}", provider=provider, status_code=response.status_code
    )


def json_object(response: httpx.Response, *, provider: str) -> dict[str, Any]:
    """The response's body as a JSON object; ``invalid_response`` when it is not JSON, or JSON
    of another type (a list, a string), so a plugin can read fields with ``.get``."""
    try:
        data = response.json()
    except ValueError as exc:
        raise invalid_response(response, "response is not JSON", provider=provider) from exc
    if not isinstance(data, dict):
        raise invalid_response(
            response, f"response is not a JSON object: {type(data).__name__}", provider=provider
        )
    return data
