"""The durable results store: every completed request is on disk within ``flush_interval_s``.

A benchmark that dies (crash, OOM kill, Ctrl-C twice) must not lose what it measured, and the
runner's event loop must never wait on a disk. So ``append`` only turns an ``Invocation`` into a
tuple and puts it on a list under a lock; one writer thread per ``Store`` commits those lists with
``executemany`` at most ``flush_interval_s`` apart (SQLite in WAL mode, ``synchronous=NORMAL``: a
committed transaction survives a process kill). Several processes may append to one file; write
transactions are short and wait on ``busy_timeout``. The file format lives in ``_store_schema``.
"""

from __future__ import annotations

import atexit
import contextlib
import importlib
import json
import math
import os
import socket
import sqlite3
import sys
import threading
import time
import uuid
import weakref
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any, TextIO

import numpy as np
import numpy.typing as npt

from ._errors import ConfigError, StoreError
from ._monitor import HealthWindow
from ._secrets import redact
from ._store_export import write_csv, write_jsonl, write_parquet
from ._store_schema import (
    INSERT_FLEET,
    INSERT_HEALTH,
    INSERT_INVOCATION,
    NUMERIC_COLUMNS,
    OUTCOME_CODE,
    OUTCOMES,
    PHASE_CODE,
    PHASES,
    RUN_STATUSES,
    TEXT_COLUMNS,
    RunInfo,
    ScenarioRecord,
    TargetRecord,
    connect,
    dataframe,
    decode_token_times,
    encode_detail,
    encode_token_times,
    gpubench_version,
    pid_alive,
    stored_version,
    to_json,
)
from ._types import FleetState, Invocation, Phase

_HEALTH_FIELDS = ("t_ns", "window_ms", "loop_lag_ms", "cpu_pct", "inflight", "client_bound")

__all__ = [
    "Columns",
    "RetryAfter",
    "RunInfo",
    "ScenarioRecord",
    "Store",
    "StoreError",
    "TargetRecord",
]

Columns = dict[str, npt.NDArray[Any]]
_READ_COLUMNS = (  # in Invocation's positional order
    "target, scenario, seq, phase, scheduled_ns, start_ns, end_ns, wall_start_ns, outcome,"
    " first_byte_ns, http_status, error, request_id, queue_ms, execution_ms, setup_ms, cold,"
    " cold_confirmed, input_units, output_units, worker_id, token_us, detail, retry_after_s"
)
# A read-only store of an older schema version lacks the newer columns: it reads them as NULL.
_READ_COLUMNS_BY_VERSION = {
    1: _READ_COLUMNS.replace("token_us, detail, retry_after_s", "NULL, NULL, NULL"),
    2: _READ_COLUMNS.replace("retry_after_s", "NULL"),
}
_CHUNK = 5_000  # rows per write transaction: keeps the file lock short for other processes
_RUN_SELECT = (
    "SELECT id, uuid, name, status, error, started_wall_ns, ended_wall_ns, origin_ns, config_json,"
    " host, pid, gpubench_version,"
    " (SELECT count(*) FROM invocations i WHERE i.run_id = runs.id) FROM runs"
)

_writing: weakref.WeakSet[Store] = weakref.WeakSet()  # stores with a writer, for the exit hook

DEFAULT_FLUSH_INTERVAL_S = 0.5


def check_flush_interval(value: float) -> None:
    """``flush_interval_s`` must be a number of seconds from 0 (commit at every request) up."""
    if not (isinstance(value, int | float) and math.isfinite(value) and 0 <= value <= 60):
        raise ConfigError(
            "flush_interval_s", value, "seconds from 0 (commit every request) to 60 (default 0.5)"
        )


@atexit.register
def _close_at_exit() -> None:
    """Commit what forgotten stores still hold when the interpreter exits normally."""
    for store in list(_writing):
        try:
            store.close()
        except StoreError as exc:
            print(f"gpubench: {exc}", file=sys.stderr)


