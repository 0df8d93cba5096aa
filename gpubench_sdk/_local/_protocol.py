"""The gateway's side of the worker frame protocol (the codec itself lives in ``_worker``).

A frame is a 4-byte big-endian length, then that many bytes of UTF-8 JSON. The messages are
listed in ``_worker``'s docstring.
"""

from __future__ import annotations

import asyncio
from typing import Any

from ._worker import HEADER, FrameError, decode, encode, frame_length

__all__ = ["FrameError", "encode", "encode_job", "read_frame"]


def encode_job(job_id: str, payload_json: bytes) -> bytes:
    """A job frame around a payload that is already valid JSON, so it is not encoded twice."""
    data = b'{"type":"job","id":"' + job_id.encode("ascii") + b'","payload":' + payload_json + b"}"
    return HEADER.pack(len(data)) + data


async def read_frame(reader: asyncio.StreamReader) -> dict[str, Any]:
    """The next frame; raises ``asyncio.IncompleteReadError`` when the worker has closed."""
    length = frame_length(await reader.readexactly(HEADER.size))
    return decode(await reader.readexactly(length))
