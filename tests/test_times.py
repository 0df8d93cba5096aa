"""``iso_seconds`` and ``span_ms``: a job API's timestamps as the phases between them;
``reported_time``: a timing a server reported as a number or a header's text."""

from __future__ import annotations

from typing import Any

import pytest

from gpubench_sdk import iso_seconds, reported_time, span_ms

NOON = 1_796_126_400.0  # 2026-12-01T12:00:00Z


@pytest.mark.parametrize(
    "stamp",
    [
        "2026-12-01T12:00:00Z",
        "2026-12-01T12:00:00+00:00",
        "2026-12-01T13:00:00+01:00",
        "2026-12-01T12:00:00",
    ],
)
def test_every_offset_and_a_naive_stamp_as_utc(stamp: str) -> None:
    assert iso_seconds(stamp) == NOON


@pytest.mark.parametrize("value", [None, "", "yesterday", 12, "2026-13-01T00:00:00Z"])
def test_anything_else_is_unknown(value: Any) -> None:
    assert iso_seconds(value) is None


def test_a_span_in_ms_never_below_zero_and_unknown_with_an_end_missing() -> None:
    started = iso_seconds("2026-12-01T12:00:00.250Z")
    assert span_ms(NOON, started) == pytest.approx(250.0)
    assert span_ms(started, NOON) == 0.0
    assert span_ms(None, NOON) is None and span_ms(NOON, None) is None


@pytest.mark.parametrize(("value", "read"), [(12, 12.0), ("12.5", 12.5), ("0", 0.0), (1e-3, 1e-3)])
def test_a_reported_time_as_number_or_header_text(value: Any, read: float) -> None:
    assert reported_time(value) == read


@pytest.mark.parametrize("value", [None, "", "fast", "-1", -0.5, "nan", "inf", True, [1], {}])
def test_a_reported_time_that_is_no_time_is_unknown(value: Any) -> None:
    assert reported_time(value) is None
