"""Whether a request met a cold endpoint, and how long it waited for a replica: facts first
(the proxy's 503s, a verified ``scaledToZero``), then TGI's own total, then a warm baseline."""

from __future__ import annotations

import statistics
from collections import deque

WARM_WINDOW = 50  # warm send-to-headers times the running median is taken over


class ColdJudge:
    """One provider's verdicts. ``expect_cold()`` records that ``ensure_cold`` just verified
    the endpoint empty, so the next request is cold as a fact."""

    def __init__(self, threshold_ms: float, factor: float, holds: bool) -> None:
        self.threshold_ms = threshold_ms
        self.factor = factor
        self.holds = holds  # the proxy holds cold requests (X-Scale-Up-Timeout)
        self._warm_ms: deque[float] = deque(maxlen=WARM_WINDOW)
        self._cold_next = False

    def expect_cold(self) -> None:
        self._cold_next = True

    def verdict(
        self,
        initializing: bool,
        *,
        to_ready_ms: float,
        to_answer_ms: float,
        server_ms: float | None,
    ) -> tuple[bool | None, bool, float | None]:
        """``(cold, confirmed, setup_ms)`` for a request that got an answer.

        ``initializing``: the proxy answered 503 first. ``to_ready_ms`` runs from the first
        send, ``to_answer_ms`` from the last, to the answer's headers; ``server_ms`` is TGI's
        ``x-total-time``. The time to ready is ``to_ready_ms`` less the server's own time
        (``server_ms``, else the warm median of send-to-headers, else nothing). A stream's
        headers come before its tokens, so its figures exclude them.
        """
        cold_next, self._cold_next = self._cold_next, False
        median_ms = statistics.median(self._warm_ms) if self._warm_ms else None
        own_ms = server_ms if server_ms is not None else median_ms
        if initializing or cold_next:
            ready_ms = max(0.0, to_ready_ms - (own_ms or 0.0))
            return True, True, ready_ms if initializing or own_ms is not None else None
        if server_ms is not None:  # TGI's total: the rest of the wait is the proxy's hold
            cold = to_answer_ms - server_ms >= self.threshold_ms
        elif not self.holds:
            cold = False  # a replica answered at once: without one the proxy would have 503'd
        else:
            slow = to_answer_ms >= self.factor * (median_ms or 0.0)
            cold = to_answer_ms >= self.threshold_ms and slow
        if cold:
            return True, False, max(0.0, to_answer_ms - (own_ms or 0.0))
        self._warm_ms.append(to_answer_ms)
        return False, False, None
