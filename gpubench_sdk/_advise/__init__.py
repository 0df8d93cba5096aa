"""``gpubench advise``: from stored measurements to a provider and settings for a traffic
profile and objectives, with how sure the answer is. See docs/advise.md.

``advise(store, runs, traffic, objectives)`` reads every target of ``runs``
(``measured_targets``) and searches their scaling settings (``advise_targets``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from ._batch import BatchAdvice, BatchWindow, HourSlot, advise_batch, campaign_runs
from ._decide import Advice, advise_targets
from ._estimate import CommitmentTerms, Estimate, Option
from ._inputs import MeasuredTarget, Objectives, Traffic, measured_targets
from ._score import OptionScore, Scoring
from ._search import DEFAULT_SCALE_DOWN_S

if TYPE_CHECKING:
    from .._store._store import Store
    from ..cost._catalog import PriceCatalog
    from ..cost._commitments import Commitment


def advise(
    store: Store,
    runs: Sequence[int | str],
    traffic: Traffic,
    objectives: Objectives,
    *,
    prices: Mapping[str, tuple[str, float]] | None = None,
    committed: Mapping[str, float] | None = None,
    catalog: PriceCatalog | None = None,
    resamples: int = 40,
    confidence: float = 0.9,
    scale_down_s: Sequence[float] = DEFAULT_SCALE_DOWN_S,
    max_workers: int | None = None,
    seed: int = 0,
    overflow: bool = True,
    weights: Mapping[str, float] | None = None,
    criteria: Mapping[str, Mapping[str, float]] | None = None,
    commitments: Mapping[str, Sequence[Commitment]] | None = None,
    horizon_months: float | None = None,
    overflow_depth: int = 3,
    assume_concurrency: bool = False,
) -> Advice:
    """Recommend a target and its scaling settings for ``traffic`` under ``objectives``.

    ``runs``: stored runs (ids or ``"latest"``) whose targets were measured with cold starts;
    ``prices``: ``{target: (billing model, USD per second)}`` for targets whose plan names no
    price; ``committed``: ``{target: USD per hour}`` of one worker on a commitment (reserved or
    active workers), which adds always-warm options priced that way. Every option is
    simulated on ``resamples`` bootstrap resamples of the measurements; the recommendation is
    the cheapest option meeting every objective in ``confidence`` of them. ``weights``
    (``cost``, ``latency``, ``cold``, ``ttft`` and any user criterion -> weight) rank those
    options by the metrics guide's weighted score instead; ``criteria`` (user criterion ->
    provider or target -> number, higher is better, e.g. ``{"sla": {"runpod": 99.9}}``) adds
    criteria to it. Either one shows each option's score (``Advice.scores``).

    ``commitments``: ``{target: [Commitment(...)]}`` (``cost.Commitment``: USD per month or
    hour with a minimum term), priced over ``horizon_months`` (default: each one's term) and
    set against on demand with the break-even; ``overflow_depth``: the length of overflow
    chains tried (3: a primary, one warm middle target, a last one scaled to zero; 2: pairs
    only). Concurrency per worker is searched where the platform has it and a run measured
    its slowdown, or, with ``assume_concurrency``, assuming none (docs/advise.md)."""
    from ..cost._catalog import load_catalog

    targets = measured_targets(
        store, runs, catalog or load_catalog(), prices, committed, commitments
    )
    return advise_targets(
        targets,
        traffic,
        objectives,
        resamples=resamples,
        confidence=confidence,
        scale_down_s=scale_down_s,
        max_workers=max_workers,
        seed=seed,
        overflow=overflow,
        scoring=None if weights is None and criteria is None else Scoring(weights, criteria),
        horizon_months=horizon_months,
        overflow_depth=overflow_depth,
        assume_concurrency=assume_concurrency,
    )


__all__ = [
    "DEFAULT_SCALE_DOWN_S",
    "Advice",
    "BatchAdvice",
    "BatchWindow",
    "CommitmentTerms",
    "Estimate",
    "HourSlot",
    "MeasuredTarget",
    "Objectives",
    "Option",
    "OptionScore",
    "Scoring",
    "Traffic",
    "advise",
    "advise_batch",
    "advise_targets",
    "campaign_runs",
    "measured_targets",
]
