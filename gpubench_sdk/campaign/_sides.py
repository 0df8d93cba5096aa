"""The two sides of ``gpubench compare``: a run or a campaign, read into gate samples.

A reference is resolved in this order: ``campaign:NAME`` (a campaign), ``run:REF`` (a run),
then a bare word: a campaign of that name if the store has one, else a run (id, uuid prefix,
``latest``). A campaign side pools the latest attempt of each of its slots.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .._base._errors import ConfigError, StoreError
from .._base._types import Outcome
from .._store._store import Store
from ..metrics import cold_starts_of
from ._db import CampaignDB
from ._gate import GateReport, Sample, Threshold, evaluate


@dataclass(frozen=True, slots=True)
class Side:
    """Runs making up one side, and which target each run calls what."""

    label: str
    runs: tuple[int, ...]
    targets: tuple[str, ...]  # the target names the runs share


def resolve_side(store: Store, ref: str, option: str) -> Side:
    kind, _, rest = ref.partition(":")
    if kind not in ("campaign", "run") or not rest:
        kind, rest = "", ref
    campaigns: list[str] = []
    if kind != "run":
        with CampaignDB(store.path, readonly=True) as db:
            campaigns = db.names()
            if kind == "campaign" or rest in campaigns:
                if rest not in campaigns:
                    raise ConfigError(
                        option,
                        ref,
                        f"a campaign in {store.path} ({', '.join(campaigns) or 'none'})",
                    )
                campaign = db.get(rest)
                runs = tuple(dict.fromkeys(int(r[0]) for r in db.tags(campaign)))
                if not runs:
                    raise ConfigError(option, ref, "a campaign with at least one slot run")
                names = tuple(str(t.get("name")) for t in campaign.plan.get("targets", []))
                return Side(f"campaign {rest} ({len(runs)} runs)", runs, names)
    try:
        info = store.run(rest)
    except StoreError as exc:
        raise ConfigError(option, ref, f"a run or campaign in this store ({exc})") from None
    return Side(f"run {info.id} {info.name!r}", (info.id,), tuple(t.name for t in info.targets))


def pair_targets(base: Side, cand: Side, target: str | None) -> list[tuple[str, str]]:
    """(baseline target, candidate target) pairs: ``--target``, else the shared names, else
    the only target of each side."""
    if target is not None:
        for side, option in ((base, "--baseline"), (cand, "--candidate")):
            if target not in side.targets:
                raise ConfigError("--target", target, f"a target of {option} ({side.targets})")
        return [(target, target)]
    shared = [t for t in base.targets if t in cand.targets]
    if shared:
        return [(t, t) for t in shared]
    if len(base.targets) == 1 and len(cand.targets) == 1:
        return [(base.targets[0], cand.targets[0])]
    raise ConfigError(
        "--target",
        None,
        f"a target to compare: the sides share no target name ({base.targets} vs {cand.targets})",
    )


def read_sample(
    store: Store,
    runs: tuple[int, ...],
    target: str,
    scenario: int | None = None,
    *,
    with_cost: bool = True,
    bills: dict[int, dict[str, float]] | None = None,
) -> Sample:
    """The measured requests of ``target`` in ``runs`` (and ``scenario``), pooled. The bill (a
    replay of every request: the slow part) is read only ``with_cost``, each run's once into
    ``bills`` (run id -> target -> USD) when given."""
    bills = {} if bills is None else bills
    lat, ttft, cold = [], [], []
    requests = failed = ok = 0
    span_s = 0.0
    cost: float | None = None
    for run_id in runs:
        info = store.run(run_id)
        if target not in [t.name for t in info.targets]:
            continue
        if scenario is not None and scenario >= len(info.scenarios):
            raise ConfigError("--scenario", scenario, f"an index below {len(info.scenarios)}")
        cols = store.columns(run_id, target=target, scenario=scenario)
        good = cols["outcome"] == Outcome.OK.code
        lat.append(cols["latency_ms"][good])
        # TTFT: the first streamed token where the provider stored tokens, else the first byte
        tokens = store.token_times(run_id, target=target, scenario=scenario)
        first_ns = np.array([tk[0] if tk.size else -1 for tk in tokens], dtype=np.int64)
        streamed = first_ns >= 0
        first_ms = np.where(streamed, (first_ns - cols["scheduled_ns"]) / 1e6, cols["ttfb_ms"])
        t = first_ms[good]
        ttft.append(t[~np.isnan(t)])
        cold.append(cold_starts_of(cols).cold_start_ms)
        requests += int(good.size)
        ok += int(good.sum())
        failed += int((~good).sum())
        if good.size:
            span_s += (int(cols["end_ns"].max()) - int(cols["start_ns"].min())) / 1e9
        run_cost = None
        if with_cost:
            if run_id not in bills:
                bills[run_id] = _run_bills(store, run_id)
            run_cost = bills[run_id].get(target)
        if run_cost is not None:
            cost = (cost or 0.0) + run_cost
    return Sample(
        latency_ms=np.concatenate(lat) if lat else np.zeros(0),
        ttft_ms=np.concatenate(ttft) if ttft else np.zeros(0),
        cold_start_ms=np.concatenate(cold) if cold else np.zeros(0),
        requests=requests,
        failed=failed,
        ok_per_s=ok / span_s if span_s > 0 else math.nan,
        cost_usd=cost,
    )


def _run_bills(store: Store, run_id: int) -> dict[str, float]:
    """The estimated bill of each target a run's plan prices (``gpubench cost run``'s)."""
    info = store.run(run_id)
    plans = [t for t in info.config.get("targets", []) if isinstance(t, dict)]
    if not any(t.get("price_sku") or t.get("price_per_s_usd") is not None for t in plans):
        return {}
    from ..cost import load_catalog
    from ..cost._priced import priced_targets

    costs = priced_targets(store, info, load_catalog(), {}, require_price=False)
    return {c.target: c.total_usd for c in costs}


def regression_gate(
    store: Store,
    baseline: str,
    thresholds: list[Threshold],
    *,
    candidate: str = "latest",
    target: str | None = None,
    scenario: int | None = None,
    significant_only: bool = False,
) -> tuple[Side, Side, GateReport]:
    """Compare ``candidate`` (default the latest run) against ``baseline`` by ``thresholds``."""
    base = resolve_side(store, baseline, "--baseline")
    cand = resolve_side(store, candidate, "--candidate")
    if base.runs == cand.runs:
        raise ConfigError(
            "--candidate", candidate, f"other runs than the baseline's ({base.label})"
        )
    rows = []
    cost = any(th.metric == "cost_per_1k" for th in thresholds)
    bills: dict[int, dict[str, float]] = {}
    for bt, ct in pair_targets(base, cand, target):
        b = read_sample(store, base.runs, bt, scenario, with_cost=cost, bills=bills)
        c = read_sample(store, cand.runs, ct, scenario, with_cost=cost, bills=bills)
        name = bt if bt == ct else f"{bt} -> {ct}"
        rows += evaluate(name, b, c, thresholds, significant_only=significant_only)
    return base, cand, GateReport(tuple(rows))
