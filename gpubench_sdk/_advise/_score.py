"""The metrics guide's weighted score, over advise's options.

Criteria: the measured ``cost`` (median $/day), ``latency`` (median of the objective's
latency percentile), ``cold`` (median cold-start rate) and, with a TTFT objective, ``ttft``
(median of its percentile), all lower-is-better; plus user criteria given as a number per
provider or target (an SLA in %, a compliance grade...), higher-is-better. Each criterion is
normalised min-max over every option onto [0, 1], 1 the best (``metrics.score``:
``(worst - v) / (worst - best)``, 1 for all when all are equal); a score is the weighted mean
of the normalised values, so it lies in [0, 1].

Weights: with ``weights`` given, a criterion not named there weighs 0 and the options that
meet every objective are ranked by score (ties: cheaper first); without them every criterion
weighs 1, the scores are shown, and the ranking stays cheapest first. A user criterion's value
for an option is that of its target (by target name, else provider name); a primary with
overflow takes the lower of its two targets' values (a pair is only as good as its weaker
member).
"""

from __future__ import annotations

import math
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from .._base._errors import ConfigError
from ..metrics._scoring import Criterion, score
from ._estimate import Estimate
from ._inputs import MeasuredTarget

MEASURED = ("cost", "latency", "cold", "ttft")


@dataclass(frozen=True)
class Scoring:
    """What to score by: ``weights`` (criterion -> weight >= 0; ``None``: every one weighs 1
    and the ranking stays cheapest first) and ``criteria`` (user criterion -> provider or
    target name -> value, higher is better)."""

    weights: Mapping[str, float] | None = None
    criteria: Mapping[str, Mapping[str, float]] | None = None

    def __post_init__(self) -> None:
        for name, values in (self.criteria or {}).items():
            if name in MEASURED or not name.isidentifier():
                raise ConfigError(
                    "--criterion", name, f"a new name (letters, digits, _), not one of {MEASURED}"
                )
            if not values:
                raise ConfigError(f"--criterion {name}", "{}", "PROVIDER:VALUE,... (one or more)")
            for key, v in values.items():
                if not isinstance(v, int | float) or isinstance(v, bool) or not math.isfinite(v):
                    raise ConfigError(f"--criterion {name}.{key}", v, "a finite number")
        for name, w in (self.weights or {}).items():
            if name not in MEASURED and name not in (self.criteria or {}):
                known = list(MEASURED) + sorted(self.criteria or {})
                raise ConfigError(
                    "--weight",
                    name,
                    f"one of {known} (define a user criterion with --criterion/--criteria)",
                )
            if not isinstance(w, int | float) or not (math.isfinite(w) and w >= 0):
                raise ConfigError(f"--weight {name}", w, "a number >= 0")
        if self.weights is not None and not any(self.weights.values()):
            raise ConfigError("--weight", dict(self.weights), "at least one weight > 0")

    @property
    def ranks(self) -> bool:
        """Whether the score ranks the options (weights given), not only shown beside them."""
        return self.weights is not None


@dataclass(frozen=True)
class OptionScore:
    """An option's weighted score in [0, 1] and each criterion's share of it."""

    score: float
    contributions: dict[str, float]
    values: dict[str, float]


def check_scoring(scoring: Scoring, targets: Mapping[str, MeasuredTarget], with_ttft: bool) -> None:
    """What ``scoring`` needs of the measured targets, checked before any option is
    simulated: a value of every user criterion for each target, a TTFT objective to weigh
    TTFT. A ``ConfigError`` names the flag."""
    for name, values in (scoring.criteria or {}).items():
        for t in targets.values():
            if t.name not in values and t.provider not in values:
                raise ConfigError(
                    f"--criterion {name}",
                    sorted(values),
                    f"a value for target {t.name!r} (or its provider {t.provider!r})",
                )
    if scoring.weights is not None and "ttft" in scoring.weights and not with_ttft:
        raise ConfigError("--weight", "ttft", "a TTFT objective (--ttft-p95-ms) to score TTFT")


