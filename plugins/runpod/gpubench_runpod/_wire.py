"""Sending one RunPod request and reading the job in its answer.

HTTP statuses, timeouts and broken connections become the core's ``ProviderError``s
(``as_provider_error``): each names the method, the URL without credentials, the status and the
start of the body (RunPod's ``{"error": ...}``, FastAPI's ``{"detail": ...}`` from runpod's
local API server), so a 404 from a wrong base URL or a 405 from a server that wants another
method explains itself; a 429's ``Retry-After`` is read in seconds or as an HTTP date.
"""

from __future__ import annotations

import math
from typing import Any

import httpx

from gpubench_sdk import as_provider_error, invalid_response, json_object

from . import _protocol as rp

PROVIDER = "runpod"


async def send(
    client: httpx.AsyncClient,
    method: str,
    url: httpx.URL,
    headers: dict[str, str],
    body: Any = None,
) -> httpx.Response:
    """One request; a status >= 400, a timeout or a broken connection raises ``ProviderError``."""
    try:
        response = await client.request(method, url, json=body, headers=headers)
        return response.raise_for_status()
    except httpx.HTTPError as exc:
        raise as_provider_error(exc, provider=PROVIDER) from exc


def job_of(response: httpx.Response) -> dict[str, Any]:
    """The job in an answer of /run, /runsync or /status, with a status RunPod defines."""
    job = json_object(response, provider=PROVIDER)
    if "id" not in job or job.get("status") not in rp.TERMINAL_STATES | rp.PENDING_STATES:
        problem = f"not a job: status {job.get('status')!r}"
        raise invalid_response(response, problem, provider=PROVIDER)
    return job


def number(value: Any) -> float | None:
    if isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value):
        return float(value)
    return None
