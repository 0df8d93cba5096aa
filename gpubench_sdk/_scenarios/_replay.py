"""``replay``: arrivals (and per-request inputs) from a CSV or JSONL trace, open loop.

Published production traces it reads as they are (column names as each schema documents):

- Azure LLM inference trace 2023 (Splitwise, ISCA 2024; github.com/Azure/AzurePublicDataset,
  AzureLLMInferenceDataset2023.md): ``TIMESTAMP`` (a date-time), ``ContextTokens``,
  ``GeneratedTokens``. ``time_unit = "iso"``, ``fields = {prompt_tokens = "ContextTokens",
  max_tokens = "GeneratedTokens"}``.
- BurstGPT (github.com/HPMLL/BurstGPT, README): ``Timestamp`` (seconds), ``Model``,
  ``Request tokens``, ``Response tokens``, ``Total tokens``, ``Log Type``.
- Azure Functions invocation trace 2021 (SOSP 2021; AzureFunctionsInvocationTrace2021.md):
  ``app``, ``func``, ``end_timestamp`` and ``duration`` (seconds): an end time, so
  ``time_column = "end_timestamp"`` with ``duration_column = "duration"`` sends each request at
  end - duration, when it arrived.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Literal

from .._base._errors import ConfigError
from .._base._records import records
from ._base import (
    DEFAULT_MAX_INFLIGHT,
    MAX_DURATION_S,
    MAX_REQUESTS,
    Count,
    Scenario,
    check,
    check_count,
    check_max_inflight,
    check_seconds,
    finite,
)

if TYPE_CHECKING:
    from ._load import Load

_UNITS = {"s": 1.0, "ms": 1e-3, "us": 1e-6, "ns": 1e-9}


@dataclass(frozen=True, slots=True)
class Arrival:
    at_s: float  # from the window's start, before ``speed``
    fields: Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class Replay(Scenario):
    """Send one request per trace row at its time (relative to the window's first), with the
    row's ``fields`` (body field = column; ``prompt_tokens`` sizes the prompt). ``speed`` 2
    plays twice as fast; ``start_s``/``duration_s`` cut a window of trace time; ``loops``
    plays the window that many times back to back."""

    kind: ClassVar[str] = "replay"
    path: str
    time_column: str = "timestamp"
    time_unit: Literal["s", "ms", "us", "ns", "iso"] = "s"
    duration_column: str | None = None
    fields: dict[str, str] = field(default_factory=dict)
    speed: float = 1.0
    start_s: float = 0.0
    duration_s: float | None = None
    loops: Count = 1
    max_inflight: Count | None = None
    deadline_s: float | None = None
    name: str | None = None

    def __post_init__(self) -> None:
        check(bool(self.path), "replay.path", self.path, "the path of a .csv or .jsonl trace")
        check(
            finite(self.speed) and 0 < self.speed <= 1e6,
            "replay.speed",
            self.speed,
            "a factor > 0 (2: twice as fast as the trace)",
        )
        check(
            self.time_unit in (*_UNITS, "iso"),
            "replay.time_unit",
            self.time_unit,
            "'s', 'ms', 'us', 'ns' or 'iso' (a date-time such as 2023-11-16 18:15:46.68)",
        )
        check_seconds("replay.start_s", self.start_s, zero_ok=True)
        if self.duration_s is not None:
            check_seconds("replay.duration_s", self.duration_s)
        check_count("replay.loops", self.loops, 1, 1_000_000)
        check_max_inflight("replay", self.max_inflight)
        self.check_label()
        arrivals = self.arrivals()  # a missing file or column is refused before the run
        check(
            len(arrivals) * self.loops <= MAX_REQUESTS,
            "replay.loops",
            self.loops,
            f"at most {MAX_REQUESTS:,} requests per target",
        )
        check(
            self.span_s() * self.loops / self.speed <= MAX_DURATION_S,
            "replay.speed",
            self.speed,
            f"a replay lasting at most {MAX_DURATION_S:.0f} s: raise speed or cut duration_s",
        )

    def arrivals(self) -> list[Arrival]:
        """The window's rows in time order (cached per trace file and settings)."""
        return _read(
            self.path,
            self.time_column,
            self.time_unit,
            self.duration_column,
            tuple(sorted(self.fields.items())),
            self.start_s,
            self.duration_s,
        )

    def span_s(self) -> float:
        """The window's length in trace time (its last arrival, or ``duration_s`` if set)."""
        rows = self.arrivals()
        if self.duration_s is not None:
            return self.duration_s
        return rows[-1].at_s if rows else 0.0

    def offsets_s(self) -> Iterator[float]:
        rows = self.arrivals()
        # a loop lasts the window (or, uncut, the last arrival plus the mean gap) so loops
        # neither overlap nor leave a hole
        gap = self.span_s() / max(1, len(rows) - 1) if self.duration_s is None else 0.0
        period = self.span_s() + gap
        for k in range(self.loops):
            for row in rows:
                yield (k * period + row.at_s) / self.speed

    def request_fields(self, i: int) -> Mapping[str, Any] | None:
        rows = self.arrivals()
        return rows[i % len(rows)].fields or None

    def planned(self, targets: int) -> int:
        return len(self.arrivals()) * self.loops * targets

    def inflight(self) -> int:
        return self.max_inflight or min(DEFAULT_MAX_INFLIGHT, max(1, self.planned(1)))

    async def drive(self, load: Load) -> None:
        await load.open_loop(
            lambda _target: self.offsets_s(),
            max_inflight=self.max_inflight,
            fields=self.request_fields,
        )


_CACHE: dict[tuple[Any, ...], list[Arrival]] = {}


def _read(
    path: str,
    time_column: str,
    unit: str,
    duration_column: str | None,
    fields: tuple[tuple[str, str], ...],
    start_s: float,
    duration_s: float | None,
) -> list[Arrival]:
    p = Path(path)
    try:
        stamp = p.stat().st_mtime_ns
    except OSError as exc:
        raise ConfigError("replay.path", path, f"a readable trace file ({exc.strerror})") from None
    key = (str(p.resolve()), stamp, time_column, unit, duration_column, fields, start_s, duration_s)
    if key not in _CACHE:
        rows = [
            _row(r, n, time_column, unit, duration_column, fields)
            for n, r in records(p, "replay.path")
        ]
        check(bool(rows), "replay.path", path, "a trace with at least one row")
        rows.sort(key=lambda a: a.at_s)
        first = rows[0].at_s + start_s
        end = math.inf if duration_s is None else first + duration_s
        window = [Arrival(a.at_s - first, a.fields) for a in rows if first <= a.at_s < end]
        check(bool(window), "replay.start_s", start_s, "a window holding at least one row")
        _CACHE.clear()  # one trace at a time is plenty; never grows with a campaign
        _CACHE[key] = window
    return _CACHE[key]


def _row(
    row: Mapping[str, Any],
    n: int,
    time_column: str,
    unit: str,
    duration_column: str | None,
    fields: tuple[tuple[str, str], ...],
) -> Arrival:
    def cell(column: str, what: str) -> Any:
        if column not in row:
            raise ConfigError(what, column, f"a column of the trace (it has {', '.join(row)})")
        value = row[column]
        if value is None:  # JSON null: a gap in the data, not a value to send
            raise ConfigError(f"{what} (row {n})", value, f"a value in column {column!r}")
        return value

    raw = cell(time_column, "replay.time_column")
    at = _time(raw, unit, f"replay.time_column (row {n})")
    if duration_column is not None:
        where = f"replay.duration_column (row {n})"
        at -= _time(cell(duration_column, "replay.duration_column"), "s", where)
    body = {}
    for key, column in fields:
        value = cell(column, f"replay.fields.{key}")
        body[key] = _number(value)
    return Arrival(at, body)


def _time(raw: Any, unit: str, where: str) -> float:
    """A trace time in seconds: a finite number (or numeric text) of ``unit``, or an ISO
    date-time; a bool, an object or NaN/inf is refused, never dropped from the window."""
    expected = "an ISO date-time" if unit == "iso" else f"a finite number of {unit}"
    if isinstance(raw, bool) or not isinstance(raw, str | int | float):
        raise ConfigError(where, raw, expected)
    try:
        at = (
            datetime.fromisoformat(str(raw)).timestamp()
            if unit == "iso"
            else float(raw) * _UNITS[unit]
        )
    except (ValueError, OverflowError):
        raise ConfigError(where, raw, expected) from None
    if not math.isfinite(at):
        raise ConfigError(where, raw, expected)
    return at


def _number(value: Any) -> Any:
    """CSV cells are text: integers and decimals become numbers, the rest stays as given."""
    if not isinstance(value, str):
        return value
    try:
        return int(value)
    except ValueError:
        try:
            return float(value)
        except ValueError:
            return value
