"""Commitments with a minimum term (reserved capacity paid by the month) against on demand.

A commitment (``cost.Commitment``: USD per month or hour for one worker, at least
``min_months``) pays for an always-warm option's pinned workers; the burst above them stays on
demand. Over a horizon of ``H`` months (``--horizon-months``; default: the term, at least one
month) a commitment of ``T`` months costs ``max(T, H)`` months of payments: a term longer than
the horizon is paid in full, so its price per day of use is raised by ``T / H``
(``Commitment.usd_per_day``). The option is simulated as the same always-warm setting on demand
and re-priced; ``CommitmentTerms`` then sets it against that same setting on demand over the
horizon, with the break-even utilisation: the share of the day one worker must be billed on
demand before the commitment costs less (``cost.compare_commitments``'s definition).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

from ..cost._commitments import DAYS_PER_MONTH, Commitment
from ..cost._traffic import SECONDS_PER_DAY
from ._estimate import CommitmentTerms, Estimate, Option

if TYPE_CHECKING:
    from ._inputs import MeasuredTarget


def horizon_of(commitment: Commitment, horizon_months: float | None) -> float:
    """The horizon a commitment is priced over: the one given, else its term (>= 1 month)."""
    return horizon_months if horizon_months is not None else max(commitment.min_months, 1.0)


def commitment_options(
    target: MeasuredTarget, warm: Sequence[Option], horizon_months: float | None
) -> list[Option]:
    """Every on-demand always-warm option of ``target`` (``warm``) again with its pinned
    workers on each of the target's commitments."""
    out = []
    for c in target.commitments:
        per_day = c.usd_per_day(horizon_of(c, horizon_months))
        for o in warm:
            if o.min_workers and not o.committed and o.commitment is None:
                out.append(replace(o, commitment=c.name, commitment_usd_per_day=per_day))
    return out


def attach_terms(
    estimates: Sequence[Estimate],
    targets: dict[str, MeasuredTarget],
    horizon_months: float | None,
) -> list[Estimate]:
    """The estimates, each committed one with its ``CommitmentTerms`` against the estimate of
    the same setting on demand (which the search always holds)."""
    by_option = {e.option: e for e in estimates}
    out = []
    for e in estimates:
        o = e.option
        if o.commitment is None or o.commitment_usd_per_day is None:
            out.append(e)
            continue
        target = targets[o.target]
        c = next(c for c in target.commitments if c.name == o.commitment)
        plain = by_option[replace(o, commitment=None, commitment_usd_per_day=None)]
        horizon = horizon_of(c, horizon_months)
        days = horizon * DAYS_PER_MONTH
        full_day = target.rate_usd_per_s * SECONDS_PER_DAY
        u = o.commitment_usd_per_day / full_day if full_day > 0 else None
        terms = CommitmentTerms(
            name=c.name,
            usd=c.usd,
            per=c.per,
            min_months=c.min_months,
            horizon_months=horizon,
            priced_months=max(c.min_months, horizon),
            usd_per_day=o.commitment_usd_per_day,
            committed_usd=e.cost_usd_per_day[0] * days,
            on_demand_usd=plain.cost_usd_per_day[0] * days,
            break_even_utilization=u if u is not None and u <= 1 else None,
        )
        out.append(replace(e, commitment=terms))
    return out


def terms_note(e: Estimate) -> str | None:
    """A sentence on a committed option: over which months, against on demand, break-even."""
    t = e.commitment
    if t is None:
        return None
    unit = "month" if t.per == "month" else "hour"
    outlasts = (
        f"; its {t.min_months:g}-month term outlasts the {t.horizon_months:g}-month horizon and "
        "is paid in full"
        if t.min_months > t.horizon_months
        else ""
    )
    even = (
        "never (it costs more than a worker billed all day on demand)"
        if t.break_even_utilization is None
        else f"{t.break_even_utilization:.0%} utilisation of each pinned worker"
    )
    verdict = "saves" if t.saving_usd >= 0 else "costs"
    return (
        f"{e.option.label}: ${t.usd:,.2f}/{unit} per worker = ${t.usd_per_day:,.2f}/day over "
        f"{t.horizon_months:g} months{outlasts}; ${t.committed_usd:,.0f} over the horizon "
        f"against ${t.on_demand_usd:,.0f} for the same setting on demand: it {verdict} "
        f"${abs(t.saving_usd):,.0f}; break-even at {even}"
    )
