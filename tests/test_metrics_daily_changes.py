"""``daily_variability``'s change detector counts each day's test against the pooled earlier
days incrementally (the tracker's site runs it on years of days): its p-values must be those of
``mann_whitney_u`` on the day and the concatenated earlier days, to the bit, ties and all."""

from __future__ import annotations

import numpy as np
import pytest

from gpubench_sdk.metrics import daily_variability, mann_whitney_u

DAY_NS = 86_400 * 10**9


@pytest.mark.parametrize("seed", range(6))
def test_the_detector_gives_the_rank_test_of_each_day_against_the_earlier_days(seed: int) -> None:
    rng = np.random.default_rng(seed)
    days = int(rng.integers(2, 40))
    sizes = rng.integers(1, 25, days)
    # rounded to whole milliseconds (seeds 0-2) or to a few values (3-5): many ties
    scale = 1.0 if seed < 3 else 40.0
    values = np.round(rng.lognormal(5, 0.4, sizes.sum()) / scale) * scale
    values[rng.random(values.size) < 0.05] = np.nan  # ignored, as the detector documents
    if seed == 5:
        values[sizes[0] :] += 200  # a step after the first day
    walls = np.repeat(np.arange(days, dtype=np.int64) * DAY_NS, sizes)
    result = daily_variability(walls, values, min_history_days=1 + seed % 2)
    kept = ~np.isnan(values)
    per_day = [values[kept & (walls == d * DAY_NS)] for d in range(days)]
    per_day = [v for v in per_day if v.size]
    assert len(result.days) == len(per_day)
    for i, stats in enumerate(result.days):
        if i < 1 + seed % 2:
            assert np.isnan(stats.p_value)
            continue
        expected = mann_whitney_u(per_day[i], np.concatenate(per_day[:i])).p_value
        assert stats.p_value == expected, (i, stats.p_value, expected)
        assert stats.earlier_median_ms == np.median(np.concatenate(per_day[:i]))


def test_every_value_equal_is_no_evidence() -> None:
    walls = np.repeat(np.arange(3, dtype=np.int64) * DAY_NS, 4)
    result = daily_variability(walls, np.full(12, 7.0))
    assert [d.p_value for d in result.days[1:]] == [1.0, 1.0] and not result.changed_days


def test_min_change_flags_only_a_material_move_of_the_median() -> None:
    """Cold starts that barely vary: a day 4% slower is significant, a day twice as slow is
    news. ``min_change`` keeps the second only, judged against the earlier days' median."""
    rng = np.random.default_rng(7)
    base = 50 + rng.normal(0, 0.3, (12, 8))
    base[5] += 2  # a loaded machine's day: 4% more, every value
    base[9:] *= 2  # the change
    walls = np.repeat(np.arange(12, dtype=np.int64) * DAY_NS, 8)
    days = [f"1970-01-{d:02d}" for d in (6, 10)]
    assert daily_variability(walls, base.ravel()).changed_days[:2] == days
    material = daily_variability(walls, base.ravel(), min_change=0.25)
    assert material.changed_days[0] == days[1]
    tenth = material.days[9]
    assert tenth.earlier_median_ms == pytest.approx(np.median(base[:9]))
    assert tenth.median_ms / tenth.earlier_median_ms == pytest.approx(2, rel=0.01)
    with pytest.raises(ValueError, match="min_change must be a fraction >= 0"):
        daily_variability(walls, base.ravel(), min_change=-0.1)
