"""The store's read side: runs, invocations, numpy columns, token times, ``Retry-After``
waits, health windows and fleet readings, and the exports built on them.

Separate from the writing side (``_store``, ``_writer``) because reads share none of its
buffering or thread: they run on the caller's connection under ``_conn_lock`` and work the same
on a read-only file of an older schema version (missing columns read as NULL). ``Store`` is the
only class that mixes it in; its ``__init__`` sets the state declared below.
"""

from __future__ import annotations

import contextlib
import importlib
import json
import os
import socket
import sqlite3
import threading
from collections.abc import Generator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

import numpy as np
import numpy.typing as npt

from .._base._errors import StoreError
from .._base._monitor import HealthWindow
from .._base._types import Invocation, Phase
from ._export import write_csv, write_jsonl, write_parquet
from ._schema import (
    NUMERIC_COLUMNS,
    OUTCOMES,
    PHASE_CODE,
    PHASES,
    TEXT_COLUMNS,
    RunInfo,
    ScenarioRecord,
    TargetRecord,
    dataframe,
    decode_token_times,
    pid_alive,
)

Columns = dict[str, npt.NDArray[Any]]

_HEALTH_FIELDS = ("t_ns", "window_ms", "loop_lag_ms", "cpu_pct", "inflight", "client_bound")
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
_FETCH_ROWS = 5_000  # rows per fetch of a streamed read (an export): bounded memory
_RUN_SELECT = (
    "SELECT id, uuid, name, status, error, started_wall_ns, ended_wall_ns, origin_ns, config_json,"
    " host, pid, gpubench_version,"
    " (SELECT count(*) FROM invocations i WHERE i.run_id = runs.id) FROM runs"
)


def read_columns(version: int) -> str:
    """The SELECT list that reads an ``Invocation`` from a file of schema ``version``."""
    return _READ_COLUMNS_BY_VERSION.get(version, _READ_COLUMNS)


class StoreReads:
    """The read queries and exports of a ``Store`` (a mixin of ``Store``)."""

    path: Path
    _conn: sqlite3.Connection
    _conn_lock: threading.RLock
    _version: int  # the file's schema version: an older read-only file lacks newer columns
    _read_columns: str

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
        deployment = "deployment_json" if self._version >= 4 else "NULL"
        targets = tuple(
            TargetRecord(
                t[0], t[1], json.loads(t[2]), tuple(json.loads(t[3])), t[4] and json.loads(t[4])
            )
            for t in self._query(
                f"SELECT name, provider, options_json, capabilities_json, {deployment}"
                " FROM targets WHERE run_id = ? ORDER BY idx",
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

    def _iter_invocations(self, run_id: int) -> Generator[Invocation, None, None]:
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
                    blob = r[21]  # the first byte (r[9]) bounds a token read with the headers
                    tokens = None if blob is None else decode_token_times(r[5], blob, r[9]).tolist()
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
            return cur.fetchmany(_FETCH_ROWS)

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
            f"SELECT start_ns, {blob}, first_byte_ns FROM invocations WHERE {where} ORDER BY rowid",
            params,
        )
        return [decode_token_times(start, blob, first) for start, blob, first in rows]

    def false_ready_marks(
        self, run_id: int, *, target: str | None = None, phase: Phase | None = Phase.MEASURE
    ) -> Columns:
        """Which rows of ``columns`` (same filters, same order) the run counted as cold-tail
        because their provider had said "ready" before they could be served
        (``mark_false_ready``): ``marked``, and the provider's own ``cold`` (-1: unknown) and
        ``execution_ms`` (NaN: none) for them, which ``columns`` no longer shows."""
        info = self.run(run_id)
        where, params = self._filter(info, target, None, phase)
        # a version 1 file has no detail column: nothing in it was ever marked
        fr = "json_extract(detail, '$.false_ready')" if self._version >= 2 else "NULL"
        rows = self._query(
            f"SELECT {fr} IS NOT NULL, coalesce(json_extract({fr}, '$.provider_cold'), -1),"
            f" json_extract({fr}, '$.provider_execution_ms') FROM invocations"
            f" WHERE {where} ORDER BY rowid",
            params,
        )
        marked, cold, execution = zip(*rows, strict=True) if rows else ((), (), ())
        return {
            "marked": np.array(marked, dtype=np.bool_),
            "provider_cold": np.array(cold, dtype=np.int8),
            "provider_execution_ms": np.array(execution, dtype=np.float64),
        }

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

    # -- exports (the formats are in _store_export) ------------------------------------------

    def _scenario_kinds(self, run_id: int) -> list[str]:
        return [s.kind for s in self.run(run_id).scenarios]

    # Each export closes its row cursor itself, failed write or not: left to the garbage
    # collector, it would be closed after the store (and fail there, on a closed database).
    def export_jsonl(self, run_id: int, fp: TextIO) -> None:
        """Write one JSON object per invocation: Invocation's fields, enums as their strings,
        then ``latency_ms`` and ``scenario_kind`` (see ``_export``)."""
        with contextlib.closing(self._iter_invocations(run_id)) as invs:
            write_jsonl(invs, self._scenario_kinds(run_id), fp)

    def export_csv(self, run_id: int, fp: TextIO) -> None:
        """Write a CSV with a header of Invocation's fields then ``latency_ms`` and
        ``scenario_kind``; empty for None, ``true``/``false``."""
        with contextlib.closing(self._iter_invocations(run_id)) as invs:
            write_csv(invs, self._scenario_kinds(run_id), fp)

    def export_parquet(self, run_id: int, path: str | os.PathLike[str]) -> None:
        """Write a Parquet file of the same columns (needs the ``parquet`` extra: pyarrow)."""
        with contextlib.closing(self._iter_invocations(run_id)) as invs:
            write_parquet(invs, self._scenario_kinds(run_id), path)


@dataclass(frozen=True, slots=True)
class RetryAfter:
    """The ``Retry-After`` waits a target's throttled requests were told, in seconds."""

    count: int
    median_s: float
    max_s: float
