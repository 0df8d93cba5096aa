"""Server timestamps as phases: job APIs report when a request was created, started and
ended as ISO-8601 text (Baseten's ``created_at``/``status_at``, Replicate's ``created_at``/
``started_at``), and a phase is the gap between two of them."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

__all__ = ["iso_seconds", "span_ms"]


def iso_seconds(value: Any) -> float | None:
    """An ISO-8601 timestamp (``2026-11-29T23:28:56.123456Z``, any offset) as Unix seconds;
    a stamp without an offset is read as UTC (what the APIs send); None for anything else."""
    if not isinstance(value, str) or not value:
        return None
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        return None
    return (parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)).timestamp()


def span_ms(start_s: float | None, end_s: float | None) -> float | None:
    """Milliseconds from ``start_s`` to ``end_s`` (never negative: clocks that disagree by a
    little do not make a phase below zero); None when either is unknown."""
    if start_s is None or end_s is None:
        return None
    return max(0.0, (end_s - start_s) * 1e3)
