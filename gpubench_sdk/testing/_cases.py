"""The faults the conformance suite injects, and the forms of a key it counts as a leak."""

from __future__ import annotations

import base64
import urllib.parse
from dataclasses import dataclass

from .._base._errors import (
    ColdTimeoutError,
    InvalidResponseError,
    ProviderError,
    ServerHTTPError,
    ThrottledError,
    TransportError,
)
from .._base._types import Outcome
from ._faults import Fault

__all__ = ["FAULT_CASES", "POLL_FAULT_CASES", "FaultCase", "check_retry_after", "leak_forms"]


@dataclass(frozen=True, slots=True)
class FaultCase:
    """An injected fault, the errors a provider may map it to, and how many requests in a row
    get it (``times``)."""

    name: str
    fault: Fault
    errors: tuple[type[ProviderError], ...]
    outcomes: frozenset[Outcome]
    times: int = 1


FAULT_CASES = (
    FaultCase("throttle", Fault.throttle(), (ThrottledError,), frozenset({Outcome.THROTTLED})),
    FaultCase(
        "throttle_retry_after",
        Fault.throttle(retry_after_s=3),
        (ThrottledError,),
        frozenset({Outcome.THROTTLED}),
    ),
    # RFC 9110 section 10.2.3: Retry-After may be an HTTP date; the provider reads it as the
    # seconds left (gpubench_sdk.retry_after_s), not as no Retry-After at all.
    FaultCase(
        "throttle_retry_after_date",
        Fault.throttle(retry_after_s=30, as_date=True),
        (ThrottledError,),
        frozenset({Outcome.THROTTLED}),
    ),
    FaultCase(
        "server_error_500",
        Fault.server_error(500),
        (ServerHTTPError,),
        frozenset({Outcome.HTTP_5XX}),
    ),
    FaultCase(
        "server_error_502",
        Fault.server_error(502),
        (ServerHTTPError,),
        frozenset({Outcome.HTTP_5XX}),
    ),
    FaultCase(
        "unavailable_while_cold",
        Fault.unavailable_while_cold(),
        (ServerHTTPError, ColdTimeoutError),
        frozenset({Outcome.HTTP_5XX, Outcome.COLD_TIMEOUT}),
    ),
    FaultCase(
        "malformed",
        Fault.malformed(),
        (InvalidResponseError,),
        frozenset({Outcome.INVALID_RESPONSE}),
    ),
    FaultCase(
        "truncated",
        Fault.truncated(),
        (TransportError, InvalidResponseError),
        frozenset({Outcome.TRANSPORT, Outcome.INVALID_RESPONSE}),
    ),
    # Twice: the transport resends, once and on a fresh connection, a request whose reused
    # connection died before answering (see gpubench_sdk.make_client); the resend fails too.
    FaultCase("reset", Fault.reset(), (TransportError,), frozenset({Outcome.TRANSPORT}), times=2),
    FaultCase(
        "job_failed",
        Fault.job_failed(),
        (ServerHTTPError, InvalidResponseError),
        frozenset({Outcome.HTTP_5XX, Outcome.INVALID_RESPONSE}),
    ),
)

# Faults a polling provider must survive or report on its poll route ("poll"): everything an
# HTTP answer can do wrong there.
POLL_FAULT_CASES = tuple(
    c
    for c in FAULT_CASES
    if c.name in ("throttle", "server_error_500", "malformed", "truncated", "reset")
)


def check_retry_after(case: FaultCase, exc: ThrottledError) -> None:
    """The wait the provider read is the fault's ``Retry-After``: exactly, in seconds; as an
    HTTP date, whole seconds (rounded down) read a moment later, so up to 3 s less."""
    wanted, got = case.fault.retry_after_s, exc.retry_after_s
    if wanted is None or not case.fault.retry_after_date:
        assert got == wanted, f"{case.name}: retry_after_s {got}, sent {wanted}"
        return
    assert got is not None, f"{case.name}: Retry-After as an HTTP date was not read"
    assert wanted - 3 <= got <= wanted, f"{case.name}: retry_after_s {got}, sent {wanted}"


def leak_forms(key: str) -> list[str]:
    """The ways ``key`` can appear in text: as is, URL-encoded, and inside base64 (an HTTP
    Basic ``user:key`` credential, at any of base64's three alignments, in either alphabet)."""
    forms = {key, urllib.parse.quote(key, safe=""), urllib.parse.quote_plus(key)}
    raw = key.encode()
    for offset in range(3):
        encoded = base64.b64encode(b"\0" * offset + raw).decode()
        # the characters that depend on the key's bytes alone, whatever precedes them
        first = -(-8 * offset // 6)
        last = (8 * (offset + len(raw))) // 6
        core = encoded[first:last]
        if len(core) >= 8:
            forms |= {core, core.replace("+", "-").replace("/", "_")}
    return sorted(forms)
