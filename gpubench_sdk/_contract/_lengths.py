"""Token lengths drawn per request: a fixed number, or a seeded distribution.

Real traffic does not send one prompt length: chat prompts spread over two orders of magnitude
and outputs stop where the answer ends, and both move the bill and the latency. A workload field
typed ``Length`` takes either a whole number (every request the same) or a table::

    prompt_tokens = { dist = "lognormal", mean = 512, stdev = 256, min = 16, max = 4096 }
    max_tokens = { dist = "empirical", values = [64, 256, 1024], weights = [6, 3, 1] }

Each request's length is drawn from a generator seeded with the workload's seed, the request's
``seq`` and the field, never from a shared stream: the same plan sends the same lengths on every
run, in whatever order or process (``-p N``, Ray workers) the requests are built.
"""

from __future__ import annotations

import math
import random
from collections.abc import Mapping
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    PrivateAttr,
    ValidationError,
    model_validator,
)

from .._base._errors import ConfigError
from .._base._validate import NestedError

MAX_LENGTH = 1_000_000
"""The longest length a workload asks for (tokens); a larger one is a typo, not a workload."""

# A draw outside min..max is drawn again (a truncated distribution: bounds do not pile up
# probability); after this many misses (bounds far in a tail) the draw is clamped instead.
_REDRAWS = 64


class LengthDistribution(BaseModel):
    """A length drawn per request. ``normal`` and ``lognormal`` take the ``mean`` and ``stdev``
    of the lengths themselves (tokens, not their logarithm); ``uniform`` draws every whole
    number in ``min..max`` alike; ``empirical`` draws one of ``values`` (by ``weights``, alike
    without). ``min`` defaults to 1; ``max`` to the largest value, or ``mean + 10 stdev``."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    dist: Literal["normal", "lognormal", "uniform", "empirical"]
    mean: float | None = Field(default=None, gt=0, le=MAX_LENGTH)
    stdev: float | None = Field(default=None, ge=0, le=MAX_LENGTH)
    min: int = Field(default=1, ge=1, le=MAX_LENGTH)
    max: int | None = Field(default=None, ge=1, le=MAX_LENGTH)
    values: list[Annotated[int, Field(ge=1, le=MAX_LENGTH)]] | None = Field(
        default=None, min_length=1, max_length=100_000
    )
    weights: list[Annotated[float, Field(gt=0, allow_inf_nan=False)]] | None = None
    _pool: tuple[list[int], list[float]] = PrivateAttr(default=([], []))

    @model_validator(mode="after")
    def _complete(self) -> LengthDistribution:
        # Messages read after "got <the table>; expected ...".
        shaped = self.dist in ("normal", "lognormal")
        takes = {
            "mean": shaped,
            "stdev": shaped,
            "values": self.dist == "empirical",
            "weights": self.dist == "empirical",
        }
        needs = {"mean": shaped, "stdev": shaped, "max": self.dist == "uniform"}
        needs["values"] = self.dist == "empirical"
        wanted = [f for f, needed in needs.items() if needed]
        for field in wanted:
            if getattr(self, field) is None:
                raise ValueError(f"{field} as well ({self.dist} takes {' and '.join(wanted)})")
        for field, applies in takes.items():
            if not applies and getattr(self, field) is not None:
                raise ValueError(f"no {field}: {self.dist} does not take one")
        given = len(self.values or ())
        if self.weights is not None and len(self.weights) != given:
            raise ValueError(f"one weight per value ({given} values, {len(self.weights)} weights)")
        high = self.highest
        if self.min > high:
            raise ValueError(f"min at most max (min {self.min}, max {high})")
        if self.values is not None and not any(self.min <= v <= high for v in self.values):
            raise ValueError(f"at least one value within min..max ({self.min}..{high})")
        if self.mean is not None and not self.min <= self.mean <= high:
            raise ValueError(f"a mean within min..max ({self.min}..{high})")
        if self.values is not None:  # the values min..max keeps, with their weights
            weights = self.weights or [1.0] * len(self.values)
            kept = [
                (v, w) for v, w in zip(self.values, weights, strict=True) if self.min <= v <= high
            ]
            self._pool = ([v for v, _ in kept], [w for _, w in kept])
        return self

    @property
    def highest(self) -> int:
        """The longest length this distribution can draw."""
        if self.max is not None:
            return self.max
        if self.values is not None:
            return max(self.values)
        assert self.mean is not None and self.stdev is not None
        return min(MAX_LENGTH, math.ceil(self.mean + 10 * self.stdev))

    def draw(self, rng: random.Random) -> int:
        """One length within ``min..highest``."""
        low, high = self.min, self.highest
        if self.dist == "uniform":
            return rng.randint(low, high)
        if self.dist == "empirical":
            values, weights = self._pool
            return rng.choices(values, weights)[0]
        assert self.mean is not None and self.stdev is not None
        x = self.mean
        for _ in range(_REDRAWS):
            x = self._variate(rng)
            if low <= round(x) <= high:
                break
        return max(low, min(high, round(x)))

    def _variate(self, rng: random.Random) -> float:
        assert self.mean is not None and self.stdev is not None
        if self.dist == "normal":
            return rng.gauss(self.mean, self.stdev)
        # The lognormal whose own mean and stdev are the ones given (moments of X, not ln X).
        sigma2 = math.log1p((self.stdev / self.mean) ** 2)
        return rng.lognormvariate(math.log(self.mean) - sigma2 / 2, math.sqrt(sigma2))


_EITHER = (
    f"a whole number of tokens (1 to {MAX_LENGTH}), or a distribution table such as "
    "{dist = 'lognormal', mean = 512, stdev = 256} (dist: normal, lognormal, uniform, empirical)"
)


def _length(value: Any) -> int | LengthDistribution:
    """A length field's value, its problem named in the plan's words: pydantic's own union
    error lists both branches' failures under internal names (``constrained-int``)."""
    if isinstance(value, LengthDistribution):
        return value
    if isinstance(value, Mapping):
        try:
            return LengthDistribution.model_validate(value)
        except ValidationError as exc:
            raise NestedError(exc, LengthDistribution) from None
    if isinstance(value, int) and not isinstance(value, bool) and 1 <= value <= MAX_LENGTH:
        return value
    raise ConfigError("", value, _EITHER)


Length = Annotated[int | LengthDistribution, BeforeValidator(_length)]
"""A workload's length field: a whole number of tokens, or a distribution drawn per request."""


def highest_length(length: int | LengthDistribution) -> int:
    """The longest length ``length`` can give a request."""
    return length if isinstance(length, int) else length.highest


def draw_length(length: int | LengthDistribution, seed: int, seq: int, field: str) -> int:
    """Request ``seq``'s length: ``length`` itself when fixed, else a draw from a generator
    seeded by (seed, seq, field) alone, so any process builds the same request."""
    if isinstance(length, int):
        return length
    return length.draw(random.Random(f"{seed}:{seq}:{field}"))
