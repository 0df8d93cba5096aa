"""Keeping credentials out of every artifact.

Secrets enter gpubench only through ``resolve_secret`` (from an environment variable or a file)
as ``pydantic.SecretStr``, whose repr is masked. Every resolved value is also remembered here so
that ``redact`` can scrub it from any text that leaves the process (error messages, logs, stored
rows) as a second line of defence, e.g. when a provider echoes the key back in an error body.
"""

from __future__ import annotations

import os
import re
import threading
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from pydantic import SecretStr

from ._errors import ConfigError

# Names (of headers, query parameters, options) whose values are credentials.
SENSITIVE = re.compile(
    r"auth(orization)?$|api[-_]?key|(^|[-_])key$|token$|secret|cookie|passw(or)?d"
    r"|credentials?$|signature$",
    re.IGNORECASE,
)
_known: set[str] = set()
_lock = threading.Lock()
MASK = "***"


def remember(value: str) -> None:
    """Register a secret value so ``redact`` removes it from text."""
    if len(value) >= 4:  # shorter strings would redact ordinary text
        with _lock:
            _known.add(value)


def redact(text: str) -> str:
    """Replace every remembered secret in ``text`` with ``***``."""
    if not _known:
        return text
    for value in tuple(_known):
        if value in text:
            text = text.replace(value, MASK)
    return text


def resolve_secret(field: str, *, env: str | None, file: str | None) -> SecretStr | None:
    """Read a secret from the named environment variable or file; ``None`` if neither is given."""
    if env and file:
        raise ConfigError(field, {"env": env, "file": file}, "only one of *_env or *_file")
    if env:
        value = os.environ.get(env)
        if not value:
            raise ConfigError(
                f"{field}_env", env, f"an environment variable that is set: export {env}=..."
            )
    elif file:
        path = Path(file).expanduser()
        try:
            value = path.read_text(encoding="utf-8").strip()
        except OSError as exc:
            raise ConfigError(f"{field}_file", file, f"a readable file ({exc.strerror})") from None
        if not value:
            raise ConfigError(f"{field}_file", file, "a file that contains the secret")
    else:
        return None
    remember(value)
    return SecretStr(value)


def scrub_url(url: str) -> str:
    """``url`` without user:password and with credential query values masked (and remembered)."""
    parts = urlsplit(url)
    if parts.password:
        remember(parts.password)
    netloc = parts.hostname or ""
    if parts.port:
        netloc += f":{parts.port}"
    query = []
    for name, value in parse_qsl(parts.query, keep_blank_values=True):
        if SENSITIVE.search(name):
            remember(value)
            value = MASK
        query.append((name, value))
    return urlunsplit((parts.scheme, netloc, parts.path, urlencode(query, safe="*"), ""))


def scrub(data: Any) -> Any:
    """A JSON-like structure with credential-named values masked and URLs scrubbed.

    Used for everything stored with a run (plan, provider options), as a second line of
    defence behind refusing secrets in plans: a header or option whose name says "token",
    "key", "authorization"... never reaches the store in clear.
    """
    if isinstance(data, dict):
        out = {}
        for key, value in data.items():
            if (
                isinstance(value, str)
                and SENSITIVE.search(str(key))
                and not str(key).endswith(("_env", "_file"))
            ):
                remember(value)
                out[key] = MASK
            else:
                out[key] = scrub(value)
        return out
    if isinstance(data, list):
        return [scrub(v) for v in data]
    if isinstance(data, str) and data.startswith(("http://", "https://")):
        return scrub_url(data)
    return data
