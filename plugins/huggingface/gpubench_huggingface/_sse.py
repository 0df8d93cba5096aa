"""TGI's stream events as JSON objects (the events themselves: ``gpubench_sdk.sse_events``)."""

from __future__ import annotations

import json
from typing import Any

from gpubench_sdk import InvalidResponseError


def json_event(data: str, provider: str) -> dict[str, Any]:
    """An event's data as the JSON object TGI sends; ``InvalidResponseError`` if it is not."""
    try:
        event = json.loads(data)
    except ValueError as exc:
        raise InvalidResponseError("a stream event is not JSON", provider=provider) from exc
    if not isinstance(event, dict):
        raise InvalidResponseError("a stream event is not a JSON object", provider=provider)
    return event
