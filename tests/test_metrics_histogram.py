"""The mergeable log histogram: error bound against numpy, exact merges, serialisation."""

from __future__ import annotations

import itertools
import json
import pickle  # noqa: F401  (documents that to_bytes, not pickle, is the wire format)

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as hs

from gpubench_sdk.metrics import LogHistogram, merge_histograms

QS = [0.0, 0.001, 0.01, 0.1, 0.25, 0.5, 0.75, 0.9, 0.95, 0.99, 0.999, 1.0]
durations = hs.lists(
    hs.floats(min_value=0, max_value=1e6, allow_nan=False, allow_infinity=False), max_size=80
)


@pytest.mark.parametrize("rel", [0.01, 0.02, 0.05])
@pytest.mark.parametrize(
    "draw",
    [
        lambda r: r.lognormal(3, 1.5, 50_000),
        lambda r: r.exponential(200, 50_000),
        lambda r: np.concatenate([r.normal(20, 1, 40_000).clip(0.5), r.uniform(1e3, 9e4, 500)]),
    ],
)
def test_quantiles_within_the_stated_relative_error(rel: float, draw: object) -> None:
    x = draw(np.random.default_rng(11))  # type: ignore[operator]
    h = LogHistogram.from_values(x, relative_error=rel)
    got = np.asarray(h.quantiles(QS))
    ref = np.quantile(x, QS)
    assert np.all(np.abs(got - ref) <= rel * ref + 1e-12), np.max(np.abs(got - ref) / ref)
    assert h.quantile(0) == x.min() and h.quantile(1) == x.max()  # exact extremes
    assert h.count == x.size and h.mean_ms == pytest.approx(x.mean())


def test_merge_equals_the_histogram_of_all_values() -> None:
    rng = np.random.default_rng(2)
    parts = [rng.lognormal(2, 1, rng.integers(0, 500)) for _ in range(50)]
    merged = merge_histograms(LogHistogram.from_values(p) for p in parts)
    assert merged == LogHistogram.from_values(np.concatenate(parts))
    assert merged.sum_ms == pytest.approx(float(np.concatenate(parts).sum()))


def test_zero_and_tiny_values_go_to_the_zero_bucket() -> None:
    h = LogHistogram.from_values([0.0, 0.0, 1e-9, 5.0])
    assert h.zero_count == 3 and h.quantile(0.5) == 0.0 and h.quantile(1) == 5.0


def test_bad_input_is_refused() -> None:
    with pytest.raises(ValueError, match="relative_error"):
        LogHistogram(relative_error=1.5)
    with pytest.raises(ValueError, match=">= 0 and not NaN"):
        LogHistogram.from_values([1.0, -2.0])
    with pytest.raises(ValueError, match="NaN"):
        LogHistogram.from_values([np.nan])
    with pytest.raises(ValueError, match="different relative_error"):
        merge_histograms([LogHistogram(0.01), LogHistogram(0.02)])
    with pytest.raises(ValueError, match="at least one"):
        merge_histograms([])
    with pytest.raises(ValueError, match="not a gpubench histogram"):
        LogHistogram.from_bytes(b"garbage")
    with pytest.raises(ValueError, match="quantile"):
        LogHistogram.from_values([1.0]).quantile(2)


def test_empty_histogram_answers_nan() -> None:
    h = LogHistogram()
    assert all(np.isnan(h.quantiles([0.5, 0.9]))) and np.isnan(h.mean_ms)
    assert LogHistogram.from_bytes(h.to_bytes()) == h == LogHistogram.from_dict(h.to_dict())


def test_round_trips_through_json_and_bytes_in_another_process_shape() -> None:
    h = LogHistogram.from_values(np.random.default_rng(4).gamma(2, 40, 10_000))
    wire = json.dumps(h.to_dict())
    assert LogHistogram.from_dict(json.loads(wire)) == h
    back = LogHistogram.from_bytes(h.to_bytes())
    assert back == h and back.quantiles(QS) == h.quantiles(QS)
    uppers, counts = h.buckets()
    assert counts.sum() == h.count and np.all(np.diff(uppers) > 0)


def test_corrupt_counts_are_detected() -> None:
    d = LogHistogram.from_values([1.0, 2.0, 3.0]).to_dict()
    d["count"] = 99
    with pytest.raises(ValueError, match="corrupt"):
        LogHistogram.from_dict(d)


@settings(max_examples=80, deadline=None)
@given(durations, durations, durations)
# degenerate samples, checked every run (the suite is derandomized: tests/conftest.py)
@example(a=[], b=[], c=[])  # empty histograms
@example(a=[0.0], b=[0.0], c=[0.0])  # zeros only
@example(a=[5e-324], b=[1e6], c=[])  # a subnormal and the generator's largest value
@example(a=[1e6] * 80, b=[0.0], c=[5e-324, 5e-324])
@example(a=[2.5] * 3, b=[2.5], c=[2.5])  # every value equal
def test_merge_is_associative_and_commutative(
    a: list[float], b: list[float], c: list[float]
) -> None:
    ha, hb, hc = (LogHistogram.from_values(v) for v in (a, b, c))
    left = ha.merge(hb).merge(hc)
    right = ha.merge(hb.merge(hc))
    assert left == right == merge_histograms([hc, ha, hb])
    assert ha.merge(hb) == hb.merge(ha)
    assert left == LogHistogram.from_values(a + b + c)


@settings(max_examples=60, deadline=None)
@given(hs.lists(hs.floats(min_value=1e-3, max_value=1e6), min_size=1, max_size=200))
@example(values=[1e-3])  # one value, the generator's smallest
@example(values=[1e6] * 200)  # its largest, every value equal
@example(values=[1e-3, 1e6])  # its extremes
@example(values=[7.0] * 5)
def test_any_quantile_is_within_bound_and_monotone(values: list[float]) -> None:
    h = LogHistogram.from_values(values)
    got = h.quantiles(QS)
    ref = np.quantile(values, QS)
    assert all(abs(g - r) <= 0.01 * r + 1e-12 for g, r in zip(got, ref, strict=True))
    assert all(x <= y for x, y in itertools.pairwise(got))
