"""False "ready": a provider that says a worker is ready before it can serve.

One open benchmark of GPU platforms found a provider whose health check answered ready before
the model server was; a model that loads on its first request does the same. The request that
follows the signal is then warm by every flag the platform gives, yet waits for the load: it
inflates "warm" latency and hides a cold start.

Method (``docs/metrics.md``): the readiness signal is the fleet readings the runner records
(``Store.fleet``: workers ready and busy, for providers declaring ``fleet_state``). Each rise of
the workers that are up (ready + busy) by ``k`` is a signal that ``k`` workers became ready; the
workers already up at the run's first reading said so before the run began. After each signal,
the first ``k`` warm, successful requests started after it are checked: one whose service time
(the server's ``execution_ms`` where every warm request has one, else its latency) exceeds the
target's warm p95 by half again and by ``MIN_EXCESS_MS`` is flagged. The warm p95 is taken over
the warm requests that no signal put under suspicion, so the flagged ones cannot raise their own
bar. The runner counts the flagged requests as cold (the cold-tail), so every statistic that
separates cold from warm sees them with the cold starts.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from .._base._types import Outcome
from .._store._store import Columns, Store
from ._frame import RunRef, _info

MARGIN = 0.5  # flagged when slower than the warm p95 by half again...
MIN_EXCESS_MS = 100.0  # ...and by this much: a model load takes seconds, jitter does not
MIN_WARM = 5  # fewer warm requests than this give no p95 to judge by


@dataclass(frozen=True, slots=True)
class FalseReady:
    """What a target's readiness signals were worth in one run.

    ``signals``: rises of the workers up (a worker said ready); ``checked``: the first warm
    requests after them that were compared; ``flagged``: indexes (into the ``Store.columns``
    rows read with ``phase=None``) of those slower than ``threshold_ms``; ``service_ms``: their
    service times; ``basis``: ``"execution_ms"`` or ``"latency_ms"``."""

    signals: int
    checked: int
    flagged: tuple[int, ...]
    service_ms: tuple[float, ...]
    warm_p95_ms: float
    threshold_ms: float
    basis: str

    @property
    def count(self) -> int:
        """How many requests a false "ready" slowed."""
        return len(self.flagged)

    @property
    def text(self) -> str:
        """``"said ready before it could serve: 2 of 3 first requests after ready took
        1,050-1,062 ms against a warm p95 of 55 ms"``, or what was checked."""
        if not self.count:
            return f"{self.checked} first requests after ready: none slower than warm"
        lo, hi = min(self.service_ms), max(self.service_ms)
        took = f"{lo:,.0f} ms" if round(lo) == round(hi) else f"{lo:,.0f}-{hi:,.0f} ms"
        return (
            f'said "ready" before it could serve: {self.count} of {self.checked} first requests'
            f" after ready took {took} against a warm p95 of {self.warm_p95_ms:,.0f} ms"
        )


