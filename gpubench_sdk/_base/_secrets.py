"""Keeping credentials out of every artifact.

Secrets enter gpubench only through ``resolve_secret`` (from an environment variable or a file)
as ``pydantic.SecretStr``, whose repr is masked. Every resolved value is also remembered here so
that ``redact`` can scrub it from any text that leaves the process (error messages, logs, stored
rows) as a second line of defence, e.g. when a provider echoes the key back in an error body.

Header values and URL query values are secret by default (default-deny): a service may take
its key in any header (``X-Authentication``, ``Ocp-Apim-Subscription-Key``...) or query
parameter (Azure Functions' ``code``, a SAS token's ``sig``), and no list of credential names
can know them all. Only the values of the names in ``PUBLIC_HEADERS`` and ``PUBLIC_QUERY``,
which describe a request and cannot carry a credential, are kept in clear.
"""

from __future__ import annotations

import logging
import re
import threading
from collections.abc import Mapping
from typing import Any
from urllib.parse import parse_qsl, quote, quote_plus, urlencode, urlsplit, urlunsplit

# Names (of options, and also of headers and query parameters) whose values are credentials.
SENSITIVE = re.compile(
    r"auth(orization)?$|api[-_]?key|(^|[-_])key$|token$|secret|cookie|passw(or)?d"
    r"|credentials?$|signature$",
    re.IGNORECASE,
)
#: Request headers whose values are kept in clear; every other header's value is masked.
PUBLIC_HEADERS = frozenset(
    {
        "accept",
        "accept-encoding",
        "accept-language",
        "cache-control",
        "connection",
        "content-encoding",
        "content-length",
        "content-type",
        "prefer",  # RunPod/Replicate "Prefer: wait"
        "user-agent",
    }
)
#: URL query parameters whose values are kept in clear; every other parameter's is masked.
PUBLIC_QUERY = frozenset({"api-version", "api_version", "format", "stream", "timeout", "wait"})
# Values that only default-deny marks as secret are remembered for ``redact`` from this length:
# shorter ones ("on", "1", "true") are no credential and would mask ordinary words in messages.
_PRESUMED_MIN = 8
# A credential written in a value itself: an HTTP auth scheme followed by its token.
_AUTH_VALUE = re.compile(
    r"\b(Bearer|Basic|Token|Digest|ApiKey|SharedAccessSignature)\s+[^\s'\"]+", re.IGNORECASE
)
_known: set[str] = set()
_lock = threading.Lock()
MASK = "***"


def remember(value: str) -> None:
    """Register a secret value so ``redact`` removes it from text."""
    if len(value) >= 4:  # shorter strings would redact ordinary text
        with _lock:
            _known.add(value)


def _presume(value: str) -> str:
    """A value default-deny masks: remembered when long enough to be a credential, in every
    form it may be echoed in (as sent, URL-encoded, and the token after an auth scheme)."""
    forms = {value, quote(value, safe=""), quote_plus(value)}
    scheme = _AUTH_VALUE.fullmatch(value.strip())
    if scheme is not None:
        forms.add(value.strip().split(None, 1)[1])
    for form in forms:
        if len(form) >= _PRESUMED_MIN:
            remember(form)
    return MASK


def redact(text: str) -> str:
    """Replace every remembered secret in ``text`` with ``***``."""
    if not _known:
        return text
    for value in tuple(_known):
        if value in text:
            text = text.replace(value, MASK)
    return text


def without_secrets(env: Mapping[str, str]) -> dict[str, str]:
    """``env`` (an environment) without the variables that hold a remembered secret: a child
    process running user code gets no credential it was not given (e.g. the variable that
    ``api_key_env`` names)."""
    with _lock:
        known = tuple(_known)
    return {k: v for k, v in env.items() if not any(secret in v for secret in known)}


class RedactingFilter(logging.Filter):
    """Masks remembered secrets in a log record: installed on the HTTP clients' loggers, which
    log every request's full URL (query credentials included) at INFO."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        masked = redact(message)
        if masked != message:
            record.msg, record.args = masked, None
        return True


for _name in ("httpx", "httpcore"):
    logging.getLogger(_name).addFilter(RedactingFilter())


def mask_credentials(text: str) -> str:
    """``redact`` plus any ``Bearer <token>``-like credential written in the text itself."""
    return _AUTH_VALUE.sub(lambda m: f"{m.group(1)} {MASK}", redact(text))


def is_public_header(name: str) -> bool:
    return name.strip().lower() in PUBLIC_HEADERS


def scrub_headers(headers: Mapping[str, Any]) -> dict[str, Any]:
    """``headers`` with every value masked except those of ``PUBLIC_HEADERS``."""
    return {
        k: v if is_public_header(str(k)) or not isinstance(v, str) else _presume(v)
        for k, v in headers.items()
    }


def scrub_url(url: str) -> str:
    """``url`` without user:password and with every query value masked (and remembered)
    except those of ``PUBLIC_QUERY``; the fragment is dropped."""
    try:
        parts = urlsplit(url)
        password, hostname, port = parts.password, parts.hostname, parts.port
    except ValueError:  # a malformed URL (bad port, brackets): no userinfo, query or fragment
        return re.sub(r"//[^/@]*@", "//", re.split(r"[?#]", url, maxsplit=1)[0])
    if password:
        remember(password)
    netloc = hostname or ""
    if port:
        netloc += f":{port}"
    query = []
    for name, value in parse_qsl(parts.query, keep_blank_values=True):
        if value and name.lower() not in PUBLIC_QUERY:
            if SENSITIVE.search(name):
                remember(value)
            value = _presume(value)
        query.append((name, value))
    for raw in parts.query.split("&"):  # the value as written, e.g. still percent-encoded
        name, _, written = raw.partition("=")
        if name.lower() not in PUBLIC_QUERY and len(written) >= _PRESUMED_MIN:
            remember(written)
    return urlunsplit((parts.scheme, netloc, parts.path, urlencode(query, safe="*"), ""))


def scrub(data: Any) -> Any:
    """A JSON-like structure with credential-named values masked and URLs scrubbed.

    Used for everything stored with a run (plan, provider options), as a second line of
    defence behind refusing secrets in plans: an option whose name says "token", "key",
    "authorization"..., any header but the few public ones (``scrub_headers``) and any URL
    query value but the public ones (``scrub_url``) never reach the store in clear.
    """
    if isinstance(data, dict):
        out: dict[Any, Any] = {}
        for key, value in data.items():
            name = str(key)
            if isinstance(value, str) and SENSITIVE.search(name) and not name.endswith(_REFS):
                remember(value)
                out[key] = MASK
            elif isinstance(value, dict) and name.lower().endswith("headers"):
                out[key] = {k: scrub(v) for k, v in scrub_headers(value).items()}
            else:
                out[key] = scrub(value)
        return out
    if isinstance(data, list | tuple):
        return [scrub(v) for v in data]
    if isinstance(data, str) and data.startswith(("http://", "https://")):
        return scrub_url(data)
    return data


_REFS = ("_env", "_file")  # references to where a secret is, never the secret itself
