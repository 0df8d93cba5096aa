"""A run's invocations as files other tools read: JSON Lines, CSV and Parquet.

Every format holds ``Invocation``'s fields (enums as their strings) and two derived columns a
spreadsheet or notebook needs first: ``latency_ms`` (scheduled send to last byte, the figure
every summary is built on) and ``scenario_kind`` (``burst``, ``rate``, ``cold_starts``: the
``scenario`` column is the scenario's index in the plan).
"""

from __future__ import annotations

import csv
import importlib
import json
import os
from collections.abc import Iterable, Sequence
from itertools import islice
from typing import Any, TextIO

from .._base._errors import StoreError
from .._base._types import Invocation, Outcome, Phase
from ._schema import INVOCATION_FIELDS, encode_detail

#: The columns of every export, in order.
EXPORT_FIELDS: tuple[str, ...] = (*INVOCATION_FIELDS, "latency_ms", "scenario_kind")
_TOKENS_AT = INVOCATION_FIELDS.index("token_times_ns")
_DETAIL_AT = INVOCATION_FIELDS.index("detail")
_ROWS_PER_BATCH = 10_000


def plain_values(inv: Invocation, kinds: Sequence[str]) -> list[Any]:
    """``inv``'s export row: fields in declaration order, enums as their strings, token times
    as a list of ints, ``detail`` as a plain dict, then ``latency_ms`` and ``scenario_kind``."""
    values = [getattr(inv, f) for f in INVOCATION_FIELDS]
    out = [v.value if isinstance(v, Phase | Outcome) else v for v in values]
    out[_TOKENS_AT] = None if inv.token_times_ns is None else [int(t) for t in inv.token_times_ns]
    out[_DETAIL_AT] = None if inv.detail is None else dict(inv.detail)
    kind = kinds[inv.scenario] if 0 <= inv.scenario < len(kinds) else None
    return [*out, inv.latency_ms, kind]


def write_jsonl(invs: Iterable[Invocation], kinds: Sequence[str], fp: TextIO) -> None:
    for inv in invs:
        row = dict(zip(EXPORT_FIELDS, plain_values(inv, kinds), strict=True))
        fp.write(json.dumps(row, default=str) + "\n")


def write_csv(invs: Iterable[Invocation], kinds: Sequence[str], fp: TextIO) -> None:
    """CSV: token times as one cell of space-separated ns offsets, ``detail`` as JSON text."""
    w = csv.writer(fp, lineterminator="\n")
    w.writerow(EXPORT_FIELDS)
    for inv in invs:
        values = plain_values(inv, kinds)
        tokens = values[_TOKENS_AT]
        values[_TOKENS_AT] = None if tokens is None else " ".join(map(str, tokens))
        values[_DETAIL_AT] = encode_detail(inv.detail)
        w.writerow(
            "" if v is None else ("true" if v else "false") if isinstance(v, bool) else v
            for v in values
        )


def write_parquet(
    invs: Iterable[Invocation], kinds: Sequence[str], path: str | os.PathLike[str]
) -> None:
    """Parquet (needs pyarrow: ``pip install 'gpubench-sdk[parquet]'``), written in batches so
    a long run never sits in memory whole. Token times are a list of int64 per row, ``detail``
    is JSON text (its keys vary from row to row)."""
    try:
        pa = importlib.import_module("pyarrow")
        pq = importlib.import_module("pyarrow.parquet")
    except ImportError:
        raise StoreError(
            "Parquet export needs pyarrow: pip install 'gpubench-sdk[parquet]'"
        ) from None
    schema = pa.schema([(name, _ARROW_TYPES[name](pa)) for name in EXPORT_FIELDS])
    rows = iter(invs)
    try:
        with pq.ParquetWriter(os.fspath(path), schema) as writer:
            while batch := list(islice(rows, _ROWS_PER_BATCH)):
                columns = list(zip(*(plain_values(i, kinds) for i in batch), strict=True))
                columns[_DETAIL_AT] = tuple(encode_detail(i.detail) for i in batch)
                writer.write_table(pa.Table.from_arrays(list(map(list, columns)), schema=schema))
    except OSError as exc:
        raise StoreError(f"{os.fspath(path)}: cannot write Parquet ({exc})") from exc


def _int(pa: Any) -> Any:
    return pa.int64()


_ARROW_TYPES: dict[str, Any] = {
    "target": lambda pa: pa.string(),
    "scenario": lambda pa: pa.int32(),
    "seq": _int,
    "phase": lambda pa: pa.string(),
    "scheduled_ns": _int,
    "start_ns": _int,
    "end_ns": _int,
    "wall_start_ns": _int,
    "outcome": lambda pa: pa.string(),
    "first_byte_ns": _int,
    "http_status": lambda pa: pa.int32(),
    "error": lambda pa: pa.string(),
    "request_id": lambda pa: pa.string(),
    "queue_ms": lambda pa: pa.float64(),
    "execution_ms": lambda pa: pa.float64(),
    "setup_ms": lambda pa: pa.float64(),
    "cold": lambda pa: pa.bool_(),
    "cold_confirmed": lambda pa: pa.bool_(),
    "input_units": _int,
    "output_units": _int,
    "worker_id": lambda pa: pa.string(),
    "token_times_ns": lambda pa: pa.list_(pa.int64()),
    "detail": lambda pa: pa.string(),
    "retry_after_s": lambda pa: pa.float64(),
    "latency_ms": lambda pa: pa.float64(),
    "scenario_kind": lambda pa: pa.string(),
}
