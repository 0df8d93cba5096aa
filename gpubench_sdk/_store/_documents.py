"""The tracker's data documents: one small JSON file per finished campaign slot, kept in git.

``gpubench campaign export`` writes them and ``gpubench site build`` reads them, two layers
that may not import each other, so the format lives here, below both:

* where a document lives: ``DATA_DIR/data/YYYY/MM/DD/<campaign>-<slot>.json`` (the slot's
  local date in the campaign's time zone);
* how it is written (``dump``): sorted keys, one key per line, floats to 6 significant digits,
  NaN as ``null``, no time of the export itself, so re-exporting a stored slot gives the same
  bytes and a new day is a new file in a diff;
* how it is read back (``read_documents``): the schema name and version checked, each error
  naming the file, the field and the fix.

A document is append-only data: a newer gpubench may add fields (readers ignore what they do
not know) but changes ``SCHEMA_VERSION`` when a field changes meaning.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from .._base._errors import ConfigError

SCHEMA = "gpubench-tracker"
SCHEMA_VERSION = 1
_DATE = re.compile(r"^(\d{4})-(\d{2})-(\d{2})$")
_SAFE = re.compile(r"[^A-Za-z0-9._-]+")


def stable(value: Any) -> Any:
    """``value`` with every float at 6 significant digits and NaN/inf as ``None``: the same
    figure prints the same on every platform, and a rounding wobble is no diff."""
    if isinstance(value, float):
        return float(f"{value:.6g}") if math.isfinite(value) else None
    if isinstance(value, Mapping):
        return {str(k): stable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [stable(v) for v in value]
    return value


def dump(document: Mapping[str, Any]) -> str:
    """The document's canonical text (``stable`` values, sorted keys, a final newline)."""
    return json.dumps(stable(document), sort_keys=True, indent=1, ensure_ascii=False) + "\n"


def file_name(campaign: str, slot: int) -> str:
    """``<campaign>-<slot>.json``, the campaign's name made safe for any file system."""
    return f"{_SAFE.sub('_', campaign).strip('_') or 'campaign'}-{slot}.json"


def document_path(data_dir: str | Path, local_date: str, campaign: str, slot: int) -> Path:
    """Where the document of ``campaign``'s ``slot`` on ``local_date`` (YYYY-MM-DD) lives."""
    m = _DATE.match(local_date)
    if m is None:
        raise ConfigError("local_date", local_date, "a date written YYYY-MM-DD")
    year, month, day = m.groups()
    return Path(data_dir) / "data" / year / month / day / file_name(campaign, slot)


def document_files(data_dir: str | Path) -> list[Path]:
    """Every document under ``DATA_DIR/data``, in date then name order."""
    root = Path(data_dir)
    if not root.is_dir():
        raise ConfigError(
            "DATA_DIR",
            str(root),
            "an existing directory holding data/YYYY/MM/DD/*.json, as written by "
            "`gpubench campaign export NAME -o DATA_DIR`",
        )
    files = sorted((root / "data").glob("[0-9][0-9][0-9][0-9]/[0-9][0-9]/[0-9][0-9]/*.json"))
    if not files:
        raise ConfigError(
            "DATA_DIR",
            str(root),
            "a directory with at least one document under data/YYYY/MM/DD/; write them with "
            "`gpubench campaign export NAME -o DATA_DIR`",
        )
    return files


def check_document(data: Any, where: str) -> dict[str, Any]:
    """``data`` if it is a tracker document this gpubench reads, else a ``ConfigError`` naming
    ``where`` (the file), the field and what it should hold."""
    if not isinstance(data, dict):
        raise ConfigError(where, type(data).__name__, "a JSON object (a tracker document)")
    if data.get("schema") != SCHEMA:
        raise ConfigError(
            f"{where}: schema", data.get("schema"), f'"{SCHEMA}" (a gpubench tracker document)'
        )
    version = data.get("schema_version")
    if version != SCHEMA_VERSION:
        newer = isinstance(version, int) and version > SCHEMA_VERSION
        raise ConfigError(
            f"{where}: schema_version",
            version,
            f"{SCHEMA_VERSION}"
            + (
                "; this document is newer than this gpubench reads: upgrade gpubench"
                if newer
                else "; re-export it from its store with `gpubench campaign export`"
            ),
        )
    for name, kind in (("campaign", str), ("slot", int), ("local_date", str), ("targets", list)):
        if not isinstance(data.get(name), kind):
            raise ConfigError(f"{where}: {name}", data.get(name), f"a {kind.__name__}")
    if not _DATE.match(data["local_date"]):
        raise ConfigError(f"{where}: local_date", data["local_date"], "a date written YYYY-MM-DD")
    for i, target in enumerate(data["targets"]):
        if not isinstance(target, dict) or not isinstance(target.get("name"), str):
            raise ConfigError(f"{where}: targets[{i}].name", target, "an object with a name")
    return data


def read_document(path: Path, root: Path | None = None) -> dict[str, Any]:
    where = str(path.relative_to(root) if root is not None else path)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(where, "(unreadable)", f"a readable UTF-8 file ({exc})") from None
    except json.JSONDecodeError as exc:
        raise ConfigError(where, "(not JSON)", f"a JSON tracker document: {exc}") from None
    return check_document(data, where)


def read_documents(data_dir: str | Path) -> Iterator[tuple[Path, dict[str, Any]]]:
    """(path relative to ``data_dir``, document) of every document, checked, in date order."""
    root = Path(data_dir)
    for path in document_files(root):
        yield path.relative_to(root), read_document(path, root)
