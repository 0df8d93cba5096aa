"""The one exception tree of gpubench.

Every error gpubench raises derives from ``GpubenchError``::

    GpubenchError
    ├── ConfigError               bad config file, CLI value or option: names field, value, fix
    ├── PluginError
    │   ├── PluginNotFoundError   no installed plugin by that name (with an install hint)
    │   └── PluginLoadError       the plugin is installed but fails to import or has the wrong type
    ├── StoreError                the results store cannot be opened, written or read
    ├── ResourceError             the machine ran out of something the run needs (open files)
    ├── CapabilityError           a provider was asked for an optional capability it lacks
    └── ProviderError             one request to a provider failed; ``outcome`` says how
        ├── ThrottledError        429 or a provider's own throttling signal (``retry_after_s``)
        ├── ColdTimeoutError      the provider did not get a worker ready in time
        ├── HTTPStatusError       a non-success HTTP status
        │   ├── ClientHTTPError   4xx other than 429
        │   └── ServerHTTPError   5xx
        ├── RequestTimeoutError   the request's own deadline passed
        ├── TransportError        connection refused/reset, DNS, TLS, truncated body
        └── InvalidResponseError  the provider answered, but not with what its protocol promises

Provider plugins raise the most specific ``ProviderError`` they can (``raise ... from exc``);
the runner also maps plain ``httpx`` errors, so ``response.raise_for_status()`` is enough.
Messages never contain credentials: see ``gpubench_sdk._base._secrets``.
"""

from __future__ import annotations

from typing import Any

from ._secrets import SENSITIVE, is_public_header, mask_credentials, redact, scrub
from ._types import Outcome


class GpubenchError(Exception):
    """Root of every error raised by gpubench."""


class ConfigError(GpubenchError, ValueError):
    """A configuration value is wrong. ``field`` is its dotted path, ``expected`` the fix."""

    def __init__(
        self, field: str, value: Any, expected: str, *, message: str | None = None
    ) -> None:
        self.field = field
        self.value = value
        self.expected = expected
        super().__init__(message or f"{field}: got {_shown(field, value)}; expected {expected}")


def _shown(field: str, value: Any) -> str:
    """``value`` as an error may show it: masked by the field's name, by the secrets this
    process knows and by credential patterns *before* it is shortened, so that a cut can never
    leave a prefix of a key that the mask would no longer recognise."""
    parts = field.split(".")
    last = parts[-1].split("[", 1)[0]
    in_headers = len(parts) > 1 and parts[-2].lower().endswith("headers")
    if isinstance(value, str) and (
        (SENSITIVE.search(last) and not last.endswith(("_env", "_file")))
        or (in_headers and not is_public_header(last))
    ):
        return "'(hidden)'"
    shown = mask_credentials(repr(scrub(value)))
    return shown if len(shown) <= 80 else shown[:77] + "..."


class PluginError(GpubenchError):
    """A provider or workload plugin cannot be used."""


class PluginNotFoundError(PluginError, LookupError):
    """No plugin is installed under the requested name."""


class PluginLoadError(PluginError, ImportError):
    """The plugin is installed but importing it failed or it is not the right type."""


class StoreError(GpubenchError):
    """The results store cannot be opened, written or read."""


class ResourceError(GpubenchError):
    """The machine ran out of something the run needs (open files...); says which and the fix."""


class CapabilityError(GpubenchError, NotImplementedError):
    """The provider does not offer the optional capability that was asked for."""

    def __init__(self, provider: str, capability: str) -> None:
        self.provider = provider
        self.capability = capability
        super().__init__(f"provider {provider!r} does not support {capability!r}")


class ProviderError(GpubenchError):
    """One request to a provider failed. ``outcome`` is its place in the error taxonomy."""

    outcome: Outcome = Outcome.INVALID_RESPONSE

    def __init__(
        self,
        message: str,
        *,
        provider: str | None = None,
        status_code: int | None = None,
        request_id: str | None = None,
    ) -> None:
        self.provider = provider
        self.status_code = status_code
        self.request_id = request_id
        prefix = f"[{provider}] " if provider else ""
        # Messages often quote a provider's answer, which may echo the request's credentials:
        # every remembered secret is masked here, so no plugin has to remember to do it.
        super().__init__(redact(prefix + message))


class ThrottledError(ProviderError):
    """The provider refused the request for rate or capacity (HTTP 429 and equivalents)."""

    outcome = Outcome.THROTTLED

    def __init__(self, message: str, *, retry_after_s: float | None = None, **kw: Any) -> None:
        self.retry_after_s = retry_after_s
        super().__init__(message, **kw)


class ColdTimeoutError(ProviderError):
    """No worker became ready before the provider or the scenario gave up."""

    outcome = Outcome.COLD_TIMEOUT


class JobCancelledError(ProviderError):
    """The provider reports the request's job cancelled, though this client did not cancel it
    (another client, the platform, or a queue-time limit did)."""

    outcome = Outcome.CANCELLED


class HTTPStatusError(ProviderError):
    """A non-success HTTP status that is not throttling."""


class ClientHTTPError(HTTPStatusError):
    outcome = Outcome.HTTP_4XX


class ServerHTTPError(HTTPStatusError):
    outcome = Outcome.HTTP_5XX


class RequestTimeoutError(ProviderError):
    outcome = Outcome.TIMEOUT


class TransportError(ProviderError):
    outcome = Outcome.TRANSPORT


class InvalidResponseError(ProviderError):
    outcome = Outcome.INVALID_RESPONSE
