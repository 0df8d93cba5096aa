"""A mergeable histogram with logarithmic buckets and a stated relative error (DDSketch-style).

Bucket ``i`` holds values in ``(gamma**(i-1), gamma**i]`` with ``gamma = (1 + a) / (1 - a)``,
and reports ``2 gamma**i / (gamma + 1)``, which is within a relative error ``a`` of every value
in the bucket (Masson, Rim & Lee, *DDSketch*, VLDB 2019, section 2). Quantiles interpolate
between the representatives of the two order statistics numpy's ``linear`` method uses, so a
quantile is within ``relative_error`` of ``numpy.quantile`` on the raw values (both
order statistics are, and so is any convex combination of positive values).

Counts are integers, so ``merge`` is exact, associative and commutative: partial histograms
built in many processes or machines merge to the histogram of all the values. ``sum`` is a
float and merges up to rounding. Values ``<= MIN_VALUE_MS`` (zero included) go to a zero bucket
and report as 0; negative values and NaN are refused.
"""

from __future__ import annotations

import base64
import math
import struct
import zlib
from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np
import numpy.typing as npt

from ._stats import check_quantile

MIN_VALUE_MS = 1e-6  # 1 ns: below any clock we read
_FORMAT_VERSION = 1
_HEADER = struct.Struct(
    "<BdqqqQddd"
)  # version, rel err, offset, n buckets, zero, count, sum, min, max


