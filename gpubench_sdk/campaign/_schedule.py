"""When a campaign's slots fall: a fixed interval or a cron expression, with seeded jitter.

Slots are computed once, when the campaign is created, and stored; a restarted scheduler reads
them back and never recomputes. The jitter of slot ``k`` is nonetheless a pure function of
``(seed, k)`` (``random.Random(f"{seed}/{k}")``), so the same arguments always give the same
slots and a test can predict them.
"""

from __future__ import annotations

import itertools
import random
import re
import time
from dataclasses import asdict, dataclass
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from .._base._errors import ConfigError
from ._cron import parse_cron

_UNITS_S = {"s": 1.0, "m": 60.0, "h": 3600.0, "d": 86_400.0, "w": 604_800.0}
_PART = re.compile(r"(\d+(?:\.\d+)?)([smhdw])")
MAX_SLOTS = 10_000  # a year of hourly slots fits; every minute for a year is surely a mistake
MAX_GRACE_S = 3600.0


def parse_duration(text: str, field: str) -> float:
    """Seconds in ``"30s"``, ``"10m"``, ``"4h"``, ``"5d"``, ``"1w"`` or a sum like ``"1h30m"``."""
    key = text.strip().lower()
    pos, total = 0, 0.0
    for match in _PART.finditer(key):
        if match.start() != pos:
            break
        total += float(match.group(1)) * _UNITS_S[match.group(2)]
        pos = match.end()
    if not key or pos != len(key):
        raise ConfigError(
            field, text, "a duration such as 30s, 10m, 4h, 5d, 1w or 1h30m (s, m, h, d, w)"
        )
    return total


def zone(name: str) -> ZoneInfo:
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise ConfigError(
            "--tz", name, 'an IANA time zone such as "UTC" or "Europe/Berlin"'
        ) from None


@dataclass(frozen=True, slots=True)
class Schedule:
    """A campaign's schedule: slots from ``start_ns`` for ``duration_s``, every ``every_s``
    seconds or at the times ``cron`` names (in ``tz``), each shifted by up to ``jitter_s``.

    A slot still not started ``grace_s`` after its time is recorded as missed.
    """

    start_ns: int
    duration_s: float
    every_s: float | None = None
    cron: str | None = None
    jitter_s: float = 0.0
    seed: int = 0
    tz: str = "UTC"
    grace_s: float | None = None  # None: half the shortest gap between slots, at most 1 h

    def __post_init__(self) -> None:
        if (self.every_s is None) == (self.cron is None):
            raise ConfigError("--every/--cron", None, "exactly one of --every or --cron")
        if self.every_s is not None and not self.every_s > 0:
            raise ConfigError("--every", self.every_s, "a duration > 0 (e.g. 4h)")
        if not self.duration_s > 0:
            raise ConfigError("--for", self.duration_s, "a duration > 0 (e.g. 5d)")
        if self.jitter_s < 0:
            raise ConfigError("--jitter", self.jitter_s, "a duration >= 0 (e.g. 10m)")
        if self.grace_s is not None and not self.grace_s > 0:
            raise ConfigError("--grace", self.grace_s, "a duration > 0 (e.g. 30m)")
        zone(self.tz)
        if self.cron is not None:
            parse_cron(self.cron)

    def nominal_ns(self) -> list[int]:
        """Slot times before jitter."""
        end_ns = self.start_ns + round(self.duration_s * 1e9)
        if self.cron is not None:
            times = parse_cron(self.cron).times_ns(self.start_ns, end_ns, zone(self.tz))
        else:
            assert self.every_s is not None
            step = round(self.every_s * 1e9)
            count = -(-(end_ns - self.start_ns) // step)  # ceil: slots strictly before the end
            if count > MAX_SLOTS:
                times = [0] * (MAX_SLOTS + 1)  # refused below, without building them all
            else:
                times = [self.start_ns + k * step for k in range(count)]
        if not times:
            raise ConfigError(
                "--cron",
                self.cron,
                f"an expression that fires within --for ({self.duration_s:g} s)",
            )
        if len(times) > MAX_SLOTS:
            raise ConfigError(
                "--for", self.duration_s, f"a schedule of at most {MAX_SLOTS} slots: lengthen "
                "--every, use a sparser --cron, or shorten --for",
            )  # fmt: skip
        return times

    def min_gap_s(self, nominal: list[int]) -> float:
        gaps = [b - a for a, b in itertools.pairwise(nominal)]
        return min(gaps) / 1e9 if gaps else self.duration_s

    def slots_ns(self) -> list[int]:
        """Each slot's time: nominal plus its seeded jitter in ``[0, jitter_s)``."""
        nominal = self.nominal_ns()
        if self.jitter_s and self.jitter_s >= self.min_gap_s(nominal):
            raise ConfigError(
                "--jitter",
                self.jitter_s,
                f"less than the gap between slots ({self.min_gap_s(nominal):g} s), so slots "
                "keep their order",
            )
        return [
            t + round(random.Random(f"{self.seed}/{k}").random() * self.jitter_s * 1e9)
            for k, t in enumerate(nominal)
        ]

    def effective_grace_s(self) -> float:
        if self.grace_s is not None:
            return self.grace_s
        return min(self.min_gap_s(self.nominal_ns()) / 2, MAX_GRACE_S)

    def describe(self) -> str:
        how = f"every {self.every_s:g} s" if self.every_s is not None else f"cron {self.cron!r}"
        jitter = f", jitter {self.jitter_s:g} s" if self.jitter_s else ""
        return f"{how} for {self.duration_s:g} s ({self.tz}){jitter}"

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Schedule:
        return cls(**data)


def now_ns() -> int:
    return time.time_ns()
