"""Per-request deadlines on asyncio without a timer per request.

Every request to one target has the same deadline (``timeout_s``) and requests start in time
order, so their deadlines expire in the order they were set: one FIFO and one timer (for the
earliest live deadline) serve all of a target's requests. ``asyncio.timeout`` per request
(a ``Timeout``, a ``TimerHandle`` pushed on and cancelled from the loop's heap) cost 7% of the
client's CPU per request on a fast endpoint, profiled; this is a list and a deque append.

The cancellation itself is ``asyncio.timeout``'s: the task is cancelled where it waits, and
the ``CancelledError`` is turned into a timeout only when it is this deadline's (the task's
cancel count is restored with ``uncancel``, so a run's own cancellation still propagates).
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Awaitable
from typing import Any, TypeVar

T = TypeVar("T")

_LIVE, _DONE, _EXPIRED = 0, 1, 2
_COMPACT_MIN = 256  # entries before finished ones are swept out of the middle of the queue


class Deadlines:
    """The deadlines of one target's requests in flight (``timeout_s`` each)."""

    __slots__ = ("_live", "_loop", "_queue", "_timeout_s", "_timer")

    def __init__(self, timeout_s: float) -> None:
        self._timeout_s = timeout_s
        self._loop: asyncio.AbstractEventLoop | None = None
        # entries: [deadline (loop time), task or None once finished, state]
        self._queue: deque[list[Any]] = deque()
        self._timer: asyncio.TimerHandle | None = None
        self._live = 0

    async def run(self, awaitable: Awaitable[T]) -> tuple[bool, T | None]:
        """Await ``awaitable`` within the deadline: (whether the deadline passed first, its
        result, or ``None`` when it did)."""
        loop = self._loop
        if loop is None:
            loop = self._loop = asyncio.get_running_loop()
        task = asyncio.current_task()
        assert task is not None
        entry: list[Any] = [loop.time() + self._timeout_s, task, _LIVE]
        queue = self._queue
        queue.append(entry)
        self._live += 1
        if self._timer is None:
            self._timer = loop.call_at(entry[0], self._expire)
        cancelling = task.cancelling()
        try:
            result = await awaitable
        except asyncio.CancelledError:
            if entry[2] == _EXPIRED and task.uncancel() <= cancelling:
                return True, None
            raise
        finally:
            if entry[2] == _LIVE:
                self._finish(entry)
        if entry[2] == _EXPIRED:  # cancelled, but the awaitable swallowed it
            task.uncancel()
        return False, result

    def _finish(self, entry: list[Any]) -> None:
        entry[1], entry[2] = None, _DONE  # the task is not kept alive by the queue
        self._live -= 1
        queue = self._queue
        while queue and queue[0][2] != _LIVE:
            queue.popleft()
        # A long request at the head keeps the finished ones behind it queued: sweep them
        # when they outnumber the live ones (amortised O(1) per request).
        if len(queue) > _COMPACT_MIN and len(queue) > 4 * self._live:
            self._queue = deque(e for e in queue if e[2] == _LIVE)

    def _expire(self) -> None:
        self._timer = None
        loop = self._loop
        assert loop is not None
        now = loop.time()
        queue = self._queue
        while queue:
            entry = queue[0]
            if entry[2] != _LIVE:
                queue.popleft()
                continue
            if entry[0] > now:
                self._timer = loop.call_at(entry[0], self._expire)
                return
            queue.popleft()
            entry[2] = _EXPIRED
            self._live -= 1
            entry[1].cancel()
            entry[1] = None

    def close(self) -> None:
        """Stop the timer (the run is over)."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
