"""A job API's answer about one job (a submit's or a status read's), checked before a plugin
reads it: a JSON object naming the job, in a state the API documents."""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

import httpx

from .._transport._responses import invalid_response, json_object

__all__ = ["job_state"]


def job_state(
    response: httpx.Response,
    states: Collection[str],
    *,
    provider: str,
    what: str = "a job",
    key: str = "status",
    id_key: str | None = None,
) -> dict[str, Any]:
    """``response``'s JSON object, whose ``key`` is one of ``states`` (the pending and the
    terminal ones) and, with ``id_key``, which names its job there; else the
    ``InvalidResponseError`` ``not {what}: status '...'`` naming the call (a JSON error of its
    own where it is no JSON object)."""
    state = json_object(response, provider=provider)
    if state.get(key) not in states or (id_key is not None and state.get(id_key) in (None, "")):
        problem = f"not {what}: {key} {state.get(key)!r}"
        raise invalid_response(response, problem, provider=provider)
    return state
