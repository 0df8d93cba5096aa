"""The search: every measured target x its scaling settings, simulated on resampled data.

For each option (a target with min workers, max workers and a scale-down delay; its pinned
workers on a commitment; or a warm target with overflow to another, ``_overflow.py``) the what-if
simulator (``cost.simulate``: the provider's billing rules and stated worker-selection policy)
serves the traffic ``resamples`` times. Each resample draws new arrivals and resamples every
target's measured execution and cold-start arrays with replacement (a bootstrap), and every
option sees the same draw (common random numbers), so options are compared on equal terms.
What an option gets: its daily bill, latency percentile and cold-start rate per resample; the
share of resamples meeting each objective (with a Wilson interval on that share); and whether
it is dominated on (median daily cost, median latency percentile).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from .._base._errors import ConfigError
from ..cost._sim import FleetSettings, simulate
from ..cost._traffic import SECONDS_PER_DAY
from ._estimate import Estimate, Option
from ._inputs import MeasuredTarget, Objectives, Traffic
from ._ttft import ttft_percentile

DEFAULT_SCALE_DOWN_S = (5.0, 30.0, 60.0, 300.0, 900.0)
_Z90 = 1.6448536269514722  # two-sided 90% normal quantile (the Wilson interval's)


def wilson(successes: int, n: int, z: float = _Z90) -> tuple[float, float, float]:
    """The share ``successes / n`` and its Wilson score interval (never outside [0, 1])."""
    if n == 0:
        return (math.nan, 0.0, 1.0)
    p = successes / n
    den = 1 + z * z / n
    mid = (p + z * z / (2 * n)) / den
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / den
    return (p, max(0.0, mid - half), min(1.0, mid + half))


def _spread(values: npt.NDArray[np.float64]) -> tuple[float, float, float]:
    return (
        float(np.median(values)),
        float(np.percentile(values, 5)),
        float(np.percentile(values, 95)),
    )


def options_for(
    target: MeasuredTarget,
    traffic: Traffic,
    *,
    scale_down_s: Sequence[float] = DEFAULT_SCALE_DOWN_S,
    max_workers: int | None = None,
) -> list[Option]:
    """The settings worth simulating for ``target``: scale to zero with every delay, and
    always warm with 1 worker (or enough for the load at its peak), each with room to burst.

    ``max_workers`` defaults to the mean load (the peak slot's rate x mean execution) plus
    headroom: the smallest fleet that is not overloaded, and two more."""
    busy = traffic.peak_rate_per_s * float(np.mean(target.execution_s))
    if traffic.trace_s is not None:  # the busiest minute of the trace
        t = np.asarray(traffic.trace_s)
        per_minute = np.searchsorted(t, t + 60.0) - np.arange(t.size)
        busy = max(busy, float(per_minute.max()) / 60.0 * float(np.mean(target.execution_s)))
    need = max(1, math.ceil(busy))
    cap = max_workers if max_workers is not None else need + 2
    if cap < need:
        raise ConfigError(
            "--max-workers", cap, f">= {need} (the peak load of {target.name} needs {need})"
        )
    delays = settable_delays(target, scale_down_s)
    out = [Option(target.name, 0, cap, d) for d in delays]
    for warm in sorted({1, need}) if target.can_set("min_workers") else ():
        # with min workers the delay only matters for the burst workers above them
        middle = delays[len(delays) // 2]
        out.append(Option(target.name, warm, max(cap, warm), middle))
        if target.committed_usd_per_hour is not None:
            out.append(Option(target.name, warm, max(cap, warm), middle, committed=True))
    return out


def settable_delays(target: MeasuredTarget, scale_down_s: Sequence[float]) -> list[float]:
    """The scale-down delays to simulate: each asked for (raised to the platform's minimum),
    or only the platform's own default where it has no such setting and states one."""
    default = target.billing.default_idle_timeout_s
    if not target.can_set("scale_down_s") and default is not None:
        return [target.billing.effective_idle_timeout_s(None)]
    return sorted({target.billing.effective_idle_timeout_s(d) for d in scale_down_s})


def knob_note(target: MeasuredTarget) -> str | None:
    """What advise left out for ``target`` because its platform has no such setting."""
    if target.knobs is None:
        return (
            f"{target.name}: the {target.provider} plugin does not say which scaling settings "
            "its platform has; every one was searched"
        )
    missing = [k for k in ("min_workers", "max_workers", "scale_down_s") if not target.can_set(k)]
    if not missing:
        return None
    kept = {
        "min_workers": "scaled from zero only",
        "max_workers": "no workers cap (the platform scales with the load)",
        "scale_down_s": (
            f"the platform's own {target.billing.default_idle_timeout_s:g} s scale-down delay"
            if target.billing.default_idle_timeout_s is not None
            else "each delay shown is what the platform's own would cost (it is not a setting)"
        ),
    }
    return f"{target.name}: {target.provider} has no {', '.join(missing)} setting: " + "; ".join(
        kept[k] for k in missing
    )


def grid_options(
    target: MeasuredTarget,
    traffic: Traffic,
    *,
    scale_down_s: Sequence[float] = DEFAULT_SCALE_DOWN_S,
    max_workers: int | None = None,
    within_usd_per_day: float | None = None,
) -> list[Option]:
    """The rest of ``target``'s settings space beyond ``options_for``'s: every min workers
    from 0 to the peak's need, every workers cap from the fewest that carry the day's mean
    load (and no fewer than the min) up to ``options_for``'s cap (need + 2, or
    ``max_workers``), every scale-down delay. A cap below the peak's need trades queueing at
    the peak for the idle time of the workers it never starts: cheaper where the objective
    allows the wait; a cap at the min keeps no burst workers at all.

    Two bounds leave settings out that cannot be the pick: a cap below the mean load cannot
    keep up over the day (its queue never drains), and ``m`` pinned workers bill at least
    ``m`` x the rate all day, so no min whose pinned workers alone cost more than
    ``within_usd_per_day`` (what a feasible option already costs) is offered."""
    default = options_for(target, traffic, scale_down_s=scale_down_s, max_workers=max_workers)
    top = max(o.max_workers for o in default)
    need = max(o.min_workers for o in default)
    mean_load = traffic.rate_per_s * float(np.mean(target.execution_s))
    lowest = max(1, math.ceil(mean_load * 1.0001))  # at exactly the mean load: no slack either
    delays = settable_delays(target, scale_down_s)
    pinned_usd = target.rate_usd_per_s * SECONDS_PER_DAY
    have = set(default)
    out = []
    for low in range(need + 1 if target.can_set("min_workers") else 1):
        if within_usd_per_day is not None and low * pinned_usd > within_usd_per_day:
            break  # and every larger min: the bound
        # a platform without a workers cap scales as far as the load takes it: the top cap
        caps = range(max(low, lowest), top + 1) if target.can_set("max_workers") else [top]
        for high in caps:
            out += [o for d in delays if (o := Option(target.name, low, high, d)) not in have]
    return out


def screen_caps(
    caps: Sequence[Option],
    rivals: Sequence[Option],
    targets: Mapping[str, MeasuredTarget],
    screening: Sequence[Draw],
    traffic: Traffic,
    objectives: Objectives,
    confidence: float,
    within_usd_per_day: float | None = None,
) -> list[Option]:
    """The settings of ``grid_options`` (``caps``) worth a full estimate.

    Each is first estimated on the few ``screening`` draws, beside the ``rivals`` (the default
    settings of the same targets) on the same draws. One is dropped when the screening shows it
    cannot be the pick: (a) it met every objective in so few draws that reaching
    ``confidence`` is out of reach (two misses beyond it are forgiven: at 90% confidence and 8
    draws, a truly 90%-feasible option is dropped 4% of the time), or (b) it is dominated:
    another setting of the same target, min workers and delay met every objective at least as
    often at no
    more median cost and no more median latency, and did better on one, or (c) it costs more
    even in its cheapest screening draws (the 5th percentile) than ``within_usd_per_day``,
    what an option already estimated in full and feasible costs in its dearest (its 95th
    percentile): its median cannot come below that option's. So the search prunes by bounds
    and by dominance, never by leaving a cap out."""
    n = len(screening)
    quick = [estimate(o, targets, screening, traffic, objectives) for o in [*caps, *rivals]]
    survivors = []
    for e in quick[: len(caps)]:
        o = e.option
        if round(e.meets_all[0] * n) < n * confidence - 2:  # (a)
            continue
        if within_usd_per_day is not None and e.cost_usd_per_day[1] > within_usd_per_day:
            continue  # (c)
        same = [
            r
            for r in quick
            if r is not e
            and (r.option.target, r.option.min_workers, r.option.scale_down_s)
            == (o.target, o.min_workers, o.scale_down_s)
        ]
        if not any(_dominates(r, e) for r in same):  # (b)
            survivors.append(o)
    return survivors


def _dominates(a: Estimate, b: Estimate) -> bool:
    """``a`` is at least as good as ``b`` on meeting the objectives, median cost and median
    latency, and better on one."""
    no_worse = (
        a.meets_all[0] >= b.meets_all[0]
        and a.cost_usd_per_day[0] <= b.cost_usd_per_day[0]
        and a.latency_s[0] <= b.latency_s[0]
    )
    better = (
        a.meets_all[0] > b.meets_all[0]
        or a.cost_usd_per_day[0] < b.cost_usd_per_day[0]
        or a.latency_s[0] < b.latency_s[0]
    )
    return no_worse and better


@dataclass(frozen=True)
class Draw:
    """One resample: arrivals and, per target, resampled execution and cold-start arrays."""

    arrivals_s: npt.NDArray[np.float64]
    execution_s: dict[str, npt.NDArray[np.float64]]
    cold_start_s: dict[str, npt.NDArray[np.float64]]
    seed: int


def draws(
    targets: Sequence[MeasuredTarget], traffic: Traffic, resamples: int, seed: int
) -> list[Draw]:
    """``resamples`` bootstrap draws (the first keeps the measurements as measured)."""
    rng = np.random.default_rng(seed)
    out = []
    for k in range(resamples):
        execution, cold = {}, {}
        for t in targets:
            if k == 0:
                execution[t.name], cold[t.name] = t.execution_s, t.cold_start_s
            else:
                execution[t.name], cold[t.name] = _resample(t, rng)
        out.append(Draw(traffic.sample(seed + k), execution, cold, seed + k))
    return out


def _resample(
    target: MeasuredTarget, rng: np.random.Generator
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    """One bootstrap resample of a target's samples. Measured in several runs (days), the
    runs are drawn first, with replacement, then samples within them: a two-stage bootstrap,
    so a day unlike the others moves the answer as much as it would in a new campaign."""
    groups = target.groups()
    if len(groups) > 1:
        chosen = [groups[i] for i in rng.integers(0, len(groups), len(groups))]
        execution = np.concatenate([e for e, _ in chosen])
        cold = np.concatenate([c for _, c in chosen])
        if execution.size == 0 or cold.size == 0:  # the chosen days lack one kind: keep all
            execution, cold = target.execution_s, target.cold_start_s
    else:
        execution, cold = target.execution_s, target.cold_start_s
    return (
        rng.choice(execution, size=target.execution_s.size, replace=True),
        rng.choice(cold, size=target.cold_start_s.size, replace=True),
    )


def overflow_options(
    primary: MeasuredTarget,
    secondary: MeasuredTarget,
    traffic: Traffic,
    *,
    scale_down_s: Sequence[float] = DEFAULT_SCALE_DOWN_S,
    max_workers: int | None = None,
) -> list[Option]:
    """``primary`` always warm (1 worker, or the mean load) with no burst of its own, and
    ``secondary`` scaled to zero with its shortest and middle delay taking the overflow."""
    own = options_for(primary, traffic, scale_down_s=scale_down_s, max_workers=max_workers)
    other = options_for(secondary, traffic, scale_down_s=scale_down_s, max_workers=max_workers)
    delays = sorted({o.scale_down_s for o in other if o.min_workers == 0})
    cap = other[0].max_workers
    return [
        Option(primary.name, o.min_workers, o.min_workers, d, False, secondary.name, cap)
        for o in own
        if o.min_workers and not o.committed
        for d in sorted({delays[0], delays[len(delays) // 2]})
    ]


def simulate_option(
    option: Option,
    targets: Mapping[str, MeasuredTarget],
    draw: Draw,
    traffic: Traffic,
    objectives: Objectives,
) -> tuple[float, float, float, float]:
    """(daily cost in USD, the objective's latency percentile in s, cold-start rate, the TTFT
    objective's percentile in s or NaN) of one option on one draw. The window's bill is
    scaled to a day; fees are per request."""
    target = targets[option.target]
    if option.overflow_to is not None:
        from ._overflow import simulate_chain

        last = targets[option.overflow_to]
        settings = FleetSettings(
            0, option.overflow_max_workers, option.scale_down_s, 1, last.worker_policy
        )
        warm = [(target, option.min_workers)]
        warm += [(targets[t], k) for t, k in zip(option.via, option.via_workers, strict=True)]
        return simulate_chain(
            warm,
            last,
            settings,
            draw.arrivals_s,
            draw.execution_s,
            draw.cold_start_s,
            traffic,
            objectives,
            draw.seed,
        )
    window = traffic.window_s
    sim = simulate(
        draw.arrivals_s,
        execution_s=draw.execution_s[target.name],
        cold_start_s=draw.cold_start_s[target.name],
        settings=FleetSettings(
            option.min_workers,
            option.max_workers,
            option.scale_down_s,
            option.concurrency,
            target.worker_policy,
        ),
        billing=target.billing,
        rate_usd_per_s=target.rate_usd_per_s,
        horizon_s=window,
        seed=draw.seed,
        # each request slowed by how many its worker runs once it has begun (measured so)
        slowdown=target.slowdown if option.concurrency > 1 else (),
    )
    per_day = SECONDS_PER_DAY / window
    cost = (sim.cost_usd + target.billing.fees_usd(sim.requests)) * per_day
    pinned_s = option.min_workers * target.billing.billed_s(window)
    if option.committed and target.committed_usd_per_hour is not None:
        # the pinned workers' billed day on demand is replaced by their commitment
        cost += (target.committed_usd_per_hour / 3600 - target.rate_usd_per_s) * pinned_s * per_day
    if option.commitment_usd_per_day is not None:  # a termed commitment, amortised per day
        cost += (
            option.min_workers * option.commitment_usd_per_day
            - target.rate_usd_per_s * pinned_s * per_day
        )
    # a draw with no request at all (a very low rate) keeps every latency objective
    latency = sim.latency_percentile_s(objectives.latency_percentile) if sim.requests else 0.0
    ttft = math.nan
    if objectives.ttft_s is not None and sim.wait_s is not None:
        ttft = ttft_percentile([(target, sim.wait_s)], draw.seed, objectives.ttft_percentile)
    return cost, latency, sim.cold_rate, ttft


def estimate(
    option: Option,
    targets: Mapping[str, MeasuredTarget],
    all_draws: Sequence[Draw],
    traffic: Traffic,
    objectives: Objectives,
) -> Estimate:
    rows = np.array([simulate_option(option, targets, d, traffic, objectives) for d in all_draws])
    cost, latency, cold = rows[:, 0], rows[:, 1], rows[:, 2]
    checks = {f"p{objectives.latency_percentile:g}": latency <= objectives.latency_s}
    if objectives.max_cold_rate is not None:
        checks["cold_rate"] = cold <= objectives.max_cold_rate
    if objectives.budget_usd_per_day is not None:
        checks["budget"] = cost <= objectives.budget_usd_per_day
    if objectives.ttft_s is not None:
        checks[f"ttft_p{objectives.ttft_percentile:g}"] = rows[:, 3] <= objectives.ttft_s
    ok = np.logical_and.reduce(list(checks.values()))
    n = len(all_draws)
    return Estimate(
        option=option,
        cost_usd_per_day=_spread(cost),
        latency_s=_spread(latency),
        cold_rate=_spread(cold),
        meets={k: wilson(int(v.sum()), n) for k, v in checks.items()},
        meets_all=wilson(int(ok.sum()), n),
        ttft_s=None if objectives.ttft_s is None else _spread(rows[:, 3]),
    )


def mark_frontier(estimates: Sequence[Estimate]) -> list[Estimate]:
    """The same estimates, ``frontier`` set on those no other option beats on both median
    daily cost and median latency (at least as good on both, better on one)."""
    from dataclasses import replace

    def dominated(e: Estimate) -> bool:
        c, lat = e.cost_usd_per_day[0], e.latency_s[0]
        return any(
            o.cost_usd_per_day[0] <= c
            and o.latency_s[0] <= lat
            and (o.cost_usd_per_day[0] < c or o.latency_s[0] < lat)
            for o in estimates
        )

    return [replace(e, frontier=not dominated(e)) for e in estimates]
