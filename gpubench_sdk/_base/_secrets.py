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

import base64
import contextlib
import logging
import re
import threading
from collections.abc import Mapping
from typing import Any
from urllib.parse import parse_qsl, quote, quote_plus, unquote, urlencode, urlsplit, urlunsplit

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
_snapshot: tuple[str, ...] = ()  # _known as of its last change: what redact scans
# Values whose forms are already in _known: the fast path of calls made per request (the
# transport's, scrub_url's for each span), which would otherwise encode the value each time.
_remembered: set[str] = set()
_auths: set[str] = set()
_basics: set[tuple[str, str]] = set()  # user:password pairs whose forms are in _known
_lock = threading.Lock()
_URLSAFE = str.maketrans("+/", "-_")
MASK = "***"


def _bytes(value: str) -> set[bytes]:
    """``value``'s bytes as a client may encode them: UTF-8 (httpx), Latin-1 (requests)."""
    encoded = {value.encode()}
    with contextlib.suppress(UnicodeEncodeError):  # no Latin-1 form: UTF-8 is the one
        encoded.add(value.encode("latin-1"))
    return encoded


def _base64(raw: bytes) -> set[str]:
    """``raw`` in base64: standard and URL-safe alphabet, each with and without padding."""
    padded = base64.b64encode(raw).decode()
    safe = padded.translate(_URLSAFE)
    return {padded, padded.rstrip("="), safe, safe.rstrip("=")}


def _encodings(value: str) -> set[str]:
    """The forms ``value`` travels in besides itself: URL-encoded (``quote``, ``quote_plus``)
    and base64 of it. Also, at each of base64's three alignments, the characters of a base64
    string that depend on ``value``'s bytes alone: base64 of a longer text holding the value
    (a Basic credential of a user not known here, a document echoed in base64) contains no
    aligned encoding of it, and is masked by these."""
    forms = {quote(value, safe=""), quote_plus(value)}
    for raw in _bytes(value):
        forms |= _base64(raw)
        for offset in range(3):
            encoded = base64.b64encode(b"\0" * offset + raw).decode()
            core = encoded[-(-8 * offset // 6) : 8 * (offset + len(raw)) // 6]
            forms |= {core, core.translate(_URLSAFE)}
    return forms


def _add(forms: set[str]) -> None:
    global _snapshot
    with _lock:
        if forms <= _known:
            return
        _known.update(forms)
        _snapshot = tuple(_known)


def remember(value: str) -> None:
    """Register a secret value so ``redact`` removes it from text, as itself and in every form
    it travels in (``_encodings``)."""
    if len(value) < 4 or value in _remembered:  # shorter strings would redact ordinary text
        return
    # A form shorter than _PRESUMED_MIN could be an ordinary word (base64 of "abcd" is
    # "YWJjZA"); from there on it is as unlikely in prose as the value itself.
    _add({value} | {f for f in _encodings(value) if len(f) >= _PRESUMED_MIN})
    with _lock:
        _remembered.add(value)


def remember_basic(user: str, password: str) -> None:
    """Register the credential HTTP Basic auth builds of ``user`` and ``password``: base64 of
    ``user ":" password`` (RFC 7617, section 2) in either alphabet and padding, so that an
    echoed ``Authorization: Basic ...`` is masked whole, and the password in its own forms.
    With no password (``https://TOKEN@host``) the user is the credential, presumed so only
    from _PRESUMED_MIN characters (a bare ``https://deploy@host`` names no secret)."""
    secret = password or user
    if len(secret) < (4 if password else _PRESUMED_MIN) or (user, password) in _basics:
        return
    remember(secret)
    _add({form for raw in _bytes(f"{user}:{password}") for form in _base64(raw)})
    with _lock:
        _basics.add((user, password))


def remember_auth(value: str) -> None:
    """Register the credential in an HTTP auth value (``Bearer <token>``...): the token after
    its scheme, and for ``Basic`` the user:password pair it encodes (``remember_basic``)."""
    if value in _auths:  # the fast path: the transport asks for each request it sends
        return
    scheme = _AUTH_VALUE.fullmatch(value.strip())
    if scheme is None:
        return
    token = value.strip().split(None, 1)[1]
    if scheme.group(1).lower() == "basic":
        try:
            pair = base64.b64decode(token, validate=True).decode()
        except ValueError:  # not base64, or not text: no pair to register
            pair = ""
        user, colon, password = pair.partition(":")  # RFC 7617: a user-id holds no ':'
        if colon:
            remember_basic(user, password)
    if len(token) >= _PRESUMED_MIN:
        remember(token)
    with _lock:
        _auths.add(value)


def _presume(value: str) -> str:
    """A value default-deny masks: remembered, in every form (``remember``), when long enough
    to be a credential; and the credential after an auth scheme (``remember_auth``)."""
    if len(value) >= _PRESUMED_MIN:  # a shorter one is no credential, nor are its encodings
        remember(value)
    remember_auth(value)
    return MASK


def redact(text: str) -> str:
    """Replace every remembered secret, in each of its forms, in ``text`` with ``***``.

    Every occurrence of every form is found first and overlapping ones become one mask:
    replacing one value after another would let a shorter form cut into a longer one that
    overlaps it, and leave the rest of the longer one in clear."""
    present = [value for value in _snapshot if value in text]  # substring scans: C speed
    if not present:
        return text
    spans: list[tuple[int, int]] = []
    for value in present:
        start = text.find(value)
        while start >= 0:
            spans.append((start, start + len(value)))
            start = text.find(value, start + 1)
    out: list[str] = []
    done = 0  # text[:done] is in out
    for start, end in sorted(spans):
        if start >= done:
            out += [text[done:start], MASK]
        done = max(done, end)
    out.append(text[done:])
    return "".join(out)


def without_secrets(env: Mapping[str, str]) -> dict[str, str]:
    """``env`` (an environment) without the variables that hold a remembered secret: a child
    process running user code gets no credential it was not given (e.g. the variable that
    ``api_key_env`` names)."""
    with _lock:
        known = tuple(_known)
    return {k: v for k, v in env.items() if not any(secret in v for secret in known)}


class RedactingFilter(logging.Filter):
    """Masks remembered secrets in a log record: installed on the HTTP clients' loggers, which
    log every request's full URL (query credentials included) at INFO; a plugin adds one to
    the loggers of a cloud SDK it drives (boto3's print request bodies)."""

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
    if parts.username or password:
        # A client sends userinfo as ``Authorization: Basic base64(user:password)``, of the
        # percent-decoded parts (httpx does): that pair is what a server may echo back.
        if password:
            remember(password)  # as written, maybe still percent-encoded
        remember_basic(unquote(parts.username or ""), unquote(password or ""))
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
