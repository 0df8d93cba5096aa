"""The options of a provider invoked by one held POST to a service's own URL (a container
platform's ingress: Azure Container Apps, Cloud Run), the call ``held_json_call`` makes: where
on the URL the payload goes, the header naming the request, and the first-byte threshold a
``ColdMark`` infers a cold start by where the platform says nothing of it."""

from __future__ import annotations

import httpx
from pydantic import Field

from ._provider import ProviderOptions


class IngressOptions(ProviderOptions):
    """``path``, ``request_id_header`` and ``cold_threshold_ms`` for a provider that POSTs the
    payload to its service's URL and holds the request for the answer; the provider adds the
    URL itself (given, or read from its control plane)."""

    path: str = Field(default="/", pattern=r"^/", description="path the payload is POSTed to")
    request_id_header: str = Field(
        default="x-request-id", description="response header carrying the request id"
    )
    cold_threshold_ms: float | None = Field(
        default=None,
        gt=0,
        description="infer 'cold' when the first byte takes longer (None: no guess)",
    )

    def invoke_url(self, base: str) -> httpx.URL:
        """Where the payload goes: ``path`` on the service's ``base`` URL."""
        return httpx.URL(base.rstrip("/") + self.path)
