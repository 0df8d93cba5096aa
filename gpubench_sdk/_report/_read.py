"""What every section of a report reads: the report's model, and the columns of each run read
once per build (reading is most of a large report's build time)."""

from __future__ import annotations

import math
import weakref
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from .._base._types import Outcome
from .._store._store import Columns, Store

Row = dict[str, Any]


@dataclass
class Report:
    """A report's content, independent of its format. ``tables``: section -> rows of scalars
    (what JSON, CSV and Markdown print); ``series``: chart points, keyed like the table rows."""

    title: str
    generated_utc: str
    runs: list[Row] = field(default_factory=list)
    tables: dict[str, list[Row]] = field(default_factory=dict)
    series: dict[str, list[Row]] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    traffic: Row = field(default_factory=dict)  # what the cost comparison priced
    layout: str = "comparison"  # the HTML page's order of sections (_html.LAYOUTS)
    advice: dict[str, Any] | None = None  # ``gpubench advise --json`` (report --advice)
    # figure -> target -> raw sample arrays, pooled over runs for the comparison charts (the
    # series keep at most MAX_POINTS per run); no format prints them
    pooled: dict[str, dict[str, list[Any]]] = field(default_factory=dict, repr=False)

    def pool(self, figure: str, target: str, values: Any) -> None:
        self.pooled.setdefault(figure, {}).setdefault(target, []).append(values)

    def table(self, name: str) -> list[Row]:
        return self.tables.setdefault(name, [])


def num(value: Any) -> Any:
    """A JSON-friendly scalar: numpy to Python, NaN/inf to None (an undefined figure)."""
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def clean(row: Row) -> Row:
    return {k: num(v) for k, v in row.items()}


# Columns read during one build_report, so each (run, target, scenario) is read once although
# several sections use it (reading is most of a large report's build time).
READ: weakref.WeakKeyDictionary[Store, dict[tuple[int, str, int | None], Columns]]
READ = weakref.WeakKeyDictionary()


def read_columns(store: Store, run_id: int, target: str, scenario: int | None = None) -> Columns:
    cache = READ.setdefault(store, {})
    key = (run_id, target, scenario)
    if key not in cache:
        cache[key] = store.columns(run_id, target=target, scenario=scenario)
    return cache[key]


def succeeded(cols: Columns) -> npt.NDArray[np.bool_]:
    ok: npt.NDArray[np.bool_] = np.asarray(cols["outcome"]) == Outcome.OK.code
    return ok


MAX_POINTS = 2_000  # per chart series: enough to see the shape, small enough to stay a light page
PHASES = ("scheduling_ms", "boot_ms", "execution_ms", "transfer_ms")


def thin(n: int) -> npt.NDArray[np.int64]:
    """Evenly spaced indexes, at most MAX_POINTS of ``n``, always keeping the first and last."""
    if n <= MAX_POINTS:
        return np.arange(n, dtype=np.int64)
    return np.unique(np.linspace(0, n - 1, MAX_POINTS).round().astype(np.int64))
