"""``ColdThresholdOptions``: the ``cold_threshold_ms`` option of a provider that infers cold
starts from the first byte, validated like any option, and the ``ColdMark`` built from it."""

from __future__ import annotations

import pytest

from gpubench_sdk import ColdMark, ColdThresholdOptions, ConfigError, validate_options


class EndpointOptions(ColdThresholdOptions):
    url: str


def test_the_threshold_is_an_option_of_the_plugins_own_model() -> None:
    options = validate_options(EndpointOptions, {"url": "https://x", "cold_threshold_ms": 500}, "t")
    assert options.cold_threshold_ms == 500.0
    assert validate_options(EndpointOptions, {"url": "https://x"}, "t").cold_threshold_ms is None
    assert "first byte" in (EndpointOptions.model_fields["cold_threshold_ms"].description or "")
    with pytest.raises(ConfigError, match="cold_threshold_ms"):
        validate_options(EndpointOptions, {"url": "https://x", "cold_threshold_ms": 0}, "t")


def test_the_mark_judges_by_the_threshold() -> None:
    mark = EndpointOptions(url="https://x", cold_threshold_ms=100).cold_mark()
    assert isinstance(mark, ColdMark)
    assert mark.judge(0, 150_000_000) == (True, False)  # 150 ms to the first byte: inferred
    assert mark.judge(0, 50_000_000) == (False, False)
    mark.expect()  # ensure_cold saw no worker: the next request is cold as a fact
    assert mark.judge(0, 1) == (True, True)


def test_without_a_threshold_no_guess_is_made() -> None:
    mark = EndpointOptions(url="https://x").cold_mark()
    assert mark.judge(0, 10**12) == (None, False)
    assert EndpointOptions(url="https://x").cold_mark() is not mark  # one per opened provider
