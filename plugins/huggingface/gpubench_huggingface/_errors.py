"""HTTP answers mapped into gpubench's error taxonomy, by the protocol that sent them."""

from __future__ import annotations

import httpx

from gpubench_sdk import ClientHTTPError, ProviderError, ServerHTTPError, status_error


class HandlerError(ServerHTTPError):
    """The model failed on a well-formed request: TGI's 424 generation error, or the toolkit's
    400 ``{"error"}`` (it answers every handler exception so). ``status_code`` is kept."""


def http_error(response: httpx.Response, provider: str, toolkit: bool) -> ProviderError:
    """The error for a 4xx/5xx answer; ``toolkit``: it came from the toolkit's ``POST /``.

    The core's (``as_provider_error``: the call named, a 429's ``Retry-After`` read in seconds
    or as an HTTP date), showing TGI's and the toolkit's ``{"error"}`` text; a client error that
    is really the model failing becomes ``HandlerError``."""
    detail = error_type = None
    try:
        data = response.json()
        if isinstance(data, dict):
            detail, error_type = data.get("error"), data.get("error_type")
    except ValueError:
        pass
    text = detail if isinstance(detail, str) else None
    error = status_error(response, provider=provider, detail=text)
    status = response.status_code
    if isinstance(error, ClientHTTPError) and (
        status == 424 or error_type == "generation" or (status == 400 and toolkit and text)
    ):
        message = str(error).removeprefix(f"[{provider}] ")
        return HandlerError(message, provider=provider, status_code=status)
    return error
