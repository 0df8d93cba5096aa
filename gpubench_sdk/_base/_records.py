"""Records read from a table file, streamed: CSV with a header, JSON lines, or one JSON array.

The one reader of the files a plan points at (a replayed trace, a dataset of prompts), so that
every one of them takes the same formats and refuses a broken file the same way: at the line
where it goes wrong, naming the plan's field. Nothing is held but the record at hand, so a file
of gigabytes is read in the memory of its largest record.
"""

from __future__ import annotations

import csv
import json
import re
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import IO, Any

from ._errors import ConfigError

SUFFIXES = (".csv", ".jsonl", ".ndjson", ".json")
_CHUNK = 1 << 16
# A JSON array's record larger than this is refused rather than buffered without end: a
# malformed one would otherwise pull the rest of the file into memory looking for its end.
MAX_RECORD_CHARS = 16 << 20
_BETWEEN = re.compile(r"[\s,]*")


def records(path: Path, field: str) -> Iterator[tuple[int, Mapping[str, Any]]]:
    """``path``'s records with their line numbers, each a mapping of column to value. A file
    that is not a clean table (a row of the wrong width, a line that is not a JSON object,
    bytes that are not UTF-8, a runaway cell) is refused at the line where it goes wrong, as
    a ConfigError on ``field`` (the plan's name for the path, e.g. ``replay.path``)."""
    suffix = path.suffix.lower()
    if suffix not in SUFFIXES:
        raise ConfigError(field, str(path), "a .csv or .jsonl file (or .ndjson, .json)")
    n = 1
    try:
        with path.open(encoding="utf-8-sig", newline="") as fp:  # a spreadsheet's BOM too
            if suffix == ".csv":
                reader = csv.DictReader(fp)
                for row in reader:
                    n = reader.line_num
                    _check_width(path, field, n, row, reader.fieldnames or [])
                    yield n, row
                return
            head = fp.read(_CHUNK)
            if head.lstrip().startswith("["):  # one JSON array of records (ShareGPT's files)
                yield from _array(fp, head, path, field)
                return
            fp.seek(0)  # JSON lines: read again from the top, a line at a time
            for n, line in enumerate(fp, start=1):
                if line.strip():
                    yield n, _json_row(path, field, n, line)
    except csv.Error as exc:  # a cell over the csv module's 128 KiB, a stray NUL
        raise ConfigError(f"{field} ({path.name}:{n + 1})", "(not CSV)",
                          f"a CSV table: {exc}; is it the right file?") from None  # fmt: skip
    except UnicodeDecodeError as exc:
        raise ConfigError(
            f"{field} ({path.name})",
            "(not UTF-8)",
            f"a UTF-8 file: it holds {exc.object[exc.start : exc.start + 1]!r}, which is not "
            "UTF-8 (another encoding, or binary data); save it as UTF-8",
        ) from None


def _array(
    fp: IO[str], buf: str, path: Path, field: str
) -> Iterator[tuple[int, Mapping[str, Any]]]:
    """The objects of one JSON array, decoded one at a time from a sliding buffer."""
    decoder = json.JSONDecoder()
    pos = buf.index("[") + 1
    line = 1 + buf.count("\n", 0, pos)
    while True:
        gap = _BETWEEN.match(buf, pos)
        assert gap is not None  # the pattern matches the empty string
        line += buf.count("\n", pos, gap.end())
        pos = gap.end()
        if pos == len(buf):
            more = fp.read(_CHUNK)
            if not more:
                raise ConfigError(f"{field} ({path.name}:{line})", "(cut short)",
                                  "a JSON array closed by ']'")  # fmt: skip
            buf, pos = more, 0
            continue
        if buf[pos] == "]":
            return
        try:
            obj, end = decoder.raw_decode(buf, pos)
        except json.JSONDecodeError as exc:
            if len(buf) - pos >= MAX_RECORD_CHARS:
                raise ConfigError(f"{field} ({path.name}:{line})", "(a runaway record)",
                                  f"records under {MAX_RECORD_CHARS >> 20} MiB each: this one is "
                                  f"longer, or malformed ({exc.msg})") from None  # fmt: skip
            more = fp.read(_CHUNK)
            if not more and exc.pos >= len(buf):  # the file ends inside the record
                raise ConfigError(f"{field} ({path.name}:{line})", "(cut short)",
                                  "a JSON array closed by ']': the file ends inside this "
                                  "record") from None  # fmt: skip
            if not more:  # a mistake within the record
                raise ConfigError(f"{field} ({path.name}:{line})", "(not JSON)",
                                  f"an array of JSON objects ({exc.msg})") from None  # fmt: skip
            buf, pos = buf[pos:] + more, 0
            continue
        if not isinstance(obj, dict):
            raise ConfigError(f"{field} ({path.name}:{line})", obj,
                              "an array of JSON objects, e.g. [{\"prompt\": \"...\"}]")  # fmt: skip
        yield line, obj
        line += buf.count("\n", pos, end)
        pos = end
        if pos > _CHUNK:  # keep the buffer about one chunk long
            buf, pos = buf[pos:], 0


def _check_width(
    path: Path, field: str, n: int, row: Mapping[Any, Any], header: Sequence[str]
) -> None:
    """csv.DictReader pads a short row with None and gathers a long one's extra cells under
    the key None: either would shift values into the wrong columns without a word."""
    if None in row:
        raise ConfigError(f"{field} ({path.name}:{n})", "(a long row)",
                          f"as many cells per row as the header ({len(header)}); this one has "
                          f"{len(header) + len(row[None])}")  # fmt: skip
    missing = [column for column in header if row.get(column) is None]
    if missing:
        raise ConfigError(f"{field} ({path.name}:{n})", "(a short row)",
                          f"as many cells per row as the header ({len(header)}); this one has no "
                          f"{', '.join(missing)}")  # fmt: skip


def _json_row(path: Path, field: str, n: int, line: str) -> Mapping[str, Any]:
    try:
        obj = json.loads(line)
    except ValueError as exc:
        raise ConfigError(
            f"{field} ({path.name}:{n})", "(not JSON)", f"one JSON object per line ({exc})"
        ) from None
    if not isinstance(obj, dict):
        raise ConfigError(f"{field} ({path.name}:{n})", obj,
                          "one JSON object per line, e.g. {\"timestamp\": 1.5}")  # fmt: skip
    return obj
