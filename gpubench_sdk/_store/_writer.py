"""The store's writer thread: how queued rows reach the disk, and how callers wait for them.

``Store.append`` (in ``_store``) only puts a row on a list under ``_cond``; the thread here
commits those lists with ``executemany`` at most ``flush_interval_s`` apart, ``flush`` waits for
it and ``close`` stops it. It is separate because it is the one part of the store with its own
thread and locking protocol; ``Store`` is the only class that mixes it in, and its ``__init__``
sets the state declared below.
"""

from __future__ import annotations

import atexit
import contextlib
import logging
import sqlite3
import sys
import threading
import time
import weakref
from pathlib import Path
from typing import Any

from .._base._errors import StoreError
from ._schema import INSERT_INVOCATION, connect, describe, is_locked

log = logging.getLogger("gpubench.store")

_CHUNK = 5_000  # rows per write transaction: keeps the file lock short for other processes

_writing: weakref.WeakSet[StoreWriter] = weakref.WeakSet()  # stores with a writer, for the hook


@atexit.register
def _close_at_exit() -> None:
    """Commit what forgotten stores still hold when the interpreter exits normally."""
    for store in list(_writing):
        try:
            store.close()
        except StoreError as exc:
            print(f"gpubench: {exc}", file=sys.stderr)


class StoreWriter:
    """The writer thread of a ``Store`` and the calls that wait on it (a mixin of ``Store``)."""

    path: Path
    readonly: bool
    _busy_timeout_s: float
    _interval: float | None  # None: the writer waits for each append (flush_interval_s=0)
    _conn: sqlite3.Connection  # the caller-side connection, closed by close()
    _conn_lock: threading.RLock
    _cond: threading.Condition  # guards the buffers, counters and state below
    _wake: threading.Event
    _inv_buf: list[tuple[Any, ...]]
    _side_buf: dict[str, list[tuple[Any, ...]]]
    _appended: int
    _committed: int
    _refuse: str | None
    _error: str | None
    _cause: BaseException | None
    _closed: bool
    _stopping: bool
    _writer: threading.Thread | None
    _writer_ready: threading.Event
    # While another connection holds the write lock past busy_timeout_s: the lock in words
    # (None otherwise), and when the last try that failed on it began (monotonic). The rows
    # stay queued meanwhile; flush() fails once a try begun after it has failed, close() after
    # one more try, so no wait on a lock is unbounded.
    _locked_why: str | None
    _lock_try_failed: float

    def _connect(self) -> sqlite3.Connection:
        return connect(self.path, readonly=self.readonly, busy_timeout_s=self._busy_timeout_s)

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

    def flush(self) -> None:
        """Block until everything appended so far is committed; raise if the writer failed."""
        began = time.monotonic()
        with self._cond:
            target = self._appended
            while self._committed < target and self._error is None:
                self._ensure_writer()  # an append may not have started it yet
                if not self._writer_alive():
                    raise StoreError(f"{self.path}: the store's writer has stopped")
                # Only a try that began after this call and still failed ends the wait: a
                # whole busy_timeout_s inside it, and a lock released meanwhile never trips it.
                if self._locked_why is not None and self._lock_try_failed >= began:
                    waiting = self._appended - self._committed
                    raise StoreError(
                        f"{self.path}: {waiting} results not yet written: {self._locked_why}"
                    )
                self._wake.set()
                self._cond.wait(0.1)
            if self._error is not None:
                raise StoreError(self._error) from self._cause

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
            self._commit_chunk(conn, part, side if start == 0 else {})
            with self._cond:
                self._committed += len(part) + (side_rows if start == 0 else 0)
                self._cond.notify_all()

    def _commit_chunk(
        self,
        conn: sqlite3.Connection,
        part: list[tuple[Any, ...]],
        side: dict[str, list[tuple[Any, ...]]],
    ) -> None:
        """One transaction. While another connection holds the write lock past busy_timeout_s
        (SQLite's own wait), the rows stay here and the writer tries again: a run survives a
        lock of any length. Once close() has begun, one more wait is the last."""
        while True:
            with self._cond:
                stopping = self._stopping  # close() began before this try
            tried = time.monotonic()
            try:
                conn.execute("BEGIN IMMEDIATE")
                try:
                    conn.executemany(INSERT_INVOCATION, part)
                    for insert, rows in side.items():
                        conn.executemany(insert, rows)
                    conn.execute("COMMIT")
                except BaseException:
                    with contextlib.suppress(sqlite3.Error):
                        conn.execute("ROLLBACK")
                    raise
            except sqlite3.OperationalError as exc:
                if not is_locked(exc):
                    raise
                why = describe(exc, conn)
                with self._cond:
                    first = self._locked_why is None
                    self._locked_why, self._lock_try_failed = why, tried
                    waiting = self._appended - self._committed
                    self._cond.notify_all()  # a flush() waiting on this try
                if first:  # logged outside the lock: a slow handler must not block append()
                    log.warning(
                        "%s: %s; %d results wait in memory and are written once it is released",
                        self.path,
                        why,
                        waiting,
                    )
                if stopping:  # a whole wait after close() began failed: that was the last
                    raise StoreError(why) from exc
                time.sleep(0.05)  # SQLite waited busy_timeout_s already, unless that is 0
                continue
            with self._cond:
                released = self._locked_why is not None
                self._locked_why = None
            if released:
                log.warning("%s: the write lock was released; writing resumes", self.path)
            return
