"""The durable results store: every completed request is on disk within ``flush_interval_s``.

A benchmark that dies (crash, OOM kill, Ctrl-C twice) must not lose what it measured, and the
runner's event loop must never wait on a disk. So ``append`` only turns an ``Invocation`` into a
tuple and puts it on a list under a lock; one writer thread per ``Store`` commits those lists with
``executemany`` at most ``flush_interval_s`` apart (SQLite in WAL mode, ``synchronous=NORMAL``: a
committed transaction survives a process kill). Several processes may append to one file; write
transactions are short and wait on ``busy_timeout``.

``Store`` is one class in three modules: this one opens the file and records runs and requests
(``begin_run``, ``append``, ``end_run``...); ``_writer`` holds the writer thread and the
calls that wait on it (``flush``, ``close``); ``_read`` the read queries (runs,
invocations, columns, retry_after, health windows) and the exports. The file format lives in
``_schema``, the export formats in ``_export``.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import socket
import sqlite3
import threading
import time
import uuid
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any

from .._base._errors import ConfigError, StoreError
from .._base._monitor import HealthWindow
from .._base._secrets import redact
from .._base._types import FleetState, Invocation
from ._read import Columns, RetryAfter, StoreReads, read_columns
from ._schema import (
    INSERT_FLEET,
    INSERT_HEALTH,
    OUTCOME_CODE,
    PHASE_CODE,
    RUN_STATUSES,
    RunInfo,
    ScenarioRecord,
    TargetRecord,
    encode_detail,
    encode_token_times,
    gpubench_version,
    stored_version,
    to_json,
    write_txn,
)
from ._writer import StoreWriter

__all__ = [
    "Columns",
    "RetryAfter",
    "RunInfo",
    "ScenarioRecord",
    "Store",
    "StoreError",
    "TargetRecord",
]

DEFAULT_FLUSH_INTERVAL_S = 0.5


def check_flush_interval(value: float) -> None:
    """``flush_interval_s`` must be a number of seconds from 0 (commit at every request) up."""
    if not (isinstance(value, int | float) and math.isfinite(value) and 0 <= value <= 60):
        raise ConfigError(
            "flush_interval_s", value, "seconds from 0 (commit every request) to 60 (default 0.5)"
        )


# Writing is here and in StoreWriter (the writer thread); reading in StoreReads.
class Store(StoreReads, StoreWriter):
    """A results file. Open one per process; safe to share between threads of that process."""

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        flush_interval_s: float = DEFAULT_FLUSH_INTERVAL_S,
        readonly: bool = False,
        busy_timeout_s: float = 30.0,
    ) -> None:
        check_flush_interval(flush_interval_s)
        self.path = Path(path)
        self.readonly = readonly
        self.flush_interval_s = flush_interval_s
        self._interval = flush_interval_s or None  # 0: the writer waits for each append
        self._busy_timeout_s = busy_timeout_s
        self._conn = self._connect()
        self._version = stored_version(self._conn)
        self._read_columns = read_columns(self._version)
        self._conn_lock = threading.RLock()  # the caller-side connection: runs, reads
        self._cond = threading.Condition(threading.Lock())  # buffers, counters, state below
        self._wake = threading.Event()
        self._inv_buf: list[tuple[Any, ...]] = []
        # rows for the small side tables (health windows, fleet samples), by INSERT statement
        self._side_buf: dict[str, list[tuple[Any, ...]]] = {}
        self._appended = 0
        self._committed = 0
        self._refuse: str | None = f"{self.path}: store opened read-only" if readonly else None
        self._error: str | None = None  # the writer's failure, raised from append/flush/close
        self._cause: BaseException | None = None
        self._closed = self._stopping = False
        self._writer: threading.Thread | None = None
        self._writer_ready = threading.Event()  # set once the writer's connection is open
        self._locked_why: str | None = None
        self._lock_try_failed = -math.inf
        self._run_cache: dict[int, tuple[dict[str, int], int]] = {}

    def __enter__(self) -> Store:
        return self

    def __exit__(
        self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None
    ) -> None:
        try:
            self.close()
        except StoreError:
            if et is None:  # do not mask the exception already propagating
                raise

    # -- writing (the writer thread is in StoreWriter) ---------------------------------------------

    def begin_run(
        self,
        *,
        name: str,
        config: Mapping[str, Any],
        targets: Sequence[TargetRecord],
        scenarios: Sequence[ScenarioRecord],
        origin_ns: int,
        started_wall_ns: int,
    ) -> RunInfo:
        """Record a new run and commit at once, so a run that dies immediately still shows up.

        ``config`` must already be scrubbed by name (credential-named fields); values JSON
        cannot encode are stored as ``str``. As a last line of defence, every secret this
        process knows (an API key read from ``api_key_env``...) is masked wherever it appears,
        e.g. pasted into a custom header of the plan.
        """
        self._check_writable()
        names = [t.name for t in targets]
        if len(set(names)) != len(names):
            raise StoreError(f"target names must be unique within a run, got {names}")
        run = (str(uuid.uuid4()), name, started_wall_ns, origin_ns, redact(to_json(config)))
        process = (socket.gethostname(), os.getpid(), gpubench_version())
        with self._write_txn() as conn:
            cur = conn.execute(
                "INSERT INTO runs (uuid, name, status, started_wall_ns, origin_ns, config_json,"
                " host, pid, gpubench_version) VALUES (?, ?, 'running', ?, ?, ?, ?, ?, ?)",
                run + process,
            )
            run_id = cur.lastrowid
            assert run_id is not None
            conn.executemany(
                "INSERT INTO targets VALUES (?, ?, ?, ?, ?, ?, NULL)",
                [
                    (
                        run_id,
                        i,
                        t.name,
                        t.provider,
                        redact(to_json(t.options)),
                        to_json([*t.capabilities]),
                    )
                    for i, t in enumerate(targets)
                ],
            )
            conn.executemany(
                "INSERT INTO scenarios (run_id, idx, kind, params_json, status)"
                " VALUES (?, ?, ?, ?, ?)",
                [(run_id, i, s.kind, to_json(s.params), s.status) for i, s in enumerate(scenarios)],
            )
        self._run_cache[run_id] = ({n: i for i, n in enumerate(names)}, started_wall_ns)
        return self.run(run_id)

    def append(self, run_id: int, inv: Invocation) -> None:
        """Queue one invocation; committed within ``flush_interval_s``. Never touches the disk.

        Raises ``StoreError`` for an unknown run or target name, and once the writer has failed.
        """
        try:
            targets, wall0 = self._run_cache[run_id]
        except KeyError:
            targets, wall0 = self._load_run(run_id)
        try:
            target = targets[inv.target]
        except KeyError:
            raise StoreError(
                f"run {run_id} has no target {inv.target!r} ({list(targets)})"
            ) from None
        error = inv.error
        row = (
            run_id, target, inv.scenario, inv.seq, PHASE_CODE[inv.phase], inv.scheduled_ns,
            inv.start_ns, inv.first_byte_ns, inv.end_ns, inv.wall_start_ns - wall0,
            OUTCOME_CODE[inv.outcome], inv.http_status, None if error is None else redact(error),
            inv.request_id, inv.queue_ms, inv.execution_ms, inv.setup_ms, inv.cold,
            inv.cold_confirmed, inv.input_units, inv.output_units, inv.worker_id,
            encode_token_times(inv.start_ns, inv.token_times_ns), encode_detail(inv.detail),
            inv.retry_after_s,
        )  # fmt: skip
        with self._cond:
            if self._refuse is not None:
                raise StoreError(self._refuse) from self._cause
            self._inv_buf.append(row)
            self._appended += 1
        if self._writer is None:
            self._start_writer()
        if self._interval is None:
            self._wake.set()  # flush_interval_s=0: commit now (with whatever else is queued)

    def append_health(self, run_id: int, window: HealthWindow) -> None:
        """Queue one self-monitoring window of the runner (``t_ns`` relative to the origin)."""
        w = window
        row = (run_id, w.t_ns, w.window_ms, w.loop_lag_ms, w.cpu_pct, w.inflight, w.client_bound)
        self._append_side(INSERT_HEALTH, row)

    def append_fleet(self, run_id: int, target: str, t_ns: int, state: FleetState) -> None:
        """Queue one reading of a target's fleet (``t_ns`` relative to the origin)."""
        try:
            targets, _ = self._run_cache[run_id]
        except KeyError:
            targets, _ = self._load_run(run_id)
        if target not in targets:
            raise StoreError(f"run {run_id} has no target {target!r} ({list(targets)})")
        row = (run_id, targets[target], t_ns, state.ready, state.busy, state.starting, state.queued)
        self._append_side(INSERT_FLEET, row)

    def _append_side(self, insert: str, row: tuple[Any, ...]) -> None:
        with self._cond:
            if self._refuse is not None:
                raise StoreError(self._refuse) from self._cause
            self._side_buf.setdefault(insert, []).append(row)
            self._appended += 1
        if self._writer is None:
            self._start_writer()
        if self._interval is None:
            self._wake.set()

    def mark_false_ready(
        self, run_id: int, target: str, rows: Sequence[int], judged: Mapping[str, Any]
    ) -> None:
        """Count rows ``rows`` of ``target`` (indexes into ``columns(run_id, target=target,
        phase=None)``) as cold: their provider said a worker was ready, yet they waited for it
        to load (``metrics.false_ready``). ``cold`` becomes 1 so every statistic that splits cold
        from warm puts them with the cold starts; ``execution_ms`` becomes NULL because the
        server's figure holds the load, so a cold start (latency less inference time) falls
        back to the warm inference time. The provider's own ``cold`` and ``execution_ms`` and
        ``judged`` (what they were compared with) are kept under ``detail.false_ready``
        (``false_ready_marks`` reads them). Flushes first; a row marked already is left."""
        self._check_writable()
        if not rows:
            return
        self.flush()
        info = self.run(run_id)
        where, params = self._filter(info, target, None, None)
        with self._write_txn() as conn:
            ids = [r[0] for r in conn.execute(
                f"SELECT rowid FROM invocations WHERE {where} ORDER BY rowid", params
            )]  # fmt: skip
            for row in rows:
                # SET reads the row as it was: the provider_ values are the provider's own
                conn.execute(
                    "UPDATE invocations SET cold = 1, execution_ms = NULL,"
                    " detail = json_set(coalesce(detail, '{}'), '$.false_ready', json_set(json(?),"
                    " '$.provider_cold', cold, '$.provider_execution_ms', execution_ms))"
                    " WHERE rowid = ? AND json_extract(coalesce(detail, '{}'), '$.false_ready')"
                    " IS NULL",
                    (json.dumps(dict(judged)), ids[row]),
                )

    def record_deployment(self, run_id: int, target: str, deployment: Mapping[str, Any]) -> None:
        """Keep what the run found when it opened ``target``'s provider (``TargetRecord.
        deployment``): a tracker's reader must be able to trust a figure months later, and the
        plan says only what was asked for. Masked like the options; the last call wins."""
        self._check_writable()
        if self._version < 4:  # pragma: no cover - a writable store is always migrated
            return
        with self._write_txn() as conn:
            cur = conn.execute(
                "UPDATE targets SET deployment_json = ? WHERE run_id = ? AND name = ?",
                (redact(to_json(dict(deployment))), run_id, target),
            )
        if cur.rowcount != 1:
            raise StoreError(f"{self.path}: run {run_id} has no target {target!r}")

    def set_scenario_status(self, run_id: int, index: int, status: str | None) -> None:
        """Record how scenario ``index`` of a run ended (``'deadline'``: cut by its deadline_s)."""
        self._check_writable()
        if self._version < 3:  # pragma: no cover - a writable store is always migrated
            return
        with self._write_txn() as conn:
            conn.execute(
                "UPDATE scenarios SET status = ? WHERE run_id = ? AND idx = ?",
                (status, run_id, index),
            )

    def end_run(self, run_id: int, status: str, error: str | None = None) -> None:
        """Flush, then commit the run's final status (``completed``, ``cancelled``, ``failed``).

        If the flush fails the run is recorded as ``failed`` with the store's error, which is
        then raised.
        """
        if status not in RUN_STATUSES[1:]:
            raise ValueError(f"status must be one of {RUN_STATUSES[1:]}, got {status!r}")
        if self.readonly or self._closed:  # but a failed writer must not stop this record
            self._check_writable()
        failure: StoreError | None = None
        try:
            self.flush()
        except StoreError as exc:
            failure, status, error = exc, "failed", str(exc)
        with self._write_txn() as conn:
            cur = conn.execute(
                "UPDATE runs SET status = ?, error = ?, ended_wall_ns = ? WHERE id = ?",
                (status, None if error is None else redact(error), time.time_ns(), run_id),
            )
        if cur.rowcount != 1:
            raise StoreError(f"{self.path}: no run with id {run_id}")
        if failure is not None:
            raise failure

    @contextlib.contextmanager
    def _write_txn(self) -> Iterator[sqlite3.Connection]:
        with self._conn_lock, write_txn(self._conn, str(self.path)) as conn:
            yield conn

    def _load_run(self, run_id: int) -> tuple[dict[str, int], int]:
        """Target-name map and wall origin of a run begun elsewhere (e.g. another process)."""
        info = self.run(run_id)
        self._run_cache[run_id] = entry = (
            {t.name: i for i, t in enumerate(info.targets)},
            info.started_wall_ns,
        )
        return entry