class Store:
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
        self._read_columns = _READ_COLUMNS_BY_VERSION.get(self._version, _READ_COLUMNS)
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
        self._run_cache: dict[int, tuple[dict[str, int], int]] = {}

    def _connect(self) -> sqlite3.Connection:
        return connect(self.path, readonly=self.readonly, busy_timeout_s=self._busy_timeout_s)

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

    # -- writing ------------------------------------------------------------------------------

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
                "INSERT INTO targets VALUES (?, ?, ?, ?, ?, ?)",
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

    def open_writer(self, timeout_s: float = 30.0) -> None:
        """Start the writer and wait until its connection to the file is open.

        The runner calls it before the first request: opened on the first append, the
        connection would compete with the run's sockets for file descriptors, and a run that
        took them all would lose every result. Raises ``StoreError`` if it cannot open.
        """
        self._check_writable()
        self._start_writer()
        deadline = time.monotonic() + timeout_s
        while not self._writer_ready.wait(0.05):
            if self._error is not None or not self._writer_alive():
                break
            if time.monotonic() > deadline:
                raise StoreError(f"{self.path}: the store's writer did not open the file")
        if self._error is not None:
            raise StoreError(self._error) from self._cause

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

    def flush(self) -> None:
        """Block until everything appended so far is committed; raise if the writer failed."""
        with self._cond:
            target = self._appended
            while self._committed < target and self._error is None:
                self._ensure_writer()  # an append may not have started it yet
                if not self._writer_alive():
                    raise StoreError(f"{self.path}: the store's writer has stopped")
                self._wake.set()
                self._cond.wait(0.1)
            if self._error is not None:
                raise StoreError(self._error) from self._cause

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

    def close(self) -> None:
        """Commit what is queued, stop the writer, close the file. A second call does nothing.

        Raises ``StoreError`` if the writer failed (not from ``with`` while another exception
        propagates).
        """
        with self._cond:
            if self._closed:
                return
            self._closed = self._stopping = True
            self._refuse = self._refuse or f"{self.path}: store is closed"
            if self._inv_buf or self._side_buf:
                self._ensure_writer()
        self._wake.set()
        if self._writer is not None and self._writer is not threading.current_thread():
            self._writer.join()
            _writing.discard(self)
        with self._conn_lock:
            self._conn.close()
        if self._error is not None:
            raise StoreError(self._error) from self._cause

    def _check_writable(self) -> None:
        if self._refuse is not None:
            raise StoreError(self._refuse) from self._cause

    @contextlib.contextmanager
    def _write_txn(self) -> Iterator[sqlite3.Connection]:
        with self._conn_lock:
            try:
                self._conn.execute("BEGIN IMMEDIATE")
                try:
                    yield self._conn
                except BaseException:
                    self._conn.execute("ROLLBACK")
                    raise
                self._conn.execute("COMMIT")
            except sqlite3.Error as exc:
                raise StoreError(f"{self.path}: write failed ({exc})") from exc

    def _load_run(self, run_id: int) -> tuple[dict[str, int], int]:
        """Target-name map and wall origin of a run begun elsewhere (e.g. another process)."""
        info = self.run(run_id)
        self._run_cache[run_id] = entry = (
            {t.name: i for i, t in enumerate(info.targets)},
            info.started_wall_ns,
        )
        return entry

    def _start_writer(self) -> None:
        with self._cond:
            self._ensure_writer()

    def _ensure_writer(self) -> None:
        """Start the writer thread unless it exists; the caller holds ``self._cond``."""
        if self._writer is None:
            # A daemon, so a forgotten close() never hangs the interpreter; the atexit hook
            # still commits what is queued on a normal exit.
            self._writer = threading.Thread(
                target=self._writer_main, name=f"gpubench-store:{self.path.name}", daemon=True
            )
            self._writer.start()
            _writing.add(self)

    def _writer_alive(self) -> bool:
        return self._writer is not None and self._writer.is_alive()

    def _writer_main(self) -> None:
        conn: sqlite3.Connection | None = None
        try:
            conn = self._connect()
            self._writer_ready.set()
            while True:
                self._wake.wait(self._interval)
                self._wake.clear()
                with self._cond:
                    inv, self._inv_buf = self._inv_buf, []
                    side, self._side_buf = self._side_buf, {}
                    stopping = self._stopping
                if inv or side:
                    self._commit(conn, inv, side)
                if stopping:
                    return
        except BaseException as exc:
            with self._cond:
                lost = self._appended - self._committed
                self._inv_buf.clear()
                self._side_buf.clear()
                self._error = f"{self.path}: writing results failed ({exc}); {lost} samples lost"
                self._refuse, self._cause = self._error, exc
                self._cond.notify_all()
        finally:
            if conn is not None:
                conn.close()

    def _commit(
        self,
        conn: sqlite3.Connection,
        inv: list[tuple[Any, ...]],
        side: dict[str, list[tuple[Any, ...]]],
    ) -> None:
        side_rows = sum(len(rows) for rows in side.values())
        for start in range(0, max(len(inv), 1), _CHUNK):
            part = inv[start : start + _CHUNK]
            conn.execute("BEGIN IMMEDIATE")
            try:
                conn.executemany(INSERT_INVOCATION, part)
                if start == 0:
                    for insert, rows in side.items():
                        conn.executemany(insert, rows)
                conn.execute("COMMIT")
            except BaseException:
                with contextlib.suppress(sqlite3.Error):
                    conn.execute("ROLLBACK")
                raise
            with self._cond:
                self._committed += len(part) + (side_rows if start == 0 else 0)
                self._cond.notify_all()

    # -- reading ------------------------------------------------------------------------------

    def _query(self, sql: str, params: Sequence[Any] = ()) -> list[Any]:
        with self._conn_lock:
            try:
                return self._conn.execute(sql, params).fetchall()
            except sqlite3.Error as exc:
                raise StoreError(f"{self.path}: read failed ({exc})") from exc

    def runs(self) -> list[RunInfo]:
        """Every run in the file, newest first."""
        return [self._info(row) for row in self._query(_RUN_SELECT + " ORDER BY id DESC")]

    def run(self, ref: int | str) -> RunInfo:
        """One run by id, by uuid or unique uuid prefix (>= 4 chars), or ``'latest'``/``'last'``.

        A decimal string is read as an id when no uuid starts with it.
        """
        if isinstance(ref, int):
            rows = self._query(_RUN_SELECT + " WHERE id = ?", (ref,))
        elif ref.strip().lower() in ("latest", "last"):
            rows = self._query(_RUN_SELECT + " ORDER BY id DESC LIMIT 1")
        else:
            key = ref.strip().lower()
            rows = self._query(
                _RUN_SELECT + " WHERE uuid = ? OR (? >= 4 AND substr(uuid, 1, ?) = ?)",
                (key, len(key), len(key), key),
            )
            if not rows and key.isdigit():
                rows = self._query(_RUN_SELECT + " WHERE id = ?", (int(key),))
            if len(rows) > 1:
                found = ", ".join(r[1] for r in rows)
                raise StoreError(f"run {ref!r} is ambiguous ({found}); give more of the uuid")
        if not rows:
            raise StoreError(
                f"{self.path}: no run {ref!r}; see the stored runs with: gpubench results list"
            )
        return self._info(rows[0])

    def _info(self, row: tuple[Any, ...]) -> RunInfo:
        run_id, run_uuid, name, status, error, wall0, wall1, origin, cfg, host, pid, ver, n = row
        targets = tuple(
            TargetRecord(t[0], t[1], json.loads(t[2]), tuple(json.loads(t[3])))
            for t in self._query(
                "SELECT name, provider, options_json, capabilities_json FROM targets"
                " WHERE run_id = ? ORDER BY idx",
                (run_id,),
            )
        )
        ended = "status" if self._version >= 3 else "NULL"
        scenarios = tuple(
            ScenarioRecord(s[0], json.loads(s[1]), s[2])
            for s in self._query(
                f"SELECT kind, params_json, {ended} FROM scenarios WHERE run_id = ? ORDER BY idx",
                (run_id,),
            )
        )
        if status == "running" and host == socket.gethostname() and pid and not pid_alive(pid):
            status = "interrupted"
        return RunInfo(
            run_id, run_uuid, name, status, error, wall0, wall1, origin, targets, scenarios,
            json.loads(cfg), n, host, ver,
        )  # fmt: skip

    def _iter_invocations(self, run_id: int) -> Iterator[Invocation]:
        info = self.run(run_id)
        names, wall0 = [t.name for t in info.targets], info.started_wall_ns
        with self._conn_lock:
            cur = self._conn.execute(
                f"SELECT {self._read_columns} FROM invocations WHERE run_id = ? ORDER BY rowid",
                (run_id,),
            )
        try:
            while rows := self._fetch(cur):
                for r in rows:
                    tokens = None if r[21] is None else decode_token_times(r[5], r[21]).tolist()
                    yield Invocation(
                        names[r[0]], r[1], r[2], PHASES[r[3]], r[4], r[5], r[6], r[7] + wall0,
                        OUTCOMES[r[8]], r[9], r[10], r[11], r[12], r[13], r[14], r[15],
                        None if r[16] is None else bool(r[16]), bool(r[17]), r[18], r[19], r[20],
                        tokens, None if r[22] is None else json.loads(r[22]), r[23],
                    )  # fmt: skip
        finally:
            cur.close()  # an abandoned export must not pin the WAL

    def _fetch(self, cur: sqlite3.Cursor) -> list[Any]:
        with self._conn_lock:
            return cur.fetchmany(_CHUNK)

    def invocations(self, run_id: int) -> list[Invocation]:
        """A run's invocations, exactly as appended, in commit order."""
        return list(self._iter_invocations(run_id))

    def columns(
        self,
        run_id: int,
        *,
        target: str | None = None,
        scenario: int | None = None,
        phase: Phase | None = Phase.MEASURE,
        text: bool = False,
    ) -> Columns:
        """A run's invocations as equal-length numpy arrays, for analysis without pandas.

        ``target`` holds target indexes into ``RunInfo.targets``; ``outcome`` and ``phase`` hold
        their stored codes. Missing integers read as -1, missing floats as NaN; ``wall_start_ns``
        is absolute. Derived: ``latency_ms``, ``ttfb_ms``. ``text=True`` adds ``error``,
        ``request_id`` and ``worker_id`` as object arrays (``None`` where missing).
        """
        info = self.run(run_id)
        where, params = self._filter(info, target, scenario, phase)
        spec = [(n, e if self._has(e) else "NULL", d) for n, e, d in NUMERIC_COLUMNS] + [
            (n, n, object) for n in TEXT_COLUMNS if text
        ]
        rows = self._query(
            f"SELECT {', '.join(e for _, e, _ in spec)} FROM invocations"
            f" WHERE {where} ORDER BY rowid",
            params,
        )
        by_col = list(zip(*rows, strict=True)) if rows else [() for _ in spec]
        cols: Columns = {n: np.array(v, dtype=d) for (n, _, d), v in zip(spec, by_col, strict=True)}
        cols["wall_start_ns"] += info.started_wall_ns
        cols["latency_ms"] = (cols["end_ns"] - cols["scheduled_ns"]) / 1e6
        fb = cols["first_byte_ns"]
        cols["ttfb_ms"] = np.where(fb >= 0, (fb - cols["scheduled_ns"]) / 1e6, np.nan)
        return cols

    def token_times(
        self,
        run_id: int,
        *,
        target: str | None = None,
        scenario: int | None = None,
        phase: Phase | None = Phase.MEASURE,
    ) -> list[npt.NDArray[np.int64]]:
        """Each request's streamed-token arrival times (ns from the run's origin, like
        ``columns()['start_ns']``), one array per row of ``columns`` with the same filters, in
        the same order; empty where a request streamed no tokens (or in a version 1 file)."""
        info = self.run(run_id)
        where, params = self._filter(info, target, scenario, phase)
        blob = "token_us" if self._version >= 2 else "NULL"
        rows = self._query(
            f"SELECT start_ns, {blob} FROM invocations WHERE {where} ORDER BY rowid", params
        )
        return [decode_token_times(start, blob) for start, blob in rows]

    def _filter(
        self, info: RunInfo, target: str | None, scenario: int | None, phase: Phase | None
    ) -> tuple[str, list[Any]]:
        """The WHERE clause (and its parameters) selecting one run's rows for the readers."""
        where, params = ["run_id = ?"], [info.id]
        if target is not None:
            names = [t.name for t in info.targets]
            if target not in names:
                raise StoreError(f"run {info.id} has no target {target!r}; it has {names}")
            where.append("target = ?")
            params.append(names.index(target))
        if scenario is not None:
            where.append("scenario = ?")
            params.append(scenario)
        if phase is not None:
            where.append("phase = ?")
            params.append(PHASE_CODE[phase])
        return " AND ".join(where), params

    def health(self, run_id: int) -> Columns:
        """The runner's self-monitoring windows of a run, as numpy arrays in time order."""
        rows = self._query(
            f"SELECT {', '.join(_HEALTH_FIELDS)} FROM health WHERE run_id = ? ORDER BY t_ns, rowid",
            (run_id,),
        )
        names = _HEALTH_FIELDS
        dtypes = (np.int64, np.float64, np.float64, np.float64, np.int64, np.bool_)
        by_col = list(zip(*rows, strict=True)) if rows else [() for _ in names]
        return {n: np.array(v, dtype=d) for n, v, d in zip(names, by_col, dtypes, strict=True)}

    def fleet(self, run_id: int, *, target: str | None = None) -> Columns:
        """Fleet readings (workers ready/busy/starting, queue) in time order; -1 = not reported.

        ``target`` is the target index into ``RunInfo.targets``, as in ``columns``.
        """
        info = self.run(run_id)
        sql = "SELECT target, t_ns, ready, busy, starting, queued FROM fleet WHERE run_id = ?"
        params: list[Any] = [run_id]
        if target is not None:
            names = [t.name for t in info.targets]
            if target not in names:
                raise StoreError(f"run {run_id} has no target {target!r} ({names})")
            sql += " AND target = ?"
            params.append(names.index(target))
        rows = self._query(sql + " ORDER BY t_ns, rowid", params)
        names_ = ("target", "t_ns", "ready", "busy", "starting", "queued")
        by_col = list(zip(*rows, strict=True)) if rows else [() for _ in names_]
        return {
            n: np.array([-1 if v is None else v for v in col], dtype=np.int64)
            for n, col in zip(names_, by_col, strict=True)
        }

    def health_windows(self, run_id: int) -> list[HealthWindow]:
        """The same windows as records (what ``client_bound_spans`` takes)."""
        rows = self._query(
            f"SELECT {', '.join(_HEALTH_FIELDS)} FROM health WHERE run_id = ? ORDER BY t_ns, rowid",
            (run_id,),
        )
        return [HealthWindow(t, w, lag, cpu, n, bool(b)) for t, w, lag, cpu, n, b in rows]

    def to_pandas(self, run_id: int) -> Any:
        """All of a run's invocations (both phases) as a ``pandas.DataFrame``.

        Targets, outcomes and phases become categoricals of their names; missing values are
        ``<NA>`` (nullable ``Int64``/``boolean``) or NaN.
        """
        try:
            pd = importlib.import_module("pandas")
        except ImportError:
            raise StoreError("to_pandas() needs pandas: pip install pandas") from None
        names = [t.name for t in self.run(run_id).targets]
        return dataframe(pd, self.columns(run_id, phase=None, text=True), names)

    def _has(self, column: str) -> bool:
        """Whether this file has ``column`` (a read-only older file may lack newer ones)."""
        return column != "retry_after_s" or self._version >= 3

    def retry_after(self, run_id: int) -> dict[str, RetryAfter]:
        """Per target: how many throttled requests were told to wait (``Retry-After``), and
        the median and longest wait they were told, in seconds. Targets without any are left
        out; warm-up requests count too (a throttle is a throttle)."""
        info = self.run(run_id)
        if not self._has("retry_after_s"):
            return {}
        rows = self._query(
            "SELECT target, retry_after_s FROM invocations"
            " WHERE run_id = ? AND retry_after_s IS NOT NULL ORDER BY target",
            (run_id,),
        )
        waits: dict[int, list[float]] = {}
        for target, wait in rows:
            waits.setdefault(target, []).append(float(wait))
        return {
            info.targets[t].name: RetryAfter(len(w), float(np.median(w)), max(w))
            for t, w in waits.items()
        }

    def _scenario_kinds(self, run_id: int) -> list[str]:
        return [s.kind for s in self.run(run_id).scenarios]

    def export_jsonl(self, run_id: int, fp: TextIO) -> None:
        """Write one JSON object per invocation: Invocation's fields, enums as their strings,
        then ``latency_ms`` and ``scenario_kind`` (see ``_store_export``)."""
        write_jsonl(self._iter_invocations(run_id), self._scenario_kinds(run_id), fp)

    def export_csv(self, run_id: int, fp: TextIO) -> None:
        """Write a CSV with a header of Invocation's fields then ``latency_ms`` and
        ``scenario_kind``; empty for None, ``true``/``false``."""
        write_csv(self._iter_invocations(run_id), self._scenario_kinds(run_id), fp)

    def export_parquet(self, run_id: int, path: str | os.PathLike[str]) -> None:
        """Write a Parquet file of the same columns (needs the ``parquet`` extra: pyarrow)."""
        write_parquet(self._iter_invocations(run_id), self._scenario_kinds(run_id), path)


@dataclass(frozen=True, slots=True)
class RetryAfter:
    """The ``Retry-After`` waits a target's throttled requests were told, in seconds."""

    count: int
    median_s: float
    max_s: float
