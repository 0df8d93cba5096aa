"""The format of the results store: DDL, small-integer codes, records, opening a file safely.

Kept apart from ``_store`` so the format (what other tools may read with plain SQLite) is in one
short place; ``_store`` re-exports the records. Every change to the DDL or to a code table bumps
``SCHEMA_VERSION``; an older gpubench refuses a newer file instead of misreading it, and this
one migrates an older file in place when it opens it for writing (``MIGRATIONS``), or reads it
as it is when read-only.

Version history:

* 1: the first format.
* 2: ``invocations.token_us`` (per-token arrival times) and ``invocations.detail`` (JSON).
* 3: ``invocations.retry_after_s`` (REAL: the wait a throttled request was told, from its
  ``Retry-After``; NULL when none was given) and ``scenarios.status`` (TEXT: ``'deadline'``
  when the scenario's ``deadline_s`` cut it short; NULL when it ran to its end or was not
  reached).

``invocations.token_us`` encoding (version 2), for tools that read the file without gpubench:
a BLOB of little-endian unsigned 32-bit integers, one per streamed token (or chunk), each the
token's arrival in **microseconds after the row's ``start_ns``** (floored), ascending; NULL when
the request streamed nothing. So in numpy: ``start_ns + np.frombuffer(blob, "<u4") * 1000`` is
the tokens' times in ns from the run's origin; ``length(token_us) / 4`` in SQL counts them
(gpubench reads a token whose microsecond holds the row's ``first_byte_ns`` as arriving then).
4 bytes a token (a 1,000-token answer is 4 KB) and 1 us resolution, far below network jitter;
offsets reach 2**32 us = 71 minutes, past any request timeout. ``invocations.detail`` is the
request's structured result as compact JSON text (sorted keys), NULL when there is none.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import math
import os
import sqlite3
import struct
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote

import numpy as np
import numpy.typing as npt

from .._base._errors import StoreError
from .._base._types import Invocation, Outcome, Phase
from .._base._version import __version__

log = logging.getLogger("gpubench.store")

SCHEMA_VERSION = 4

#: Stored ``invocations.phase`` codes. Append only: the index is the on-disk value.
PHASES: tuple[Phase, ...] = (Phase.MEASURE, Phase.WARMUP)
PHASE_CODE: dict[Phase, int] = {p: i for i, p in enumerate(PHASES)}
#: Stored ``invocations.outcome`` codes (``Outcome.code``), written to ``meta`` so the file is
#: self-describing for tools that read it without gpubench.
OUTCOMES: tuple[Outcome, ...] = tuple(Outcome)
OUTCOME_CODE: dict[Outcome, int] = {o: o.code for o in OUTCOMES}

RUN_STATUSES = ("running", "completed", "cancelled", "failed")
INVOCATION_FIELDS: tuple[str, ...] = tuple(f.name for f in dataclasses.fields(Invocation))

# Integer timestamps are stored as small relative values on purpose: SQLite's record format
# uses 1-8 bytes per integer by magnitude, so ns since the run origin (< 2**47 for 39 hours)
# takes 6 bytes, while an epoch ns value would take 8. wall_start_ns is therefore stored
# relative to runs.started_wall_ns. REAL columns holding whole numbers are stored as integers.
DDL = """
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL) WITHOUT ROWID;
CREATE TABLE runs (
    id INTEGER PRIMARY KEY,
    uuid TEXT NOT NULL UNIQUE,
    name TEXT NOT NULL,
    status TEXT NOT NULL,
    error TEXT,
    started_wall_ns INTEGER NOT NULL,
    ended_wall_ns INTEGER,
    origin_ns INTEGER NOT NULL,
    config_json TEXT NOT NULL,
    host TEXT,
    pid INTEGER,
    gpubench_version TEXT
);
CREATE TABLE targets (
    run_id INTEGER NOT NULL REFERENCES runs(id),
    idx INTEGER NOT NULL,
    name TEXT NOT NULL,
    provider TEXT NOT NULL,
    options_json TEXT NOT NULL,
    capabilities_json TEXT NOT NULL,
    deployment_json TEXT,
    PRIMARY KEY (run_id, idx)
) WITHOUT ROWID;
CREATE TABLE scenarios (
    run_id INTEGER NOT NULL REFERENCES runs(id),
    idx INTEGER NOT NULL,
    kind TEXT NOT NULL,
    params_json TEXT NOT NULL,
    status TEXT,
    PRIMARY KEY (run_id, idx)
) WITHOUT ROWID;
CREATE TABLE invocations (
    run_id INTEGER NOT NULL,
    target INTEGER NOT NULL,
    scenario INTEGER NOT NULL,
    seq INTEGER NOT NULL,
    phase INTEGER NOT NULL,
    scheduled_ns INTEGER NOT NULL,
    start_ns INTEGER NOT NULL,
    first_byte_ns INTEGER,
    end_ns INTEGER NOT NULL,
    wall_start_ns INTEGER NOT NULL,
    outcome INTEGER NOT NULL,
    http_status INTEGER,
    error TEXT,
    request_id TEXT,
    queue_ms REAL,
    execution_ms REAL,
    setup_ms REAL,
    cold INTEGER,
    cold_confirmed INTEGER NOT NULL,
    input_units INTEGER,
    output_units INTEGER,
    worker_id TEXT,
    token_us BLOB,
    detail TEXT,
    retry_after_s REAL
);
CREATE INDEX invocations_run ON invocations(run_id);
CREATE TABLE health (
    run_id INTEGER NOT NULL,
    t_ns INTEGER NOT NULL,
    window_ms REAL NOT NULL,
    loop_lag_ms REAL NOT NULL,
    cpu_pct REAL NOT NULL,
    inflight INTEGER NOT NULL,
    client_bound INTEGER NOT NULL
);
CREATE INDEX health_run ON health(run_id);
CREATE TABLE fleet (
    run_id INTEGER NOT NULL,
    target INTEGER NOT NULL,
    t_ns INTEGER NOT NULL,
    ready INTEGER,
    busy INTEGER,
    starting INTEGER,
    queued INTEGER
);
CREATE INDEX fleet_run ON fleet(run_id);
"""

INVOCATION_COLUMNS = (
    "run_id, target, scenario, seq, phase, scheduled_ns, start_ns, first_byte_ns, end_ns, "
    "wall_start_ns, outcome, http_status, error, request_id, queue_ms, execution_ms, setup_ms, "
    "cold, cold_confirmed, input_units, output_units, worker_id, token_us, detail, retry_after_s"
)
INSERT_INVOCATION = f"INSERT INTO invocations ({INVOCATION_COLUMNS}) VALUES ({', '.join('?' * 25)})"
#: Upgrades from each older version to the next, run in one write transaction on open.
MIGRATIONS: dict[int, tuple[str, ...]] = {
    1: (
        "ALTER TABLE invocations ADD COLUMN token_us BLOB",
        "ALTER TABLE invocations ADD COLUMN detail TEXT",
    ),
    2: (
        "ALTER TABLE invocations ADD COLUMN retry_after_s REAL",
        "ALTER TABLE scenarios ADD COLUMN status TEXT",
    ),
    3: ("ALTER TABLE targets ADD COLUMN deployment_json TEXT",),
}
#: The columns each version added to ``invocations``: a read-only older file reads NULL there.
ADDED_COLUMNS: dict[int, tuple[str, ...]] = {2: ("token_us", "detail"), 3: ("retry_after_s",)}
TOKEN_DTYPE = np.dtype("<u4")
_TOKEN_US_MAX = 2**32 - 1
_IN_PYTHON_UP_TO = 64  # tokens: numpy is as fast from about 128 on (16: 4.5 against 11.6 us)


def encode_token_times(start_ns: int, token_times_ns: Sequence[int] | None) -> bytes | None:
    """The ``token_us`` BLOB of tokens at ``token_times_ns`` (same origin as ``start_ns``).

    None when there are none, or when any is before the start or 71 minutes after it (not
    measured on this request's clock: storing them would misstate every figure built on them).
    """
    if token_times_ns is None or len(token_times_ns) == 0:  # a numpy array has no truth value
        return None
    short = isinstance(token_times_ns, list) and len(token_times_ns) <= _IN_PYTHON_UP_TO
    if short:
        # The runner's list of a short stream: numpy's conversions cost more than the work
        # (a 16-token stream: 4.9% of the client's loop, profiled)
        offsets: Any = sorted((t - start_ns) // 1000 for t in token_times_ns)
    else:
        offsets = np.sort((np.asarray(token_times_ns, dtype=np.int64) - start_ns) // 1000)
    if offsets[0] < 0:
        return None
    if offsets[-1] > _TOKEN_US_MAX:
        log.warning(
            "token times of a request that streamed for over 71 minutes are not stored "
            "(the format holds uint32 microseconds after the request's start)"
        )
        return None
    if short:
        return struct.pack(f"<{len(offsets)}I", *offsets)  # TOKEN_DTYPE's layout
    return offsets.astype(TOKEN_DTYPE).tobytes()  # type: ignore[no-any-return]


def decode_token_times(
    start_ns: int, blob: bytes | None, first_byte_ns: int | None = None
) -> npt.NDArray[np.int64]:
    """The tokens' times in ns on ``start_ns``'s origin (empty when the request streamed none).

    A token stored as ``d`` microseconds arrived within ``[d, d + 1)`` us; the response's first
    byte (same origin), where it falls inside that microsecond, is the earliest the token can
    have come, and it is given instead. A token read with the headers (one socket read) is
    timed at the first byte exactly: floored alone, it would read up to 999 ns before it.
    """
    if not blob:
        return np.empty(0, dtype=np.int64)
    times = np.frombuffer(blob, dtype=TOKEN_DTYPE).astype(np.int64) * 1000 + start_ns
    # stored ascending: only when the first token reads before the first byte is there any to
    # look at (None or the frame's -1: no first byte, nothing read before it)
    if first_byte_ns is not None and times[0] < first_byte_ns:
        inside = (times < first_byte_ns) & (first_byte_ns < times + 1000)
        times[inside] = first_byte_ns
    return times


def encode_detail(detail: Mapping[str, Any] | None) -> str | None:
    """``detail`` as strict JSON (any Mapping; NaN and infinities as null), so that SQLite's
    ``json_extract`` and other tools can read it without gpubench."""
    if detail is None:
        return None
    return _DETAIL_JSON.encode(_finite(dict(detail)))


# One encoder for every row: json.dumps with options builds a new one per call (half the cost
# of a small detail's encoding, measured).
_DETAIL_JSON = json.JSONEncoder(sort_keys=True, separators=(",", ":"), default=str, allow_nan=False)


def _finite(value: Any) -> Any:
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, Mapping):
        return {str(k): v if type(v) in _AS_IS else _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [v if type(v) in _AS_IS else _finite(v) for v in value]
    return value


_AS_IS = frozenset({str, int, bool, type(None)})  # JSON as they are: no call per value


def stored_version(conn: sqlite3.Connection) -> int:
    """The schema version of an open (checked) store."""
    row = conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
    return int(row[0])


@contextlib.contextmanager
def write_txn(conn: sqlite3.Connection, where: str) -> Iterator[sqlite3.Connection]:
    """One ``BEGIN IMMEDIATE`` transaction on ``conn``: committed when the block ends, rolled
    back when it raises. An SQLite failure becomes ``StoreError("<where>: write failed ...")``.
    The store and the campaign tables both write through it (each with its own connection)."""
    try:
        conn.execute("BEGIN IMMEDIATE")
        try:
            yield conn
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")
    except sqlite3.Error as exc:
        raise StoreError(f"{where}: write failed ({describe(exc, conn)})") from exc


def is_locked(exc: BaseException) -> bool:
    """Whether ``exc`` is SQLite giving up on a lock another connection holds (BUSY or
    LOCKED, with their extended codes: ``sqlite_errorcode`` holds the extended one)."""
    code = getattr(exc, "sqlite_errorcode", None)
    return (
        isinstance(exc, sqlite3.OperationalError)
        and isinstance(code, int)
        and code & 0xFF in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED)
    )


def describe(exc: sqlite3.Error, conn: sqlite3.Connection | None = None) -> str:
    """``exc`` in words; a lock held elsewhere is named with how long was waited and the fix,
    rather than SQLite's bare "database is locked"."""
    if not is_locked(exc):
        return str(exc)
    waited = ""
    if conn is not None:
        with contextlib.suppress(sqlite3.Error):
            waited = f"; waited {conn.execute('PRAGMA busy_timeout').fetchone()[0] / 1e3:g} s"
    return (
        "another connection holds the file's write lock (another gpubench run or campaign"
        f" writing to it, or a sqlite3 session in a transaction){waited}; let it finish, or"
        " use another store"
    )


INSERT_HEALTH = "INSERT INTO health VALUES (?, ?, ?, ?, ?, ?, ?)"
INSERT_FLEET = "INSERT INTO fleet VALUES (?, ?, ?, ?, ?, ?, ?)"


def connect(path: Path, *, readonly: bool, busy_timeout_s: float) -> sqlite3.Connection:
    """Open ``path`` as a gpubench store, creating the schema in a new or empty file.

    Raises ``StoreError`` naming the path for a missing (read-only), foreign or corrupt file,
    and for a file written by a newer gpubench.
    """
    if readonly and not path.exists():
        raise StoreError(f"{path}: no results store here (run a benchmark first)")
    try:
        if readonly:
            uri = f"file:{quote(str(path.absolute()))}?mode=ro"
            conn = sqlite3.connect(uri, uri=True, isolation_level=None, check_same_thread=False)
        else:
            path.parent.mkdir(parents=True, exist_ok=True)
            conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    except (sqlite3.Error, OSError) as exc:
        raise StoreError(f"{path}: cannot open results store ({exc})") from exc
    try:
        conn.execute(f"PRAGMA busy_timeout = {int(busy_timeout_s * 1000)}")
        if not readonly:
            # WAL + NORMAL: a committed transaction survives a process kill (not a power cut),
            # and readers never block the writer.
            conn.execute("PRAGMA journal_mode = WAL")
            conn.execute("PRAGMA synchronous = NORMAL")
        _check_schema(conn, path, readonly)
    except sqlite3.Error as exc:
        why = describe(exc, conn)
        conn.close()
        if is_locked(exc):
            raise StoreError(f"{path}: cannot open the results store: {why}") from exc
        raise StoreError(f"{path}: cannot open as a gpubench results store ({why})") from exc
    except BaseException:
        conn.close()
        raise
    return conn


def _check_schema(conn: sqlite3.Connection, path: Path, readonly: bool) -> None:
    if not readonly:
        conn.execute("BEGIN IMMEDIATE")  # serialise schema creation between processes
    try:
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        if not tables and not readonly:
            for statement in DDL.split(";"):  # not executescript: it would COMMIT first
                if statement.strip():
                    conn.execute(statement)
            conn.executemany(
                "INSERT INTO meta VALUES (?, ?)",
                [
                    ("schema_version", str(SCHEMA_VERSION)),
                    ("outcome_codes", json.dumps([o.value for o in OUTCOMES])),
                    ("phase_codes", json.dumps([p.value for p in PHASES])),
                ],
            )
        elif "meta" not in tables:
            raise StoreError(f"{path}: not a gpubench results store (no 'meta' table)")
        else:
            meta = dict(conn.execute("SELECT key, value FROM meta").fetchall())
            version = _check_meta(meta, path)
            if version < SCHEMA_VERSION and not readonly:
                _migrate(conn, version)
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise
    if conn.in_transaction:
        conn.execute("COMMIT")


def _migrate(conn: sqlite3.Connection, version: int) -> None:
    """Bring an older store up to ``SCHEMA_VERSION``, inside the caller's write transaction:
    every step commits together or not at all, and another process opening the file waits."""
    for old in range(version, SCHEMA_VERSION):
        for statement in MIGRATIONS[old]:
            conn.execute(statement)
    conn.execute("UPDATE meta SET value = ? WHERE key = 'schema_version'", (str(SCHEMA_VERSION),))


def _check_meta(meta: dict[str, str], path: Path) -> int:
    try:
        version = int(meta["schema_version"])
        outcomes = json.loads(meta["outcome_codes"])
    except (KeyError, ValueError) as exc:
        raise StoreError(f"{path}: not a gpubench results store (bad meta: {exc})") from None
    if version > SCHEMA_VERSION:
        raise StoreError(
            f"{path}: results store schema version {version} is newer than this gpubench "
            f"supports ({SCHEMA_VERSION}); upgrade gpubench (pip install -U gpubench-sdk)"
        )
    if version < 1:
        raise StoreError(f"{path}: unknown results store schema version {version}")
    if outcomes != [o.value for o in OUTCOMES[: len(outcomes)]]:
        raise StoreError(
            f"{path}: stored outcome codes {outcomes} do not match this gpubench; "
            "upgrade gpubench (pip install -U gpubench-sdk)"
        )
    return version


@dataclass(frozen=True)
class TargetRecord:
    """One target of a run as stored; its position in ``RunInfo.targets`` is its stored index."""

    name: str
    provider: str
    options: Mapping[str, Any] = field(default_factory=dict)
    capabilities: Sequence[str] = ()
    #: What the run found when it opened the provider (``Store.record_deployment``): the
    #: plugin's distribution and version, the scaling settings and what is deployed (model or
    #: image, hardware) as read from the provider.
    #: None for a run stored before version 4, or one that never opened its providers.
    deployment: Mapping[str, Any] | None = None


@dataclass(frozen=True)
class ScenarioRecord:
    """One scenario of a run; its position in ``RunInfo.scenarios`` is ``Invocation.scenario``."""

    kind: str
    params: Mapping[str, Any] = field(default_factory=dict)
    status: str | None = None  # "deadline": cut short by its deadline_s; None: ran to its end

    def key(self, index: int) -> str:
        """``"<index>:<name>"`` when the plan named it, else ``"<index>:<kind>"``: how summary
        and report tables label it (the index keeps two scenarios of one kind apart). The
        runner stores the default name ``"<kind>-<index>"`` too; that one reads as the kind."""
        name = self.params.get("name")
        named = isinstance(name, str) and name and name != f"{self.kind}-{index}"
        return f"{index}:{name if named else self.kind}"


@dataclass(frozen=True)
class RunInfo:
    """A run as stored. ``status`` reads ``'interrupted'`` for a ``'running'`` run whose process
    (on this host) is gone; ``samples`` counts its stored invocations. ``error`` says why a
    run failed, or why it stopped early (a request budget or ``max_cost_usd`` reached)."""

    id: int
    uuid: str
    name: str
    status: str
    error: str | None
    started_wall_ns: int
    ended_wall_ns: int | None
    origin_ns: int
    targets: tuple[TargetRecord, ...]
    scenarios: tuple[ScenarioRecord, ...]
    config: Mapping[str, Any]
    samples: int
    host: str | None = None
    gpubench_version: str | None = None


# columns(): (name, SQL expression, dtype). Nullable integers read as -1, nullable floats as NaN.
NUMERIC_COLUMNS: tuple[tuple[str, str, Any], ...] = (
    ("target", "target", np.int16),
    ("scenario", "scenario", np.int32),
    ("seq", "seq", np.int64),
    ("phase", "phase", np.int8),
    ("scheduled_ns", "scheduled_ns", np.int64),
    ("start_ns", "start_ns", np.int64),
    ("first_byte_ns", "coalesce(first_byte_ns, -1)", np.int64),
    ("end_ns", "end_ns", np.int64),
    ("wall_start_ns", "wall_start_ns", np.int64),
    ("outcome", "outcome", np.int8),
    ("http_status", "coalesce(http_status, -1)", np.int16),
    ("queue_ms", "queue_ms", np.float64),
    ("execution_ms", "execution_ms", np.float64),
    ("setup_ms", "setup_ms", np.float64),
    ("cold", "coalesce(cold, -1)", np.int8),
    ("cold_confirmed", "cold_confirmed", np.bool_),
    ("input_units", "coalesce(input_units, -1)", np.int64),
    ("output_units", "coalesce(output_units, -1)", np.int64),
    ("retry_after_s", "retry_after_s", np.float64),
)
TEXT_COLUMNS = ("error", "request_id", "worker_id")


def dataframe(pd: Any, cols: dict[str, Any], target_names: list[str]) -> Any:
    """``Store.columns`` arrays as a DataFrame with categoricals and nullable dtypes."""
    cat = pd.Categorical.from_codes
    cols["target"] = cat(cols["target"], categories=target_names)
    cols["phase"] = cat(cols["phase"], categories=[p.value for p in PHASES])
    cols["outcome"] = cat(cols["outcome"], categories=[o.value for o in OUTCOMES])
    for name in ("first_byte_ns", "http_status", "input_units", "output_units"):
        cols[name] = pd.arrays.IntegerArray(cols[name].astype(np.int64), cols[name] < 0)
    cols["cold"] = pd.arrays.BooleanArray(cols["cold"] == 1, cols["cold"] < 0)
    return pd.DataFrame(cols)


def to_json(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), default=str)


def pid_alive(pid: int) -> bool:
    """Whether ``pid`` runs on this host. POSIX only: on Windows ``os.kill`` would end it."""
    if os.name != "posix":
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def gpubench_version() -> str:
    return __version__
