"""The shape of a saved advice (``gpubench advise ... --json > FILE``), checked before a
report draws it: a hand-edited or truncated file is refused naming the field that is wrong
(``options[0].latency_ms.median``), never an internal error half-way through the page.

Only what the report reads is described, strictly typed (a number written as text is wrong,
as the page would print it as text); every other key may be there or not (``extra``), so an
advice from a newer gpubench with more fields still reads.
"""

from __future__ import annotations

import re
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError


class _Shape(BaseModel):
    model_config = ConfigDict(strict=True, extra="allow")


class _Triple(_Shape):  # the median and the 5-95% interval of a resampled estimate
    median: float
    p5: float
    p95: float


class _Share(_Shape):  # a share of resamples meeting an objective, with its interval
    share: float
    low: float
    high: float


class _Score(_Shape):
    score: float


class _Option(_Shape):
    target: str
    label: str
    min_workers: int
    max_workers: int
    scale_down_s: float
    committed: bool = False
    cost_usd_per_day: _Triple
    latency_ms: _Triple
    cold_rate: _Triple
    p_meets: dict[str, _Share]
    p_meets_all: _Share
    frontier: bool
    ttft_ms: _Triple | None = None
    score: _Score | None = None


class _Traffic(_Shape):
    description: str


class _Objectives(_Shape):
    latency_percentile: float
    latency_ms: float
    max_cold_rate: float | None = None
    budget_usd_per_day: float | None = None


class _Advice(_Shape):
    traffic: _Traffic
    objectives: _Objectives
    options: list[_Option]
    recommended: _Option | None
    runner_up: _Option | None = None
    unsettled_by: _Option | None = None
    reason: str
    resamples: int
    notes: list[str] = []


def advice_problem(data: Any) -> str | None:
    """What is wrong with ``data`` as a saved advice, as ``field: problem`` (the first), or
    ``None`` when the report can draw it."""
    try:
        _Advice.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in first["loc"])
        got = first.get("input")
        shown = repr(got) if len(repr(got)) <= 40 else type(got).__name__
        said = re.sub(r" or instance of \w+", "", first["msg"]).replace("dictionary", "object")
        return f"{where.lstrip('.') or 'the file'}: {said.lower()} (got {shown})"
    return None
