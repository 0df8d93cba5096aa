"""The metrics guide's weighted scoring: rank candidates over any metrics, with SLOs.

A user names criteria: a metric (any key of the candidates' figures: ``p95_ms``,
``cold_start_p50_ms``, ``usd_per_1k_requests``...), a weight, a direction (lower or higher
is better) and optionally an SLO (a limit the value must meet). Normalisation, per criterion
across the candidates, is min-max onto [0, 1] with 1 the best:
``(worst - v) / (worst - best)``; every candidate gets 1 when all are equal. Weights are
divided by their sum, so a score is in [0, 1] and a criterion's contribution is
``weight / sum(weights) * normalised``. A value that misses its SLO, or is missing (NaN),
contributes 0 and is listed in ``slo_failures``; with ``disqualify=True`` such a candidate
ranks after every candidate that meets all SLOs.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

from .._base._errors import ConfigError


@dataclass(frozen=True, slots=True)
class Criterion:
    metric: str
    weight: float
    better: Literal["lower", "higher"] = "lower"
    slo: float | None = None  # the worst acceptable value, in the metric's own unit

    def __post_init__(self) -> None:
        if not self.weight > 0:
            raise ConfigError(f"criterion {self.metric!r}.weight", self.weight, "a weight > 0")
        if self.better not in ("lower", "higher"):
            field = f"criterion {self.metric!r}.better"
            raise ConfigError(field, self.better, "'lower' or 'higher'")

    def meets_slo(self, value: float) -> bool:
        if math.isnan(value):
            return False
        if self.slo is None:
            return True
        return value <= self.slo if self.better == "lower" else value >= self.slo


@dataclass(frozen=True, slots=True)
class ScoreRow:
    rank: int
    candidate: str
    score: float
    contributions: dict[str, float] = field(default_factory=dict)
    values: dict[str, float] = field(default_factory=dict)
    slo_failures: tuple[str, ...] = ()


def score(
    candidates: Mapping[str, Mapping[str, float]],
    criteria: Sequence[Criterion],
    *,
    disqualify: bool = False,
) -> list[ScoreRow]:
    """Rank ``candidates`` (name -> metric -> value) by the weighted criteria, best first."""
    if not criteria:
        raise ConfigError("criteria", [], "at least one Criterion(metric, weight)")
    if not candidates:
        raise ConfigError("candidates", {}, "at least one candidate with its metrics")
    metrics = [c.metric for c in criteria]
    if len(set(metrics)) != len(metrics):
        raise ConfigError("criteria", metrics, "each metric named once")
    for name, figures in candidates.items():
        missing = [m for m in metrics if m not in figures]
        if missing:
            raise ConfigError(
                f"candidates[{name!r}]",
                sorted(figures),
                f"a value for {missing} (NaN if unmeasured)",
            )
    total_weight = sum(c.weight for c in criteria)
    rows = []
    for name, figures in candidates.items():
        contributions, failures = {}, []
        for c in criteria:
            v = float(figures[c.metric])
            if not c.meets_slo(v):
                failures.append(c.metric)
                contributions[c.metric] = 0.0
                continue
            contributions[c.metric] = c.weight / total_weight * _normalised(c, v, candidates)
        values = {m: float(figures[m]) for m in metrics}
        rows.append((name, sum(contributions.values()), contributions, values, tuple(failures)))
    rows.sort(key=lambda r: (disqualify and bool(r[4]), -r[1], r[0]))
    return [ScoreRow(i + 1, *r) for i, r in enumerate(rows)]


def _normalised(c: Criterion, v: float, candidates: Mapping[str, Mapping[str, float]]) -> float:
    values = [float(f[c.metric]) for f in candidates.values()]
    values = [x for x in values if not math.isnan(x)]
    best, worst = (min(values), max(values)) if c.better == "lower" else (max(values), min(values))
    if best == worst:
        return 1.0
    return (worst - v) / (worst - best)
