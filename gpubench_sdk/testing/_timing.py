"""Durations drawn from a seeded distribution: cold starts and execution times of a fleet."""

from __future__ import annotations

import math
import random
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from .._base._errors import ConfigError


@dataclass(frozen=True, slots=True)
class Duration:
    """A duration in seconds: fixed, uniform between two bounds, lognormal, or a mixture.

    Build one with ``Duration.fixed(0.3)``, ``Duration.uniform(0.2, 1.5)``,
    ``Duration.lognormal(median_s=0.5, sigma=0.4)`` or ``Duration.mixture((0.8, fast), (0.2,
    slow))``. Cold starts of real platforms are right-skewed (a few slow boots behind a fast
    median), which the lognormal shape mimics; where a snapshot or cache is on some hosts and
    not others (RunPod's FlashBoot, Modal's memory snapshots), they fall in modes: a mixture.
    """

    kind: Literal["fixed", "uniform", "lognormal", "mixture"]
    a_s: float
    b_s: float = 0.0
    parts: tuple[tuple[float, Duration], ...] = ()  # a mixture's (weight, duration)s

    def __post_init__(self) -> None:
        if not (math.isfinite(self.a_s) and self.a_s >= 0):
            raise ConfigError(f"duration.{self.kind}", self.a_s, "seconds >= 0")
        if self.kind == "uniform" and not self.b_s >= self.a_s:
            raise ConfigError("duration.uniform.high_s", self.b_s, f"seconds >= low_s={self.a_s}")
        if self.kind == "lognormal" and not (math.isfinite(self.b_s) and self.b_s >= 0):
            raise ConfigError("duration.lognormal.sigma", self.b_s, "a spread >= 0")
        if self.kind == "mixture" and not (
            self.parts and all(math.isfinite(w) and w > 0 for w, _ in self.parts)
        ):
            raise ConfigError("duration.mixture", self.parts, "(weight > 0, Duration) parts")

    @classmethod
    def fixed(cls, seconds: float) -> Duration:
        return cls("fixed", seconds)

    @classmethod
    def uniform(cls, low_s: float, high_s: float) -> Duration:
        return cls("uniform", low_s, high_s)

    @classmethod
    def lognormal(cls, median_s: float, sigma: float) -> Duration:
        return cls("lognormal", median_s, sigma)

    @classmethod
    def mixture(cls, *parts: tuple[float, Duration]) -> Duration:
        """Each draw from one of ``parts``, chosen by weight (weights need not sum to 1)."""
        return cls("mixture", 0.0, parts=tuple(parts))

    def sample_s(self, rng: random.Random) -> float:
        """One draw, in seconds."""
        if self.kind == "fixed":
            return self.a_s
        if self.kind == "uniform":
            return rng.uniform(self.a_s, self.b_s)
        if self.kind == "mixture":
            weights = [w for w, _ in self.parts]
            part = rng.choices([d for _, d in self.parts], weights)[0]
            return part.sample_s(rng)
        if self.a_s == 0:
            return 0.0
        return rng.lognormvariate(math.log(self.a_s), self.b_s)


def noise_tolerance_ms(reference_ms: Sequence[float], floor_ms: float = 5.0) -> float:
    """How far a median measured through gpubench may sit from ``reference_ms``' median (a
    plain client's latencies on the same server, taken around the measurement) on this
    machine, now: ``floor_ms`` on a quiet one, widened by the noise the reference itself
    shows, 4 x its median absolute deviation plus the drift between its halves. A fixed few
    milliseconds fails on a loaded CI machine that is not wrong, only busy; a tolerance read
    from the same run's own spread keeps the check as tight as the machine allows."""
    if len(reference_ms) < 2:
        raise ConfigError("reference_ms", list(reference_ms), "at least two samples")
    median = statistics.median(reference_ms)
    mad = statistics.median(abs(v - median) for v in reference_ms)
    half = len(reference_ms) // 2
    drift = abs(statistics.median(reference_ms[:half]) - statistics.median(reference_ms[half:]))
    return max(floor_ms, 4 * mad + drift)
