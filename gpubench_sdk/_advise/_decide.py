"""The decision: rank the estimates, recommend one, say why and how sure.

Rule: among options meeting every objective in at least ``confidence`` of the resamples, the
one with the lowest median daily cost (ties: lower median latency); with weights given
(``Scoring``, ``_score.py``), the one with the highest weighted score (ties: cheaper). When none
does, the one most likely to meet them all, flagged ``meets_objectives=False``.

Stability: the pick is unstable when a cheaper option is *unsettled*: the resamples neither
rule it in (it met every objective in ``confidence`` of them) nor out (in ``1 - confidence``
or fewer). More measurements would settle it one way or the other, and so could change the
pick. How many: the share ``s`` of resamples an option meets puts the objective about
``z = Phi^-1(s)`` bootstrap standard errors from its estimate; standard errors shrink as
1/sqrt(n), so reaching ``z_c = Phi^-1(confidence)`` takes about ``n x (z_c / z)^2`` cold starts
(capped at 100 x n: "many more"). A rough guide, said to be one.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from statistics import NormalDist
from typing import Any

from ..cost._traffic import SECONDS_PER_DAY
from ._commit import attach_terms, terms_note
from ._estimate import Estimate
from ._inputs import MeasuredTarget, Objectives, Traffic
from ._options import more_notes, more_options, option_json
from ._score import OptionScore, Scoring, check_scoring, score_options
from ._search import (
    DEFAULT_SCALE_DOWN_S,
    draws,
    estimate,
    grid_options,
    mark_frontier,
    options_for,
    overflow_options,
    screen_caps,
)

_MAX_FACTOR = 100.0  # beyond 100x the measurements, "many more" is the honest answer
SCREENING_DRAWS = 8  # the draws a lower workers cap is screened on before a full estimate


@dataclass(frozen=True)
class Advice:
    """What ``advise`` found: every option's estimate (``options``, cheapest first), the
    recommendation and the runner-up, the reason in a sentence, and how stable the pick is."""

    traffic: Traffic
    objectives: Objectives
    resamples: int
    confidence: float
    options: list[Estimate]
    recommended: Estimate | None
    runner_up: Estimate | None
    meets_objectives: bool
    reason: str
    unsettled_by: Estimate | None  # the cheaper option the resamples neither rule in nor out
    cold_starts_measured: int  # of the unsettled option's target (else the recommendation's)
    more_cold_starts: int | None  # None: stable
    notes: list[str] = field(default_factory=list)
    # the weighted score of each option, in ``options``' order (None: no weights or criteria)
    scores: list[OptionScore] | None = None
    # with the unsettled target measured over several runs (a campaign's days): about how many
    # days in all would settle it, by the same rule as the cold starts (None: not applicable)
    more_days: int | None = None
    days_measured: int = 1
    scoring: Scoring | None = None
    targets: list[MeasuredTarget] = field(default_factory=list, repr=False)

    def score_of(self, e: Estimate) -> OptionScore | None:
        if self.scores is None:
            return None
        return next(s for o, s in zip(self.options, self.scores, strict=True) if o is e)

    @property
    def frontier(self) -> list[Estimate]:
        return [e for e in self.options if e.frontier]

    @property
    def stable(self) -> bool:
        return self.unsettled_by is None

    def to_html(self, title: str = "gpubench advise") -> str:
        """The advice as a standalone page in the HTML report's style, with the cost/latency
        frontier chart (``gpubench advise --html``)."""
        from .._report._advise import advice_page

        return advice_page(self.to_json(), title)

    def to_json(self) -> dict[str, Any]:
        def est(e: Estimate | None) -> dict[str, Any] | None:
            if e is None:
                return None
            o = e.option
            return {
                "target": o.target,
                "label": o.label,
                "min_workers": o.min_workers,
                "max_workers": o.max_workers,
                "scale_down_s": o.scale_down_s,
                "committed": o.committed,
                "overflow_to": o.overflow_to,
                "overflow_max_workers": o.overflow_max_workers or None,
                "cost_usd_per_day": _triple(e.cost_usd_per_day),
                "latency_ms": _triple(tuple(v * 1e3 for v in e.latency_s)),
                "cold_rate": _triple(e.cold_rate),
                "p_meets": {k: _share(v) for k, v in e.meets.items()},
                "p_meets_all": _share(e.meets_all),
                "frontier": e.frontier,
                "ttft_ms": None if e.ttft_s is None else _triple(tuple(v * 1e3 for v in e.ttft_s)),
                "score": _score_json(self.score_of(e)),
                **option_json(e),
            }

        return {
            "traffic": {
                "description": self.traffic.describe(),
                "arrivals": self.traffic.arrivals,
                "rate_per_s": self.traffic.rate_per_s,
                "requests_per_day": self.traffic.requests_per_day,
                "daily_profile": list(self.traffic.daily_profile or []) or None,
                "trace_arrivals": None
                if self.traffic.trace_s is None
                else len(self.traffic.trace_s),
                "simulated_window_s": self.traffic.window_s,
            },
            "objectives": {
                "latency_percentile": self.objectives.latency_percentile,
                "latency_ms": self.objectives.latency_s * 1e3,
                "max_cold_rate": self.objectives.max_cold_rate,
                "budget_usd_per_day": self.objectives.budget_usd_per_day,
                "ttft_percentile": self.objectives.ttft_percentile
                if self.objectives.ttft_s is not None
                else None,
                "ttft_ms": None if self.objectives.ttft_s is None else self.objectives.ttft_s * 1e3,
            },
            "targets": [_target_json(t) for t in self.targets],
            "scoring": None
            if self.scoring is None
            else {
                "ranks": self.scoring.ranks,
                "weights": None if self.scoring.weights is None else dict(self.scoring.weights),
                "criteria": {k: dict(v) for k, v in (self.scoring.criteria or {}).items()},
            },
            "resamples": self.resamples,
            "confidence": self.confidence,
            "recommended": est(self.recommended),
            "runner_up": est(self.runner_up),
            "meets_objectives": self.meets_objectives,
            "reason": self.reason,
            "unsettled_by": est(self.unsettled_by),
            "stable": self.stable,
            "cold_starts_measured": self.cold_starts_measured,
            "more_cold_starts": self.more_cold_starts,
            "days_measured": self.days_measured,
            "more_days": self.more_days,
            "notes": self.notes,
            "options": [est(e) for e in self.options],
        }


def _score_json(s: OptionScore | None) -> dict[str, Any] | None:
    if s is None:
        return None
    return {"score": s.score, "contributions": s.contributions, "values": s.values}


def _target_json(t: MeasuredTarget) -> dict[str, Any]:
    return {
        "name": t.name,
        "provider": t.provider,
        "executions": int(t.execution_s.size),
        "cold_starts": int(t.cold_start_s.size),
        "ttfts": 0 if t.ttft_s is None else int(t.ttft_s.size),
        "runs": list(t.runs),
        "rate_usd_per_s": t.rate_usd_per_s,
        "billing_granularity_s": t.billing.granularity_s,
        "worker_policy": t.worker_policy,
    }


def _triple(v: tuple[float, ...]) -> dict[str, float]:
    return {"median": v[0], "p5": v[1], "p95": v[2]}


def _share(v: tuple[float, float, float]) -> dict[str, float]:
    return {"share": v[0], "low": v[1], "high": v[2]}


def _feasible_cost(found: Sequence[Estimate], target: str, confidence: float) -> float | None:
    """What a feasible option of ``target`` already costs a day (the cheapest one's 95th
    percentile); None when none is feasible yet: then no bound."""
    costs = [
        e.cost_usd_per_day[2]
        for e in found
        if e.option.target == target and e.meets_all[0] >= confidence
    ]
    return min(costs) if costs else None


def _rank_key(e: Estimate) -> tuple[float, ...]:
    return (e.cost_usd_per_day[0], e.latency_s[0])


def advise_targets(
    targets: Sequence[MeasuredTarget],
    traffic: Traffic,
    objectives: Objectives,
    *,
    resamples: int = 40,
    confidence: float = 0.9,
    scale_down_s: Sequence[float] = DEFAULT_SCALE_DOWN_S,
    max_workers: int | None = None,
    seed: int = 0,
    overflow: bool = True,
    scoring: Scoring | None = None,
    horizon_months: float | None = None,
    overflow_depth: int = 3,
    assume_concurrency: bool = False,
) -> Advice:
    """Search every target's scaling settings for ``traffic`` and recommend one (see the
    module's docstring for the rule). With two targets or more and ``overflow``, each pair
    is also tried as a primary kept warm with overflow to the other scaled to zero.
    ``scoring``: weights and user criteria for the weighted score (``_score.py``).
    Deterministic for a given ``seed``."""
    from .._base._errors import ConfigError

    if not targets:
        raise ConfigError("runs", [], "at least one stored run with a measured target")
    if resamples < 2:
        raise ConfigError("--resamples", resamples, "an integer >= 2")
    if not 0 < confidence <= 1:
        raise ConfigError("--confidence", confidence, "a share in (0, 1]")
    by_name = {t.name: t for t in targets}
    if objectives.ttft_s is not None:
        for t in targets:
            if t.ttft_s is None or t.ttft_s.size == 0:
                raise ConfigError(
                    "--ttft-p95-ms",
                    t.name,
                    f"streamed responses measured for {t.name} (its requests' first token "
                    "times), or no TTFT objective",
                )
    if scoring is not None:  # a criterion's missing target is refused before any work
        check_scoring(scoring, by_name, objectives.ttft_s is not None)
    all_draws = draws(targets, traffic, resamples, seed)
    options = [
        o
        for t in targets
        for o in options_for(t, traffic, scale_down_s=scale_down_s, max_workers=max_workers)
    ]
    if overflow:
        options += [
            o
            for p in targets
            for s in targets
            if p is not s
            for o in overflow_options(
                p, s, traffic, scale_down_s=scale_down_s, max_workers=max_workers
            )
        ]
    # concurrency per worker, termed commitments, overflow chains (advopt22: _options.py)
    options += more_options(
        targets, traffic, options, scale_down_s=scale_down_s, max_workers=max_workers,
        horizon_months=horizon_months, overflow_depth=overflow_depth if overflow else 2,
        assume_concurrency=assume_concurrency,
    )  # fmt: skip
    found = [estimate(o, by_name, all_draws, traffic, objectives) for o in options]
    # the rest of each target's settings space (every min, cap and delay within the bounds):
    # screened on a few draws, then estimated in full
    plain = [
        e for e in found
        if e.option.overflow_to is None and e.option.concurrency == 1 and not e.option.committed
        and e.option.commitment is None
    ]  # fmt: skip
    grid = [
        o
        for t in targets
        for o in grid_options(
            t, traffic, scale_down_s=scale_down_s, max_workers=max_workers,
            within_usd_per_day=_feasible_cost(plain, t.name, confidence),
        )
    ]  # fmt: skip
    screening = all_draws[: min(SCREENING_DRAWS, len(all_draws))]
    rivals = [e.option for e in plain]
    # the cheapest feasible option's dearest draw: no setting dearer in its cheapest can be
    # the pick (unless weights rank the options, and then cost is not the order)
    sure_costs = [e.cost_usd_per_day[2] for e in found if e.meets_all[0] >= confidence]
    bound = min(sure_costs) if sure_costs and not (scoring and scoring.ranks) else None
    kept = screen_caps(
        grid, rivals, by_name, screening, traffic, objectives, confidence, within_usd_per_day=bound
    )
    found += [estimate(o, by_name, all_draws, traffic, objectives) for o in kept]
    searched = (
        f"searched {len(options) + len(grid)} settings: {len(found)} simulated on "
        f"{len(all_draws)} resamples, {len(grid) - len(kept)} ruled out on "
        f"{len(screening)} screening draws (met the objectives too rarely, dominated at "
        "the same min workers and delay, or dearer in their cheapest draws than a feasible "
        "option in its dearest); no min workers whose pinned workers alone cost more than a "
        "feasible option"
    )
    found = attach_terms(found, by_name, horizon_months)
    ranked = sorted(mark_frontier(found), key=_rank_key)
    scores = None
    key = _rank_key
    if scoring is not None:
        scores = score_options(ranked, by_name, scoring, objectives.ttft_s is not None)
        if scoring.ranks:  # highest score first, ties cheaper first
            points = {id(e): s.score for e, s in zip(ranked, scores, strict=True)}

            def key(e: Estimate) -> tuple[float, ...]:
                return (-round(points[id(e)], 12), *_rank_key(e))

    sure = sorted([e for e in ranked if e.meets_all[0] >= confidence], key=key)
    meets = bool(sure)
    if sure:
        order = sure + sorted([e for e in ranked if e not in sure], key=lambda e: -e.meets_all[0])
    else:
        order = sorted(ranked, key=lambda e: (-e.meets_all[0], *_rank_key(e)))
    best, second = order[0], (order[1] if len(order) > 1 else None)
    unsettled = _unsettled(ranked, best, confidence, key) if meets else None
    # the cold starts to add are the unsettled option's (its target's, or its pair's fewest)
    cold_n = min(by_name[n].cold_start_s.size for n in _names(unsettled or best))
    more = None if unsettled is None else _more_samples(unsettled.meets_all[0], confidence, cold_n)
    days = min(max(1, len(by_name[n].runs)) for n in _names(unsettled or best))
    more_days = None
    if unsettled is not None and days > 1:  # days are resampled too: they settle it the same way
        more_days = _more_samples(unsettled.meets_all[0], confidence, days)
    notes = [
        f"{t.name}: {t.cold_start_s.size} cold starts and {t.execution_s.size} executions "
        f"measured; billed per {t.billing.granularity_s:g} s at ${t.rate_usd_per_s:.6g}/s; "
        f"worker policy {t.worker_policy}"
        + (
            f"; pooled from runs {', '.join(map(str, t.runs))}, resampled run by run"
            if len(t.runs) > 1
            else ""
        )
        for t in targets
    ]
    notes.append(searched)
    notes += more_notes(targets, overflow_depth if overflow else 2, assume_concurrency)
    notes += [n for e in ranked if (n := terms_note(e))]
    tail = _tail_note(best, objectives, by_name)
    if tail:
        notes.append(tail)
    if traffic.window_s < SECONDS_PER_DAY:
        notes.append(
            f"simulated {traffic.window_s:,.0f} s of traffic per resample, bills scaled to a day"
        )
    return Advice(
        traffic=traffic,
        objectives=objectives,
        resamples=resamples,
        confidence=confidence,
        options=ranked,
        recommended=best,
        runner_up=second,
        meets_objectives=meets,
        reason=_score_reason(best, second, scores, ranked, resamples)
        if meets and scoring is not None and scoring.ranks
        else _reason(best, second, objectives, confidence, meets, resamples),
        unsettled_by=unsettled,
        cold_starts_measured=cold_n,
        more_cold_starts=more,
        notes=notes,
        more_days=more_days,
        days_measured=days,
        scores=scores,
        scoring=scoring,
        targets=list(targets),
    )


def _score_reason(
    best: Estimate,
    second: Estimate | None,
    scores: Sequence[OptionScore] | None,
    ranked: Sequence[Estimate],
    resamples: int,
) -> str:
    by = dict(zip(map(id, ranked), scores or (), strict=True))
    top = by[id(best)]
    lead = max(top.contributions, key=lambda k: top.contributions[k])
    than = ""
    if second is not None:
        than = f"; the runner-up {second.option.label} scored {by[id(second)].score:.2f}"
    return (
        f"{best.option.label} has the highest weighted score ({top.score:.2f}, most from "
        f"{lead}) of the options that met every objective in {best.meets_all[0]:.0%} of "
        f"{resamples} resamples (${best.cost_usd_per_day[0]:,.2f}/day){than}."
    )


def _tail_note(
    best: Estimate, objectives: Objectives, by_name: dict[str, MeasuredTarget]
) -> str | None:
    """A warning when the recommendation's latency percentile falls among its cold requests
    at a quantile the measured cold starts are too few to resolve: a bootstrap never draws a
    cold start slower than the slowest measured, so the latency and its interval come out
    too low. With a share ``c`` of cold requests, the ``p``th latency percentile sits near
    the ``1 - (1 - p) / c`` quantile of cold starts, which needs about ``c / (1 - p)``
    measurements to be more than the largest one."""
    cold = best.cold_rate[0]
    tail = 1 - objectives.latency_percentile / 100
    if cold <= tail:
        return None
    need = math.ceil(cold / tail) if tail > 0 else 10**6  # p100: the slowest ever drawn
    n = min(by_name[name].cold_start_s.size for name in _names(best))
    if n >= 2 * need:
        return None
    q = f"p{objectives.latency_percentile:g}"
    return (
        f"the recommendation's {q} falls among its cold requests ({cold:.0%} of them), near "
        f"the slowest of the {n} measured cold starts: the bootstrap cannot draw slower ones, "
        f"so its {q} and interval may be low; {2 * need:,}+ cold starts would resolve it"
    )


def _names(e: Estimate) -> list[str]:
    o = e.option
    return [o.target, *o.via] + ([o.overflow_to] if o.overflow_to else [])


def _unsettled(
    ranked: Sequence[Estimate],
    best: Estimate,
    confidence: float,
    key: Callable[[Estimate], tuple[float, ...]] = _rank_key,
) -> Estimate | None:
    """The option ranked above ``best`` (cheaper, or with weights a higher score) closest to
    the line between ruled in and ruled out, if any."""
    low = round(min(confidence, 1 - confidence), 9)  # 1 - 0.9 is 0.09999999999999998
    cheaper = [e for e in ranked if key(e) < key(best) and low < e.meets_all[0] < confidence]
    return max(cheaper, key=lambda e: e.meets_all[0], default=None)


def _more_samples(share: float, confidence: float, measured: int) -> int:
    """Roughly how many cold starts in total would settle an option met in ``share`` of the
    resamples (see the module's docstring)."""
    normal = NormalDist()
    z = abs(normal.inv_cdf(min(max(share, 1e-3), 1 - 1e-3)))
    target = abs(normal.inv_cdf(confidence if confidence < 1 else 0.999))
    factor = _MAX_FACTOR if z < 1e-9 else min((target / z) ** 2, _MAX_FACTOR)
    return max(math.ceil(measured * factor), measured + 1)


def _reason(
    best: Estimate,
    second: Estimate | None,
    objectives: Objectives,
    confidence: float,
    meets: bool,
    resamples: int,
) -> str:
    cost = best.cost_usd_per_day[0]
    q = f"p{objectives.latency_percentile:g}"
    share = best.meets_all[0]
    if not meets:
        return (
            f"No option met every objective in {confidence:.0%} of {resamples} resamples; "
            f"{best.option.label} came closest ({share:.0%}, {q} "
            f"{best.latency_s[0] * 1e3:,.0f} ms, ${cost:,.2f}/day)."
        )
    than = ""
    if second is not None:
        saving = second.cost_usd_per_day[0] - cost
        than = (
            f", ${saving:,.2f}/day less than the runner-up {second.option.label}"
            if saving > 0
            else f", with a lower {q} than the equally priced {second.option.label}"
        )
    ttft = ""
    if objectives.ttft_s is not None and best.ttft_s is not None:
        ttft = (
            f", TTFT p{objectives.ttft_percentile:g} {best.ttft_s[0] * 1e3:,.0f} ms against "
            f"{objectives.ttft_s * 1e3:,.0f} ms"
        )
    return (
        f"{best.option.label} is the cheapest option that met every objective in "
        f"{share:.0%} of {resamples} resamples ({q} {best.latency_s[0] * 1e3:,.0f} ms "
        f"against {objectives.latency_s * 1e3:,.0f} ms{ttft}, ${cost:,.2f}/day){than}."
    )
