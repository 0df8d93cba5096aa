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
import signal
import time
from collections.abc import Callable
from pathlib import Path

import anyio

from ._errors import ConfigError
from ._monitor import HealthWindow
from ._runner import Runner, RunResult
from ._store import RunInfo


async def run_until_signal(runner: Runner) -> RunResult:
    """Run, turning the first SIGINT/SIGTERM into a graceful ``runner.stop()``."""

    async def watch() -> None:
        with anyio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
            async for signum in signals:
                runner.stop(f"stopped by {signal.Signals(signum).name}")
                break
        # a second Ctrl-C aborts at once; everything committed so far stays in the store
        signal.signal(signal.SIGINT, signal.default_int_handler)

    async with anyio.create_task_group() as tg:
        tg.start_soon(watch)
        result = await runner.run()
        tg.cancel_scope.cancel()
    return result


def _loop_options() -> dict[str, bool]:
    try:
        import uvloop  # noqa: F401

        return {"use_uvloop": True}
    except ImportError:
        return {}


def run_blocking(runner: Runner) -> RunResult:
    """Run in a fresh event loop (uvloop when installed), stopping gracefully on signals."""
    result: RunResult = anyio.run(
        run_until_signal, runner, backend="asyncio", backend_options=_loop_options()
    )
    return result


def _child(build: Callable[[], Runner], run: RunInfo, shard: int, shards: int) -> None:
    runner = build()
    runner.join(run, shard, shards)
    result = run_blocking(runner)
    raise SystemExit(0 if result.status in ("completed", "cancelled") else 1)


def run_processes(
    build: Callable[[], Runner],
    processes: int,
    *,
    on_progress: Callable[[int], None] | None = None,
) -> RunResult:
    """Drive one run from ``processes`` worker processes; returns once all have finished."""
    if processes < 1:
        raise ConfigError("processes", processes, "an integer >= 1")
    parent = build()
    if processes == 1:
        return run_blocking(parent)
    info = parent.begin()
    store = parent.store
    ctx = multiprocessing.get_context("spawn")
    workers = [
        ctx.Process(target=_child, args=(build, info, k, processes), name=f"gpubench-{k}")
        for k in range(processes)
    ]
    status, error = "completed", None
    # The children get the terminal's SIGINT themselves and stop gracefully; the parent
    # only waits for them.
    previous = signal.signal(signal.SIGINT, lambda *_: None)
    try:
        for w in workers:
            w.start()
        while any(w.is_alive() for w in workers):
            time.sleep(0.25)
            if on_progress is not None:
                on_progress(store.run(info.id).samples)
        failed = [w.name for w in workers if w.exitcode != 0]
        if failed:
            status, error = "failed", f"worker process(es) failed: {', '.join(failed)}"
    finally:
        signal.signal(signal.SIGINT, previous)
        for w in workers:
            if w.is_alive():
                w.terminate()
        store.end_run(info.id, status, error)
    final = store.run(info.id)
    health = store.health(info.id)
    windows = [
        HealthWindow(int(t), float(lag), float(cpu), int(inflight), bool(bound))
        for t, lag, cpu, inflight, bound in zip(
            health["t_ns"],
            health["loop_lag_ms"],
            health["cpu_pct"],
            health["inflight"],
            health["client_bound"],
            strict=True,
        )
    ]
    store.close()
    return RunResult(
        run=final,
        store_path=Path(store.path),
        status=final.status,
        requests=final.samples,
        health=windows,
    )