def false_ready(
    fleet_t_ns: npt.ArrayLike,
    workers_up: npt.ArrayLike,
    start_ns: npt.ArrayLike,
    service_ms: npt.ArrayLike,
    warm: npt.ArrayLike,
    *,
    basis: str = "latency_ms",
    margin: float = MARGIN,
    min_excess_ms: float = MIN_EXCESS_MS,
) -> FalseReady | None:
    """Requests a readiness signal lied about (see the module's method), or None where there is
    nothing to judge by (no signal, or fewer than ``MIN_WARM`` warm requests).

    ``fleet_t_ns`` and ``workers_up`` are the fleet readings in time order (workers ready +
    busy; negative: not reported); ``start_ns``, ``service_ms`` and ``warm`` (successful and
    not cold) are one entry per request, on the readings' clock."""
    t = np.asarray(fleet_t_ns, dtype=np.int64)
    up = np.asarray(workers_up, dtype=np.int64)
    starts = np.asarray(start_ns, dtype=np.int64)
    service = np.asarray(service_ms, dtype=np.float64)
    warm_rows = np.flatnonzero(np.asarray(warm, dtype=bool) & np.isfinite(service))
    known = up >= 0
    t, up = t[known], up[known]
    if not t.size or warm_rows.size < MIN_WARM:
        return None
    # (when, how many workers): the first reading's workers were ready before the run began
    rises = [(np.iinfo(np.int64).min, int(up[0]))] + [
        (int(t[i]), int(up[i] - up[i - 1])) for i in range(1, t.size) if up[i] > up[i - 1]
    ]
    rises = [(when, k) for when, k in rises if k > 0]
    if not rises:
        return None
    by_start = warm_rows[np.argsort(starts[warm_rows], kind="stable")]
    sorted_starts = starts[by_start]
    suspects: list[int] = []
    taken: set[int] = set()
    for when, k in rises:
        first = int(np.searchsorted(sorted_starts, when, side="left"))
        for row in by_start[first:]:
            if k == 0:
                break
            if int(row) not in taken:
                taken.add(int(row))
                suspects.append(int(row))
                k -= 1
    clear = np.setdiff1d(warm_rows, suspects)
    if clear.size < MIN_WARM:
        return None
    p95 = float(np.percentile(service[clear], 95))
    threshold = max(p95 * (1 + margin), p95 + min_excess_ms)
    flagged = tuple(sorted(r for r in suspects if service[r] > threshold))
    return FalseReady(
        signals=len(rises),
        checked=len(suspects),
        flagged=flagged,
        service_ms=tuple(float(service[r]) for r in flagged),
        warm_p95_ms=p95,
        threshold_ms=threshold,
        basis=basis,
    )


def false_ready_of(cols: Columns, fleet: Columns) -> FalseReady | None:
    """``false_ready`` over ``Store.columns`` (read with ``phase=None``) and ``Store.fleet``
    arrays of one target."""
    ready, busy = fleet["ready"], fleet["busy"]
    up = np.where((ready < 0) & (busy < 0), -1, np.maximum(ready, 0) + np.maximum(busy, 0))
    warm = (cols["outcome"] == Outcome.OK.code) & (cols["cold"] != 1)
    execution = cols["execution_ms"]
    # The server's own service time where every warm request has one: queueing behind the slow
    # request must not make its neighbours look slow too.
    use_execution = bool(warm.any()) and bool(np.isfinite(execution[warm]).all())
    basis = "execution_ms" if use_execution else "latency_ms"
    return false_ready(fleet["t_ns"], up, cols["start_ns"], cols[basis], warm, basis=basis)


def run_false_ready(store: Store, run: RunRef, *, target: str) -> FalseReady | None:
    """``false_ready`` of one target of a stored run, from its fleet readings (None where the
    provider reported none, or there is nothing to judge by). Rows the run already counted as
    cold-tail are judged as their provider flagged them, so the answer is the same before and
    after the runner marked them."""
    info = _info(store, run)
    fleet = store.fleet(info.id, target=target)
    if not fleet["t_ns"].size:
        return None
    cols = store.columns(info.id, target=target, phase=None)
    marks = store.false_ready_marks(info.id, target=target, phase=None)
    marked = marks["marked"]
    if marked.any():  # as the provider answered them
        cols["cold"] = np.where(marked, marks["provider_cold"], cols["cold"]).astype(np.int8)
        cols["execution_ms"] = np.where(
            marked, marks["provider_execution_ms"], cols["execution_ms"]
        )
    return false_ready_of(cols, fleet)


def mark_false_ready(store: Store, run: RunRef, *, target: str) -> FalseReady | None:
    """Judge one target of a finished run (``run_false_ready``) and count the requests a false
    "ready" slowed as cold in the store (``Store.mark_false_ready``). The runner calls it when
    a run ends; it is safe to call again."""
    found = run_false_ready(store, run, target=target)
    if found is not None and found.count:
        judged = {
            "warm_p95_ms": round(found.warm_p95_ms, 3),
            "threshold_ms": round(found.threshold_ms, 3),
            "basis": found.basis,
        }
        store.mark_false_ready(_info(store, run).id, target, found.flagged, judged)
    return found
