"""An incremental Server-Sent Events parser over raw bytes, built for per-token timing.

The format is the WHATWG HTML "Server-sent events" one (html.spec.whatwg.org/multipage/
server-sent-events.html#event-stream-interpretation): events are separated by a blank line;
``data:`` lines (one optional space after the colon) are joined with ``\\n``; lines starting
with ``:`` are comments (servers send them as keep-alives); ``event:``/``id:``/``retry:`` are
fields we do not need. Lines end in ``\\n``, ``\\r\\n`` or ``\\r``.

Why bytes and whole-event splits: an OpenAI-compatible server sends one small event per token,
and per-line Python work costs microseconds per token. ``feed`` finds event boundaries with
``bytes.split`` (C speed) and takes the common one-line ``data: {...}`` event without looking at
its lines; only multi-line or commented events go through the general path.
"""

from __future__ import annotations

__all__ = ["SSEParser"]

_DATA = b"data:"
_DATA_SP = b"data: "


class SSEParser:
    """Feed network chunks as they arrive; get the ``data`` of each event they complete.

    An event split across chunks (even inside ``\\r\\n``) is returned once its blank line
    arrives. ``pending`` tells whether a partial event is buffered (a stream that ends with
    one was cut mid-event).
    """

    __slots__ = ("_buf",)

    def __init__(self) -> None:
        self._buf = b""

    @property
    def pending(self) -> bool:
        return bool(self._buf.strip())

    def feed(self, chunk: bytes) -> list[bytes]:
        if not self._buf and chunk[-2:] == b"\n\n" and b"\r" not in chunk:
            # The usual read: whole events, LF line ends, nothing pending (one event per token
            # from vLLM, TGI, OpenAI): no buffer to join, no boundary to search for.
            return self._events(chunk[:-2])
        data = self._buf + chunk if self._buf else chunk
        if b"\r" in data:
            if data.endswith(b"\r"):  # maybe half of a \r\n: decide when the next byte comes
                self._buf = data
                return []
            data = data.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
        end = data.rfind(b"\n\n")
        if end < 0:
            self._buf = data
            return []
        self._buf = data[end + 2 :]
        return self._events(data[:end])

    @staticmethod
    def _events(blocks: bytes) -> list[bytes]:
        """The data of each event in ``blocks`` (complete events, LF ends, without the final
        blank line)."""
        out: list[bytes] = []
        for block in blocks.split(b"\n\n"):
            if b"\n" not in block:  # the one-line event: fast path
                if block[:6] == _DATA_SP:
                    out.append(block[6:])
                    continue
                if block[:5] == _DATA:
                    out.append(block[5:])
                    continue
            if block.strip(b"\n"):
                payload_or_none = _general(block)
                if payload_or_none is not None:
                    out.append(payload_or_none)
        return out


def _general(block: bytes) -> bytes | None:
    """An event with several lines, comments or other fields; None when it has no data."""
    parts: list[bytes] = []
    for line in block.split(b"\n"):
        if not line or line[:1] == b":":
            continue  # blank (leading newlines) or a comment: keep-alive
        name, colon, value = line.partition(b":")
        if name != b"data":
            continue  # event, id, retry or unknown fields: not needed for timing
        if colon and value[:1] == b" ":
            value = value[1:]
        parts.append(value)
    return b"\n".join(parts) if parts else None
