"""ID tokens for invoking private Cloud Run services: fetched with google-auth, cached, and
refreshed ahead of expiry, so the hot path reads a cached string.

Cloud Run checks ``Authorization: Bearer <ID token>`` whose audience is the service URL
(https://cloud.google.com/run/docs/authenticating/service-to-service). google-auth's
``google.oauth2.id_token.fetch_id_token_credentials(audience, request)`` makes such
credentials from the environment (a service-account key in GOOGLE_APPLICATION_CREDENTIALS, or
the metadata server on Google Cloud), following https://google.aip.dev/auth/4110.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from datetime import UTC
from typing import Any, Protocol

import anyio

from gpubench_sdk import remember

# Google ID tokens live one hour; google-auth itself refreshes 3 min 45 s before expiry
# (google.auth._helpers.REFRESH_THRESHOLD). Five minutes keeps a request that is slow to be
# sent from carrying a token that expires on the way.
REFRESH_MARGIN_S = 300.0


@dataclass(frozen=True, slots=True)
class IdToken:
    """An ID token and when it expires (``time.time()`` seconds). ``repr`` hides the token."""

    token: str = field(repr=False)
    expires_at_s: float


class IdTokenSource(Protocol):
    """Mints an ID token for an audience. Called in a worker thread: it may block."""

    def __call__(self, audience: str) -> IdToken: ...


def google_id_token(audience: str) -> IdToken:
    """An ID token for ``audience`` from the environment's Google credentials (google-auth)."""
    import google.auth.transport.requests
    import google.oauth2.id_token

    request = google.auth.transport.requests.Request()
    fetch: Any = google.oauth2.id_token.fetch_id_token_credentials  # untyped in google-auth
    credentials: Any = fetch(audience, request)
    credentials.refresh(request)
    # google-auth's expiry is a naive datetime in UTC
    expiry = credentials.expiry
    expires_at_s = (
        expiry.replace(tzinfo=UTC).timestamp() if expiry is not None else time.time() + 3600.0
    )
    return IdToken(str(credentials.token), expires_at_s)


class CachedIdToken:
    """One audience's token, minted on first use and again ``REFRESH_MARGIN_S`` before it
    expires. Concurrent requests that find it stale wait for a single refresh."""

    def __init__(self, source: IdTokenSource, audience: str) -> None:
        self._source = source
        self._audience = audience
        self._token: IdToken | None = None
        self._lock = anyio.Lock()
        self.refreshes = 0  # how many tokens were minted (tests and logs read it)

    def _fresh(self) -> str | None:
        token = self._token
        if token is not None and token.expires_at_s - time.time() > REFRESH_MARGIN_S:
            return token.token
        return None

    async def get(self) -> str:
        if (token := self._fresh()) is not None:
            return token
        async with self._lock:
            if (token := self._fresh()) is not None:
                return token
            minted = await anyio.to_thread.run_sync(self._source, self._audience)
            remember(minted.token)  # scrubbed from any error text that leaves the process
            self._token = minted
            self.refreshes += 1
            return minted.token
