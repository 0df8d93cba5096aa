"""``testing.noise_tolerance_ms``: the few-ms floor on a quiet machine, the measured spread on
a busy one, and a refusal of a reference too small to say anything."""

from __future__ import annotations

import pytest

from gpubench_sdk import ConfigError
from gpubench_sdk.testing import noise_tolerance_ms


def test_a_quiet_reference_keeps_the_floor() -> None:
    assert noise_tolerance_ms([50.2, 50.3, 50.1, 50.4, 50.2, 50.3]) == 5.0


def test_a_noisy_reference_widens_it_by_its_spread() -> None:
    noisy = [50.0, 58.0, 52.0, 61.0, 49.0, 57.0, 51.0, 60.0]  # MAD 4 ms: 16 ms, halves 1 ms apart
    assert noise_tolerance_ms(noisy) == pytest.approx(16.0 + 1.0)


def test_a_load_that_drifts_between_the_halves_counts() -> None:
    drifting = [50.0, 50.1, 50.2, 50.1, 60.0, 60.1, 60.2, 60.1]  # +10 ms after the run
    assert noise_tolerance_ms(drifting, floor_ms=2.0) >= 10.0


def test_one_sample_is_no_reference() -> None:
    with pytest.raises(ConfigError, match="at least two"):
        noise_tolerance_ms([50.0])
