"""Wire formats the emulator speaks: AWS event-stream framing and SigV4 checking.

Event stream (``application/vnd.amazon.eventstream``), as botocore.eventstream parses it: a
12-byte prelude (total length, headers length: uint32 big-endian; CRC32 of those 8 bytes),
headers (name length uint8, name, type uint8 -- 7 is a UTF-8 string -- value length uint16,
value), the payload, and a CRC32 of everything before it. An event has the headers
``:message-type`` = ``event``, ``:event-type`` (``PayloadPart``) and ``:content-type``; a
modelled error has ``:message-type`` = ``exception`` and ``:exception-type``.
"""

from __future__ import annotations

import hmac
import json
import re
import struct
from binascii import crc32
from collections.abc import Mapping

_STRING = 7


def _header(name: str, value: str) -> bytes:
    raw_name, raw_value = name.encode(), value.encode()
    return (
        struct.pack("!B", len(raw_name))
        + raw_name
        + struct.pack("!BH", _STRING, len(raw_value))
        + raw_value
    )


def event_message(kind: str, name: str, content_type: str, payload: bytes) -> bytes:
    """One event-stream message: an ``event`` named ``name`` (``:event-type``), or an
    ``exception`` (``:exception-type``), its payload of ``content_type``."""
    headers = {":message-type": kind, f":{kind}-type": name, ":content-type": content_type}
    head = b"".join(_header(k, v) for k, v in headers.items())
    total = 12 + len(head) + len(payload) + 4
    prelude = struct.pack("!II", total, len(head))
    prelude += struct.pack("!I", crc32(prelude) & 0xFFFFFFFF)
    message = prelude + head + payload
    return message + struct.pack("!I", crc32(message) & 0xFFFFFFFF)


def payload_part(data: bytes) -> bytes:
    """A ``PayloadPart`` event: its ``Bytes`` member is the event payload."""
    return event_message("event", "PayloadPart", "application/octet-stream", data)


def stream_exception(kind: str, message: str) -> bytes:
    """A modelled stream error (``ModelStreamError``, ``InternalStreamFailure``)."""
    body = json.dumps({"Message": message}).encode()
    return event_message("exception", kind, "application/json", body)


_AUTH = re.compile(
    r"AWS4-HMAC-SHA256 Credential=(?P<key>[^/]+)/(?P<date>\d{8})/(?P<region>[^/]+)/"
    r"(?P<service>[^/]+)/aws4_request, ?SignedHeaders=(?P<signed>[^,]+), ?"
    r"Signature=(?P<signature>[0-9a-f]{64})"
)


def sigv4_valid(
    method: str,
    url: str,
    headers: Mapping[str, str],
    body: bytes,
    secrets: Mapping[str, str],
) -> bool:
    """Whether the request carries a valid AWS Signature Version 4 by a known access key:
    the signature is computed again with botocore's own signer over the signed headers
    (https://docs.aws.amazon.com/IAM/latest/UserGuide/create-signed-request.html)."""
    from botocore.auth import SigV4Auth
    from botocore.awsrequest import AWSRequest
    from botocore.credentials import Credentials

    match = _AUTH.fullmatch(headers.get("authorization", "").strip())
    if match is None or match["key"] not in secrets or "x-amz-date" not in headers:
        return False
    signed = {name: headers.get(name, "") for name in match["signed"].split(";")}
    request = AWSRequest(method=method, url=url, data=body, headers=signed)
    request.context["timestamp"] = headers["x-amz-date"]
    signer = SigV4Auth(
        Credentials(match["key"], secrets[match["key"]]), match["service"], match["region"]
    )
    canonical = signer.canonical_request(request)
    expected = signer.signature(signer.string_to_sign(request, canonical), request)
    return hmac.compare_digest(expected, match["signature"])
