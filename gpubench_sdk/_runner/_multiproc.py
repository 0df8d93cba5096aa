"""Multi-process load generation: one run driven by several processes, merged in the store.

One Python process saturates one core. To use all of a machine's cores, ``run_processes``
starts ``processes`` workers (spawned, not forked: each builds its own providers and event
loop). Each worker drives its share of every closed-loop and open-loop scenario (every n-th
request, so the merged schedule is the configured one) and appends to the same run in the same
SQLite store; cold-start scenarios run in the first worker only.

``build`` must be picklable (a module-level function or a ``functools.partial`` of one) and
return a fresh, not yet run ``Runner``: every process calls it.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import time
from collections.abc import Callable
from multiprocessing.synchronize import Barrier
from typing import Any

import anyio

from .._base._errors import ConfigError
from .._store._store import RunInfo
from ._resources import unwrap
from ._results import RunResult, stored_result
from ._runner import Runner, SharedCounter


async def run_until_signal(runner: Runner) -> RunResult:
    """Run, turning the first SIGINT/SIGTERM into a graceful ``runner.stop()``."""

    async def watch() -> None:
        with anyio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
            async for signum in signals:
                runner.stop(f"stopped by {signal.Signals(signum).name}")
                break
        # a second Ctrl-C aborts at once; everything committed so far stays in the store
        signal.signal(signal.SIGINT, signal.default_int_handler)

    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(watch)
            result = await runner.run()
            tg.cancel_scope.cancel()
    except BaseExceptionGroup as group:  # anyio wraps even the host task's own exception
        named = unwrap(group)
        if named is group:
            raise
        raise named from None
    return result


def _loop_options() -> dict[str, bool]:
    try:
        import uvloop  # noqa: F401

        return {"use_uvloop": True}
    except ImportError:
        return {}


def run_blocking(runner: Runner) -> RunResult:
    """Run in a fresh event loop (uvloop when installed), stopping gracefully on signals."""
    runner.check_resources()  # a plan that cannot fit is refused before the loop starts
    result: RunResult = anyio.run(
        run_until_signal, runner, backend="asyncio", backend_options=_loop_options()
    )
    return result


# Exit codes of a load-generating process, so the parent can tell a stop from a failure.
_EXIT = {"completed": 0, "cancelled": 3}


def _child(
    build: Callable[[], Runner],
    run: RunInfo,
    shard: int,
    shards: int,
    barrier: Barrier,
    sent: SharedCounter,
    stops: Any = None,
    reasons: Any = None,
) -> None:
    runner = build()
    runner.join(run, shard, shards, sync=barrier.wait, abort=barrier.abort, sent=sent)
    runner.share_cost_stops(stops)
    result = run_blocking(runner)
    if reasons is not None and result.stop_reason is not None:
        reasons.put(result.stop_reason)  # why it stopped early (a budget): kept with the run
    raise SystemExit(_EXIT.get(result.status, 1))


def run_processes(
    build: Callable[[], Runner],
    processes: int,
    *,
    on_progress: Callable[[int], None] | None = None,
) -> RunResult:
    """Drive one run from ``processes`` worker processes; returns once all have finished.

    The processes meet at every scenario boundary (a barrier), so a scenario starts in all of
    them together and a cold-start scenario in the first is never overlapped by the next
    scenario's load from the others.
    """
    if processes < 1:
        raise ConfigError("processes", processes, "an integer >= 1")
    parent = build()
    if processes == 1:
        return run_blocking(parent)
    parent.check_resources(shards=processes)  # each process opens its share of the sockets
    info = parent.begin()
    store = parent.store
    ctx = multiprocessing.get_context("spawn")
    barrier = ctx.Barrier(processes)
    sent = ctx.Value("q", 0)  # requests sent by all processes: max_requests is one budget
    # a target the budget guard stops in one process is stopped in all (one flag each)
    stops = None if parent.cost_flag_count is None else ctx.Array("b", parent.cost_flag_count)
    reasons = ctx.SimpleQueue()  # stop reasons of processes that stopped early
    workers = [
        ctx.Process(
            target=_child,
            args=(build, info, k, processes, barrier, sent, stops, reasons),
            name=f"gpubench-{k}",
        )
        for k in range(processes)
    ]

    def forward(signum: int, _frame: object) -> None:
        # SIGTERM to the parent becomes a graceful stop in every worker. SIGINT from a
        # terminal already reaches them all (same process group), so it is only ignored here.
        if signum == signal.SIGTERM:
            for w in workers:
                if w.pid is not None and w.is_alive():
                    os.kill(w.pid, signal.SIGTERM)

    previous = {sig: signal.signal(sig, forward) for sig in (signal.SIGINT, signal.SIGTERM)}
    status = "failed"
    error: str | None = "the parent process failed while waiting for its workers"
    try:
        for w in workers:
            w.start()
        while any(w.is_alive() for w in workers):
            time.sleep(0.25)
            if any(w.exitcode not in (None, 0) for w in workers):
                barrier.abort()  # one stopped or failed: release the others from the barrier
            if on_progress is not None:
                on_progress(store.run(info.id).samples)
        codes = [w.exitcode for w in workers]
        if any(c not in (0, _EXIT["cancelled"]) for c in codes):
            failed = [w.name for w in workers if w.exitcode not in (0, _EXIT["cancelled"])]
            status, error = "failed", f"worker process(es) failed: {', '.join(failed)}"
        elif _EXIT["cancelled"] in codes:
            status, error = "cancelled", None
        else:
            status, error = "completed", None
            stopped = []
            while not reasons.empty():
                stopped.append(reasons.get())
            if stopped:  # a budget stopped it: say why, as a single-process run does
                error = "; ".join(dict.fromkeys(stopped))
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        for w in workers:
            if w.is_alive():
                w.terminate()
        store.end_run(info.id, status, error)
    return stored_result(
        store, info.id, lambda final: final.error if final.status == "completed" else None
    )