class LogHistogram:
    """Counts of positive durations (ms) in log buckets; see the module doc for the bound."""

    __slots__ = (
        "_counts",
        "_log_gamma",
        "_offset",
        "count",
        "max_ms",
        "min_ms",
        "relative_error",
        "sum_ms",
        "zero_count",
    )

    def __init__(self, relative_error: float = 0.01) -> None:
        if not 0 < relative_error < 1:
            raise ValueError(
                f"relative_error must be in (0, 1) (0.01 for 1%), got {relative_error!r}"
            )
        self.relative_error = float(relative_error)
        gamma = (1 + relative_error) / (1 - relative_error)
        self._log_gamma = math.log(gamma)
        self._offset = 0  # bucket index of _counts[0]
        self._counts = np.zeros(0, dtype=np.int64)
        self.zero_count = 0
        self.count = 0
        self.sum_ms = 0.0
        self.min_ms = math.inf
        self.max_ms = -math.inf

    @classmethod
    def from_values(cls, values_ms: npt.ArrayLike, relative_error: float = 0.01) -> LogHistogram:
        h = cls(relative_error)
        h.add(values_ms)
        return h

    # -- building ---------------------------------------------------------------------------

    def add(self, values_ms: npt.ArrayLike) -> None:
        """Count one value or an array of values (ms, >= 0)."""
        v = np.atleast_1d(np.asarray(values_ms, dtype=np.float64)).ravel()
        if not v.size:
            return
        if np.isnan(v).any() or (v < 0).any():
            raise ValueError("LogHistogram.add: values must be >= 0 and not NaN (drop them first)")
        tiny = v <= MIN_VALUE_MS
        positive = v[~tiny]
        self.zero_count += int(tiny.sum())
        self.count += int(v.size)
        self.sum_ms += float(v.sum())
        self.min_ms = min(self.min_ms, float(v.min()))
        self.max_ms = max(self.max_ms, float(v.max()))
        if positive.size:
            idx = np.ceil(np.log(positive) / self._log_gamma).astype(np.int64)
            lo, hi = int(idx.min()), int(idx.max())
            self._grow(lo, hi)
            self._counts += np.bincount(idx - self._offset, minlength=self._counts.size)

    def _grow(self, lo: int, hi: int) -> None:
        if not self._counts.size:
            self._offset, self._counts = lo, np.zeros(hi - lo + 1, dtype=np.int64)
            return
        new_lo, new_hi = min(lo, self._offset), max(hi, self._offset + self._counts.size - 1)
        if (new_lo, new_hi) != (self._offset, self._offset + self._counts.size - 1):
            grown = np.zeros(new_hi - new_lo + 1, dtype=np.int64)
            start = self._offset - new_lo
            grown[start : start + self._counts.size] = self._counts
            self._offset, self._counts = new_lo, grown

    def merge(self, other: LogHistogram) -> LogHistogram:
        """A new histogram of both inputs' values (neither input changes)."""
        return merge_histograms([self, other])

    # -- reading ----------------------------------------------------------------------------

    def _value_of(self, bucket: int) -> float:
        gamma = math.exp(self._log_gamma)
        return 2 * math.exp(bucket * self._log_gamma) / (gamma + 1)

    def _value_at_rank(self, rank: int, cumulative: npt.NDArray[np.int64]) -> float:
        """The representative of the 0-based ``rank``-th smallest value, clamped to min/max."""
        if rank == self.count - 1:
            return self.max_ms  # the extremes are kept exactly
        if rank < self.zero_count:
            return 0.0
        if rank == 0:
            return self.min_ms
        pos = int(np.searchsorted(cumulative, rank - self.zero_count, side="right"))
        return min(max(self._value_of(self._offset + pos), self.min_ms), self.max_ms)

    def quantiles(self, qs: Iterable[float]) -> list[float]:
        """Quantiles (0-1) by numpy's ``linear`` rule, each within ``relative_error``."""
        qs = list(qs)
        for q in qs:
            check_quantile(q)
        if not self.count:
            return [math.nan for _ in qs]
        cumulative = np.cumsum(self._counts)
        out = []
        for q in qs:
            h = (self.count - 1) * q
            k = math.floor(h)
            lo = self._value_at_rank(k, cumulative)
            hi = self._value_at_rank(min(k + 1, self.count - 1), cumulative)
            out.append(lo + (h - k) * (hi - lo))
        return out

    def quantile(self, q: float) -> float:
        return self.quantiles([q])[0]

    @property
    def mean_ms(self) -> float:
        return self.sum_ms / self.count if self.count else math.nan

    def buckets(self) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.int64]]:
        """(upper bound in ms, count) of every non-empty log bucket, ascending."""
        nz = np.flatnonzero(self._counts)
        uppers = np.exp((nz + self._offset) * self._log_gamma)
        return uppers, self._counts[nz].copy()

    # -- equality and serialisation ---------------------------------------------------------

    def _trimmed(self) -> tuple[int, npt.NDArray[np.int64]]:
        nz = np.flatnonzero(self._counts)
        if not nz.size:
            return 0, np.zeros(0, dtype=np.int64)
        return self._offset + int(nz[0]), self._counts[nz[0] : nz[-1] + 1]

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, LogHistogram):
            return NotImplemented
        (a_off, a), (b_off, b) = self._trimmed(), other._trimmed()
        return (
            self.relative_error == other.relative_error
            and (self.count, self.zero_count) == (other.count, other.zero_count)
            and (self.min_ms, self.max_ms) == (other.min_ms, other.max_ms)
            and a_off == b_off
            and np.array_equal(a, b)
        )

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return (
            f"LogHistogram(relative_error={self.relative_error}, count={self.count}, "
            f"buckets={int(np.count_nonzero(self._counts))})"
        )

    def to_dict(self) -> dict[str, Any]:
        """A JSON-serialisable dict (counts as a list of ints from ``offset``)."""
        offset, counts = self._trimmed()
        return {
            "version": _FORMAT_VERSION,
            "relative_error": self.relative_error,
            "offset": offset,
            "counts": counts.tolist(),
            "zero_count": self.zero_count,
            "count": self.count,
            "sum_ms": self.sum_ms,
            "min_ms": self.min_ms if self.count else None,
            "max_ms": self.max_ms if self.count else None,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> LogHistogram:
        if data.get("version") != _FORMAT_VERSION:
            raise ValueError(
                f"LogHistogram.from_dict: unsupported version {data.get('version')!r} "
                f"(this gpubench reads {_FORMAT_VERSION})"
            )
        h = cls(float(data["relative_error"]))
        h._offset = int(data["offset"])
        h._counts = np.asarray(data["counts"], dtype=np.int64)
        h.zero_count, h.count, h.sum_ms = (
            int(data["zero_count"]),
            int(data["count"]),
            float(data["sum_ms"]),
        )
        if h.count:
            h.min_ms, h.max_ms = float(data["min_ms"]), float(data["max_ms"])
        h._check_consistent()
        return h

    def to_bytes(self) -> bytes:
        """A compact binary form (zlib-compressed little-endian int64 counts)."""
        offset, counts = self._trimmed()
        header = _HEADER.pack(
            _FORMAT_VERSION, self.relative_error, offset, counts.size, self.zero_count,
            self.count, self.sum_ms, self.min_ms, self.max_ms,
        )  # fmt: skip
        return header + zlib.compress(counts.astype("<i8").tobytes())

    @classmethod
    def from_bytes(cls, data: bytes) -> LogHistogram:
        try:
            version, rel, offset, size, zero, count, total, lo, hi = _HEADER.unpack_from(data)
            if version != _FORMAT_VERSION:
                raise ValueError(f"unsupported version {version}")
            counts = np.frombuffer(zlib.decompress(data[_HEADER.size :]), dtype="<i8")
            if counts.size != size:
                raise ValueError("bucket count does not match the header")
        except (struct.error, zlib.error, ValueError) as exc:
            raise ValueError(f"LogHistogram.from_bytes: not a gpubench histogram ({exc})") from exc
        h = cls(rel)
        h._offset, h._counts = offset, counts.astype(np.int64)
        h.zero_count, h.count, h.sum_ms, h.min_ms, h.max_ms = zero, count, total, lo, hi
        h._check_consistent()
        return h

    def to_base64(self) -> str:
        return base64.b64encode(self.to_bytes()).decode("ascii")

    def _check_consistent(self) -> None:
        if (self._counts < 0).any() or int(self._counts.sum()) + self.zero_count != self.count:
            raise ValueError("LogHistogram: counts do not add up to count (corrupt data)")


def merge_histograms(histograms: Iterable[LogHistogram]) -> LogHistogram:
    """One histogram of every input's values: exact (integer counts), in any order or grouping.

    All inputs must share ``relative_error``; an empty iterable is refused (no error bound).
    """
    hs = list(histograms)
    if not hs:
        raise ValueError("merge_histograms needs at least one histogram")
    rel = hs[0].relative_error
    if any(h.relative_error != rel for h in hs):
        found = sorted({h.relative_error for h in hs})
        raise ValueError(f"cannot merge histograms of different relative_error {found}")
    out = LogHistogram(rel)
    filled = [h for h in hs if h._counts.size]
    if filled:
        lo = min(h._offset for h in filled)
        hi = max(h._offset + h._counts.size - 1 for h in filled)
        counts = np.zeros(hi - lo + 1, dtype=np.int64)
        for h in filled:
            start = h._offset - lo
            counts[start : start + h._counts.size] += h._counts
        out._offset, out._counts = lo, counts
    out.zero_count = sum(h.zero_count for h in hs)
    out.count = sum(h.count for h in hs)
    out.sum_ms = math.fsum(h.sum_ms for h in hs)
    out.min_ms = min(h.min_ms for h in hs)
    out.max_ms = max(h.max_ms for h in hs)
    return out
