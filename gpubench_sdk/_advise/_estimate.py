"""What advise's search produces: an ``Option`` (one setting of one target), its ``Estimate``
over every resample, and a commitment's ``CommitmentTerms`` against on demand. Plain data, below
the search (``_search``) and the commitment pricing (``_commit``) that both build them."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class CommitmentTerms:
    """A committed option against the same setting on demand, over the horizon.

    ``usd_per_day``: the commitment's price per worker per day of the horizon (the whole term
    paid when it outlasts the horizon); ``priced_months``: ``max(term, horizon)``;
    ``committed_usd`` / ``on_demand_usd``: the option's median bill over the horizon either
    way; ``break_even_utilization``: the share of a day one worker must be billed on demand
    for the commitment to cost the same (``None``: never, it costs more than a whole day)."""

    name: str
    usd: float
    per: str
    min_months: float
    horizon_months: float
    priced_months: float
    usd_per_day: float
    committed_usd: float
    on_demand_usd: float
    break_even_utilization: float | None

    @property
    def saving_usd(self) -> float:
        """What the commitment saves over the horizon (negative: it costs more)."""
        return self.on_demand_usd - self.committed_usd


@dataclass(frozen=True, slots=True)
class Option:
    """One setting of one target."""

    target: str
    min_workers: int
    max_workers: int
    scale_down_s: float
    committed: bool = False  # the min workers on a commitment, not on demand
    overflow_to: str | None = None  # a second target taking what finds every worker busy
    overflow_max_workers: int = 0
    concurrency: int = 1  # requests one worker serves at once (the platform's setting)
    # a commitment with a term (``Commitment``) paying for the min workers, and what one of
    # them costs a day over the horizon (the whole term paid when it outlasts the horizon)
    commitment: str | None = None
    commitment_usd_per_day: float | None = None
    # an overflow chain: warm targets between the primary and ``overflow_to``, in order, each
    # with ``via_workers`` always-on workers taking what finds the previous ones all busy
    via: tuple[str, ...] = ()
    via_workers: tuple[int, ...] = ()

    @property
    def label(self) -> str:
        if self.overflow_to is not None:
            middle = "".join(
                f" -> {t} min=max={k}" for t, k in zip(self.via, self.via_workers, strict=True)
            )
            return (
                f"{self.target} always-warm min=max={self.min_workers}{middle} + overflow to "
                f"{self.overflow_to} max={self.overflow_max_workers} idle={self.scale_down_s:g}s"
            )
        warm = "always-warm" if self.min_workers else "scale-to-zero"
        warm += " committed" if self.committed else ""
        warm += f" committed {self.commitment}" if self.commitment else ""
        per = f" concurrency={self.concurrency}" if self.concurrency > 1 else ""
        return (
            f"{self.target} {warm} min={self.min_workers} max={self.max_workers} "
            f"idle={self.scale_down_s:g}s{per}"
        )


@dataclass(frozen=True)
class Estimate:
    """An option over every resample: the median and the 5-95% interval of each figure, and
    the share of resamples meeting each objective (``meets``) with its 90% Wilson interval."""

    option: Option
    cost_usd_per_day: tuple[float, float, float]  # median, 5%, 95%
    latency_s: tuple[float, float, float]  # the objective's percentile
    cold_rate: tuple[float, float, float]
    meets: dict[str, tuple[float, float, float]]  # objective -> (share, low, high)
    meets_all: tuple[float, float, float]
    frontier: bool = False
    ttft_s: tuple[float, float, float] | None = None  # with a TTFT objective (``_ttft.py``)
    commitment: CommitmentTerms | None = None  # a termed commitment against on demand