def score_options(
    estimates: Sequence[Estimate],
    targets: Mapping[str, MeasuredTarget],
    scoring: Scoring,
    with_ttft: bool,
) -> list[OptionScore]:
    """Every estimate's score, in the estimates' order."""
    check_scoring(scoring, targets, with_ttft)
    user = dict(scoring.criteria or {})
    measured = [m for m in MEASURED if m != "ttft" or with_ttft]
    weights = {m: 1.0 for m in [*measured, *user]}
    if scoring.weights is not None:
        weights = {m: float(scoring.weights.get(m, 0.0)) for m in weights}
    criteria = [
        Criterion(m, w, "lower" if m in MEASURED else "higher") for m, w in weights.items() if w > 0
    ]
    candidates = {str(i): _values(e, targets, user) for i, e in enumerate(estimates)}
    rows = {r.candidate: r for r in score(candidates, criteria)}
    return [
        OptionScore(rows[str(i)].score, rows[str(i)].contributions, candidates[str(i)])
        for i in range(len(estimates))
    ]


def _values(
    e: Estimate, targets: Mapping[str, MeasuredTarget], user: Mapping[str, Mapping[str, float]]
) -> dict[str, float]:
    out = {
        "cost": e.cost_usd_per_day[0],
        "latency": e.latency_s[0],
        "cold": e.cold_rate[0],
        "ttft": math.nan if e.ttft_s is None else e.ttft_s[0],
    }
    names = [e.option.target] + ([e.option.overflow_to] if e.option.overflow_to else [])
    for criterion, values in user.items():
        per = [float(values[n] if n in values else values[targets[n].provider]) for n in names]
        out[criterion] = min(per)
    return out


def parse_weights(text: str) -> dict[str, float]:
    """``cost=2,latency=1,sla=1`` -> ``{"cost": 2.0, ...}`` (the CLI's ``--weight``)."""
    out: dict[str, float] = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        name, sep, value = part.partition("=")
        try:
            out[name.strip()] = float(value)
        except ValueError:
            sep = ""
        if not sep or not name.strip():
            raise ConfigError("--weight", part, "NAME=NUMBER, e.g. cost=2,latency=1,sla=1")
    return out


def parse_criterion(text: str) -> tuple[str, dict[str, float]]:
    """``sla=runpod:99.9,replicate:99.5`` -> ``("sla", {...})`` (the CLI's ``--criterion``)."""
    name, sep, rest = text.partition("=")
    values: dict[str, float] = {}
    for part in filter(None, (p.strip() for p in rest.split(","))):
        key, colon, value = part.rpartition(":")
        try:
            values[key.strip()] = float(value)
        except ValueError:
            colon = ""
        if not colon or not key.strip():
            raise ConfigError(
                f"--criterion {name.strip()}", part, "PROVIDER:NUMBER, e.g. runpod:99.9"
            )
    if not sep or not name.strip():
        raise ConfigError("--criterion", text, "NAME=PROVIDER:NUMBER,..., e.g. sla=runpod:99.9")
    return name.strip(), values


def read_criteria(path: str) -> dict[str, dict[str, float]]:
    """A TOML file of user criteria: a table per criterion, a number per provider or target:

    ``[sla]`` / ``runpod = 99.9`` / ``replicate = 99.5``"""
    try:
        data = tomllib.loads(Path(path).read_text(encoding="utf-8-sig"))
    except OSError as exc:
        raise ConfigError("--criteria", path, f"a readable TOML file ({exc.strerror})") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError("--criteria", path, f"valid TOML ({exc})") from None
    out: dict[str, dict[str, float]] = {}
    for name, table in data.items():
        if not isinstance(table, dict):
            raise ConfigError(
                f"--criteria {path}: {name}", table, "a table: [name] then provider = number"
            )
        out[name] = dict(table)
    return out
