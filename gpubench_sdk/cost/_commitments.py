"""Commitments against on-demand billing: which option is cheapest at which utilisation.

An option is a price for one worker kept on: per hour (reserved or "active" workers, billed
whether used or not), or per month with a minimum term (paid in full even if you stop
sooner). On demand, a worker costs ``utilisation x 86,400 s x rate`` a day; a commitment costs
the same every day. So on demand wins below the cheapest commitment's break-even utilisation,
that commitment wins above it, and a commitment dearer than a whole day on demand never pays.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from .._base._errors import ConfigError
from ._calc import SECONDS_PER_DAY

DAYS_PER_MONTH = 365.0 / 12  # a calendar month on average (30.42 days)


@dataclass(frozen=True, slots=True)
class Commitment:
    """One worker kept on: ``usd`` per ``per`` (hour or month), for at least ``min_months``."""

    name: str
    usd: float
    per: Literal["hour", "month"]
    min_months: float = 0.0

    def __post_init__(self) -> None:
        if not (math.isfinite(self.usd) and self.usd >= 0):
            raise ConfigError(f"{self.name}.usd", self.usd, "USD >= 0")
        if self.per not in ("hour", "month"):
            raise ConfigError(f"{self.name}.per", self.per, "'hour' or 'month'")
        if not (math.isfinite(self.min_months) and self.min_months >= 0):
            raise ConfigError(f"{self.name}.term", self.min_months, "months >= 0")

    def usd_per_day(self, need_months: float | None) -> float:
        """Its cost per day of use when the capacity is needed ``need_months`` (default: the
        minimum term, or one month): a term longer than the need is paid in full anyway."""
        base = self.usd * 24 if self.per == "hour" else self.usd / DAYS_PER_MONTH
        need = need_months if need_months is not None else max(self.min_months, 1.0)
        if need <= 0:
            raise ConfigError("need_months", need, "months > 0")
        return base * max(self.min_months, need) / need


@dataclass(frozen=True, slots=True)
class CommitmentLine:
    """One option against on demand: its cost a day, and where it breaks even (``None``:
    never, it costs more than a worker billed all day on demand)."""

    commitment: Commitment
    usd_per_day: float
    break_even_utilization: float | None
    break_even_requests_per_day: float | None
    wins_from: float | None  # the utilisation above which it is the cheapest option


@dataclass(frozen=True)
class CommitmentComparison:
    on_demand_usd_per_s: float
    lines: list[CommitmentLine]

    @property
    def on_demand_wins_below(self) -> float:
        """On demand is cheapest at every utilisation below this (1.0: always)."""
        starts = [line.wins_from for line in self.lines if line.wins_from is not None]
        return min(starts, default=1.0)


def compare_commitments(
    on_demand_usd_per_s: float,
    commitments: Sequence[Commitment],
    *,
    need_months: float | None = None,
    billed_s_per_request: float | None = None,
) -> CommitmentComparison:
    """Each commitment's break-even utilisation against on demand, and which wins where."""
    if not on_demand_usd_per_s > 0:
        raise ConfigError("on_demand_usd_per_s", on_demand_usd_per_s, "USD per second > 0")
    if billed_s_per_request is not None and not billed_s_per_request > 0:
        raise ConfigError("billed_s_per_request", billed_s_per_request, "seconds > 0")
    full_day = on_demand_usd_per_s * SECONDS_PER_DAY
    costs = [c.usd_per_day(need_months) for c in commitments]
    # flat costs: the cheapest one beats every other commitment at every utilisation
    cheapest = min(range(len(costs)), key=costs.__getitem__) if costs else -1
    lines = []
    for i, (c, per_day) in enumerate(zip(commitments, costs, strict=True)):
        u = per_day / full_day
        pays = u <= 1.0
        reqs = None
        if pays and billed_s_per_request is not None:
            reqs = u * SECONDS_PER_DAY / billed_s_per_request
        wins = u if pays and i == cheapest else None
        lines.append(CommitmentLine(c, per_day, u if pays else None, reqs, wins))
    return CommitmentComparison(on_demand_usd_per_s, lines)


def parse_commitment(text: str, per: Literal["hour", "month"], index: int) -> Commitment:
    """``1.89`` or ``name=1.89`` or ``name=900,term=12`` (term in months)."""
    head, *pairs = [p.strip() for p in text.split(",")]
    name, sep, price = head.partition("=")
    if not sep:
        name, price = f"{per}ly-{index + 1}", head
    term = 0.0
    try:
        usd = float(price)
        for pair in pairs:
            key, _, value = pair.partition("=")
            if key.strip() != "term":
                raise ValueError(key)
            term = float(value)
    except ValueError:
        raise ConfigError(
            f"--{per}ly", text, f"[NAME=]USD_PER_{per.upper()}[,term=MONTHS], e.g. 1.89"
        ) from None
    try:
        return Commitment(name.strip(), usd, per, term)
    except ConfigError as exc:  # named for the flag it came from, not the model's field
        raise ConfigError(f"--{per}ly", text, f"{exc.field}: {exc.expected}") from None
