"""The options beyond one target's scaling settings and a pair (``_search.py``): concurrency per
worker, commitments with a term, and overflow chains across three providers or more.

``more_options`` adds them to the search; ``more_notes`` says what each rests on. The bounds:

* **Concurrency**: where the target's platform has a per-worker setting
  (``_concurrency.PLATFORM_CONCURRENCY``), 2, 4 and 8 requests at once (no more than measured
  when a slowdown was measured), each scaled to zero with the shortest and the middle delay
  and kept warm with one worker; max workers: the load at the busiest slot over ``k``, + 2.
* **Commitments**: every on-demand always-warm option again on each commitment
  (``_commit.py``).
* **Chains** (``overflow_depth`` targets, 3 by default; 2 is the pair search alone): a primary
  kept warm with one worker, then ``depth - 2`` middle targets with one warm worker each, then
  a last one scaled to zero with its shortest delay, over ordered choices of distinct targets.
  That is ``T!/(T-d)!`` chains for ``T`` targets; at most ``MAX_CHAINS`` are simulated, those
  whose warm stages are cheapest per second first (a warm stage costs its rate all day).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from ._commit import commitment_options
from ._concurrency import concurrency_levels, slowdown_at, slowdown_note
from ._estimate import Estimate, Option
from ._inputs import MeasuredTarget, Traffic
from ._search import DEFAULT_SCALE_DOWN_S, knob_note, options_for

MAX_CHAINS = 24


def concurrency_options(
    target: MeasuredTarget,
    traffic: Traffic,
    *,
    scale_down_s: Sequence[float] = DEFAULT_SCALE_DOWN_S,
    max_workers: int | None = None,
    assume: bool = False,
) -> list[Option]:
    """``target``'s settings with several requests per worker (none where its platform has
    no such setting, or where no slowdown was measured unless ``assume``)."""
    if not target.can_set("concurrency"):
        return []
    base = options_for(target, traffic, scale_down_s=scale_down_s, max_workers=max_workers)
    delays = sorted({o.scale_down_s for o in base if o.min_workers == 0})
    short, middle = delays[0], delays[len(delays) // 2]
    busy = traffic.peak_rate_per_s * float(np.mean(target.execution_s))
    out = []
    for k in concurrency_levels(target.provider, target.slowdown, assume):
        need = max(1, math.ceil(busy * slowdown_at(target.slowdown, k) / k))
        cap = max_workers if max_workers is not None else need + 2
        for d in sorted({short, middle}):
            out.append(Option(target.name, 0, cap, d, concurrency=k))
        if target.can_set("min_workers"):
            out.append(Option(target.name, 1, max(cap, 1), middle, concurrency=k))
    return out


def chain_options(
    targets: Sequence[MeasuredTarget],
    traffic: Traffic,
    depth: int,
    *,
    scale_down_s: Sequence[float] = DEFAULT_SCALE_DOWN_S,
    max_workers: int | None = None,
) -> list[Option]:
    """Overflow chains of ``depth`` distinct targets (see the module's docstring)."""
    if depth < 3 or len(targets) < depth:
        return []
    chains = sorted(
        itertools.permutations(targets, depth),
        key=lambda c: (sum(t.rate_usd_per_s for t in c[:-1]), [t.name for t in c]),
    )[:MAX_CHAINS]
    out = []
    for chain in chains:
        *warm, last = chain
        own = options_for(last, traffic, scale_down_s=scale_down_s, max_workers=max_workers)
        delay = min(o.scale_down_s for o in own if o.min_workers == 0)
        out.append(
            Option(
                warm[0].name,
                1,
                1,
                delay,
                overflow_to=last.name,
                overflow_max_workers=own[0].max_workers,
                via=tuple(t.name for t in warm[1:]),
                via_workers=(1,) * (len(warm) - 1),
            )
        )
    return out


def more_options(
    targets: Sequence[MeasuredTarget],
    traffic: Traffic,
    base: Sequence[Option],
    *,
    scale_down_s: Sequence[float] = DEFAULT_SCALE_DOWN_S,
    max_workers: int | None = None,
    horizon_months: float | None = None,
    overflow_depth: int = 3,
    assume_concurrency: bool = False,
) -> list[Option]:
    """The options to add to ``base`` (the search's own): concurrency, commitments, chains."""
    out: list[Option] = []
    for t in targets:
        out += concurrency_options(
            t, traffic, scale_down_s=scale_down_s, max_workers=max_workers,
            assume=assume_concurrency,
        )  # fmt: skip
        warm = [o for o in base if o.target == t.name and o.overflow_to is None]
        out += commitment_options(t, warm, horizon_months)
    out += chain_options(
        targets, traffic, overflow_depth, scale_down_s=scale_down_s, max_workers=max_workers
    )
    return out


def more_notes(
    targets: Sequence[MeasuredTarget], overflow_depth: int, assume_concurrency: bool = False
) -> list[str]:
    notes = [
        n
        for t in targets
        if (n := slowdown_note(t.name, t.provider, t.slowdown, assume_concurrency))
    ]
    notes += [n for t in targets if (n := knob_note(t))]
    if overflow_depth >= 3 and len(targets) >= overflow_depth:
        orders = math.perm(len(targets), overflow_depth)
        notes.append(
            f"overflow chains of {overflow_depth} targets: {min(orders, MAX_CHAINS)} of the "
            f"{orders} "
            "orders simulated (cheapest warm stages first), each warm stage with one worker"
        )
    return notes


def option_json(e: Estimate) -> dict[str, Any]:
    """The JSON of an estimate's fields this module adds (``Advice.to_json`` merges them)."""
    o, t = e.option, e.commitment
    return {
        "concurrency": o.concurrency,
        "via": [{"target": v, "workers": k} for v, k in zip(o.via, o.via_workers, strict=True)],
        "commitment": None
        if t is None
        else {
            "name": t.name,
            "usd": t.usd,
            "per": t.per,
            "min_months": t.min_months,
            "horizon_months": t.horizon_months,
            "priced_months": t.priced_months,
            "usd_per_worker_day": t.usd_per_day,
            "committed_usd": t.committed_usd,
            "on_demand_usd": t.on_demand_usd,
            "saving_usd": t.saving_usd,
            "break_even_utilization": t.break_even_utilization,
        },
    }
