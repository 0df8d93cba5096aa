"""The garbage collector kept off the run's tail.

CPython's collector stops the event loop while it walks every tracked object; its full passes
walk everything the process has made, imports included (gpubench's own, OpenTelemetry's,
numpy's): 67,000 objects and about 50 ms at start, and up to 210 ms a pass by the end of a
run of 6,000 streamed requests (bench/client_tail_bench.py --throughput, profiled with
gc.callbacks). Every request in flight during a pause is charged with it, so the pauses set the
run's p99 error. What exists when the requests start is frozen (``gc.freeze``: moved out of
the collector's sight until ``gc.unfreeze``), after one collection so that no garbage is kept
with it; what the run makes is collected as usual.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def startup_frozen() -> Iterator[None]:
    """Freeze the objects that exist now for the ``with`` block. Left alone when the collector
    is off or something froze objects already (a caller of ``gc.freeze``, or another run in
    this process): unfreezing at the end would undo theirs."""
    if not gc.isenabled() or gc.get_freeze_count():
        yield
        return
    gc.collect()
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()  # back to the oldest generation: collected from the next full pass on
