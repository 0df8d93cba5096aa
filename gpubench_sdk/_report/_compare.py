"""The report's four comparisons: the reference report's questions, every target side by side.

Each question pools a target's requests over every run of the report (a campaign's slots are
runs of the same targets) and answers with one verdict row in ``tables["comparison"]``: the
best target, the runner-up, the difference and whether it is significant, from
``metrics.compare`` (bootstrap CI of the median difference, Mann-Whitney U):

* ``cold_start``: the median cold start (latency - inference time, ``metrics.cold_starts_of``).
* ``variability``: the range of the per-day median cold start (latency where no cold start was
  measured), as the reference report drew it; significance compares how far each target's
  values fall from its own median (a rank test of spread).
* ``burst``: latency of the burst scenarios' successful requests (median and p95).
* ``ttft`` (streaming targets only): time to first token; the charts show ITL too.
* ``cost_per_day``: the reference report's daily bill (``cost.scenario_bill``) at the report's
  traffic, from each priced target's measured median inference time and cold start; its range
  comes from the 95% CIs of those medians, and a difference counts as significant when the
  ranges do not overlap.

The points each chart draws go to ``series["compare_*"]``.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from .. import metrics
from .._store._store import RunInfo, Store
from ._read import Report, Row, clean, read_columns, succeeded
from ._summary import usd

if TYPE_CHECKING:
    from ..cost import BillingModel, ScenarioBill

Floats = npt.NDArray[np.float64]
_BURST_KINDS = ("burst",)
COLD_PHASES = ("scheduling", "boot", "execution", "transfer")


@dataclass(frozen=True, slots=True)
class DailyTraffic:
    """The daily traffic the cost comparison prices: the reference report's scenario unless
    given (1,000 requests a day, a 60 s scale-down delay reached 100 times a day)."""

    requests_per_day: int = 1000
    scale_down_s: float = 60.0
    scale_down_events: int = 100


@dataclass
class _Pool:
    """One target's samples over every run of the report."""

    target: str
    cold_ms: list[Floats] = field(default_factory=list)
    phases: dict[str, list[Floats]] = field(default_factory=dict)
    warm_inference_ms: list[Floats] = field(default_factory=list)
    burst_ms: list[Floats] = field(default_factory=list)
    plan: dict[str, Any] | None = None

    def all(self, name: str) -> Floats:
        parts: list[Floats] = getattr(self, name)
        joined = np.concatenate(parts) if parts else np.zeros(0)
        return np.sort(joined[~np.isnan(joined)])


def _pools(store: Store, infos: Sequence[RunInfo]) -> list[_Pool]:
    pools: dict[str, _Pool] = {}
    for info in infos:
        plans = {p.get("name"): p for p in info.config.get("targets", []) if isinstance(p, dict)}
        for t in info.targets:
            pool = pools.setdefault(t.name, _Pool(t.name))
            if pool.plan is None:
                pool.plan = plans.get(t.name)
            cols = read_columns(store, info.id, t.name)
            if not cols["outcome"].size:
                continue
            cs = metrics.cold_starts_of(cols)
            pool.cold_ms.append(cs.cold_start_ms)
            for phase in COLD_PHASES:
                pool.phases.setdefault(phase, []).append(getattr(cs, f"{phase}_ms"))
            ok = succeeded(cols)
            warm = ok & (np.asarray(cols["cold"]) != 1)
            execution = np.asarray(cols["execution_ms"], dtype=float)[warm]
            latency = np.asarray(cols["latency_ms"], dtype=float)[warm]
            # the server's execution time where it reports one, else the warm latency
            pool.warm_inference_ms.append(np.where(np.isnan(execution), latency, execution))
            for sidx, scenario in enumerate(info.scenarios):
                if scenario.kind in _BURST_KINDS:
                    sc = read_columns(store, info.id, t.name, sidx)
                    pool.burst_ms.append(np.asarray(sc["latency_ms"], float)[succeeded(sc)])
    return list(pools.values())


def duration(ms: float) -> str:
    """A duration for a sentence: "850 ms", "1.22 s", "1 min 5 s"."""
    if not math.isfinite(ms):
        return "-"
    if abs(ms) < 1000:
        return f"{ms:.3g} ms" if abs(ms) >= 1 else f"{ms:.2g} ms"
    if abs(ms) < 60_000:
        return f"{ms / 1000:.3g} s"
    return f"{int(ms // 60_000)} min {ms % 60_000 / 1000:.0f} s"


def _share(part: float, whole: float) -> str:
    """ " (38%)": ``part`` as a share of ``whole``, or nothing when that is undefined."""
    return f" ({part / whole:.0%})" if whole > 0 and math.isfinite(part / whole) else ""


def _ranked(samples: dict[str, Floats]) -> list[tuple[str, Floats]]:
    """Targets with data, lowest median first."""
    have = [(n, v) for n, v in samples.items() if v.size]
    return sorted(have, key=lambda nv: metrics.percentile(nv[1], 0.5))


def _significant(c: metrics.Comparison) -> bool:
    """The median difference's CI excludes 0 and the rank test agrees (with a handful of
    values the bootstrap CI alone is overconfident)."""
    p = c.rank_test.p_value
    return c.p50.significant and math.isfinite(p) and p < 1 - c.confidence


def _significance(c: metrics.Comparison) -> str:
    lo, hi = c.p50.diff_ci_ms
    p = c.rank_test.p_value
    n = f"n = {c.a_count} and {c.b_count}"
    if math.isnan(lo) or not math.isfinite(p):
        return f"too few values to tell ({n})"
    ci = f"95% CI of the difference {duration(lo)} to {duration(hi)}"
    test = f"Mann-Whitney p = {p:.2g}"
    if _significant(c):
        return f"significant ({ci}; {test}; {n})"
    if c.p50.significant:
        return f"not clearly significant (the {ci} excludes 0 but {test}; {n})"
    return f"not significant ({ci}; {test}; {n})"


def _latency_question(
    report: Report, question: str, what: str, samples: dict[str, Floats], extra: str = ""
) -> None:
    ranked = _ranked(samples)
    if len(ranked) < 2:
        return
    (best, a), (second, b) = ranked[0], ranked[1]
    c = metrics.compare(a, b, a_name=best, b_name=second)
    if c.p50.diff_ms == 0:
        lead = f"{best} and {second} have the same median {what}, {duration(c.p50.a_ms)}"
    else:
        lead = (
            f"{best} has the lowest {what}: median {duration(c.p50.a_ms)} against "
            f"{duration(c.p50.b_ms)} for {second}, {duration(c.p50.diff_ms)} less"
            f"{_share(c.p50.diff_ms, c.p50.b_ms)}"
        )
    verdict = f"{lead}; {_significance(c)}.{extra}"
    report.table("comparison").append(
        clean(
            {
                "question": question,
                "best": best,
                "runner_up": second,
                "best_median_ms": c.p50.a_ms,
                "runner_up_median_ms": c.p50.b_ms,
                "difference_ms": c.p50.diff_ms,
                "difference_ci_low_ms": c.p50.diff_ci_ms[0],
                "difference_ci_high_ms": c.p50.diff_ci_ms[1],
                "p_value": c.rank_test.p_value,
                "significant": _significant(c),
                "verdict": verdict,
            }
        )
    )


def _cold_start(report: Report, pools: list[_Pool]) -> None:
    samples = {p.target: p.all("cold_ms") for p in pools}
    for p in pools:
        cold = samples[p.target]
        if not cold.size:
            continue
        row: Row = {"target": p.target, "count": cold.size}
        row["median_ms"] = metrics.percentile(cold, 0.5)
        for phase, parts in p.phases.items():  # means add up to the mean service time
            values = np.concatenate(parts)
            values = values[~np.isnan(values)]  # a provider that reports no phase: undefined
            row[f"{phase}_mean_ms"] = float(values.mean()) if values.size else math.nan
        report.series.setdefault("compare_cold_start", []).append(clean(row))
    _latency_question(report, "cold_start", "cold start", samples)


def _variability(report: Report, pools: list[_Pool]) -> None:
    daily = report.tables.get("daily", [])
    figure = "cold_start" if any(d["figure"] == "cold_start" for d in daily) else "latency"
    days = [d for d in daily if d["figure"] == figure and d["median_ms"] is not None]
    ranges = {r["target"]: r for r in report.tables.get("variability", []) if r["figure"] == figure}
    for d in days:
        report.series.setdefault("compare_daily", []).append(
            {
                k: d[k]
                for k in ("target", "day", "median_ms", "median_ci_low_ms", "median_ci_high_ms")
            }
            | {"figure": figure}
        )
    if len(ranges) < 2:
        return
    order = sorted(ranges.values(), key=lambda r: r["range_ms"])
    best, second = order[0], order[1]
    # spread of each target's values around its own median: a rank test of the difference
    name = "cold_ms" if figure == "cold_start" else "burst_ms"
    pool = {p.target: p.all(name) for p in pools}
    a, b = pool.get(best["target"], np.zeros(0)), pool.get(second["target"], np.zeros(0))
    dev_a = np.abs(a - metrics.percentile(a, 0.5)) if a.size else a
    dev_b = np.abs(b - metrics.percentile(b, 0.5)) if b.size else b
    c = metrics.compare(dev_a, dev_b, a_name=best["target"], b_name=second["target"])
    what = "cold start" if figure == "cold_start" else "latency"
    changed = [f"{r['target']} on {r['changed_days']}" for r in order if r["changed_days"]]
    drift = f" Days that differ from the earlier ones: {'; '.join(changed)}." if changed else ""
    p = c.rank_test.p_value
    spread = (
        f"{'significantly' if p < 0.05 else 'not significantly'} less spread around its median "
        f"(Mann-Whitney p = {p:.2g})"
        if math.isfinite(p)
        else "too few values to test the spread"
    )
    verdict = (
        f"{best['target']} is the steadiest across {best['days']} days: its daily median {what} "
        f"spans {duration(best['range_ms'])} against {duration(second['range_ms'])} for "
        f"{second['target']}, {duration(second['range_ms'] - best['range_ms'])} less; "
        f"{spread}.{drift}"
    )
    report.table("comparison").append(
        clean(
            {
                "question": "variability",
                "best": best["target"],
                "runner_up": second["target"],
                "best_range_ms": best["range_ms"],
                "runner_up_range_ms": second["range_ms"],
                "difference_ms": second["range_ms"] - best["range_ms"],
                "p_value": p,
                "significant": bool(math.isfinite(p) and p < 0.05),
                "verdict": verdict,
            }
        )
    )


def _box(target: str, lat: Floats) -> Row:
    """Tukey box of sorted ``lat``: quartiles, whiskers within 1.5 IQR, up to 200 beyond."""
    q1, med, q3 = (metrics.percentile(lat, q) for q in (0.25, 0.5, 0.75))
    lo, hi = q1 - 1.5 * (q3 - q1), q3 + 1.5 * (q3 - q1)
    inside = lat[(lat >= lo) & (lat <= hi)]
    outside = lat[(lat < lo) | (lat > hi)]
    keep = np.unique(np.linspace(0, outside.size - 1, 200).round().astype(int))
    return clean(
        {
            "target": target,
            "count": lat.size,
            "whisker_low_ms": float(inside.min()),
            "q1_ms": q1,
            "median_ms": med,
            "q3_ms": q3,
            "whisker_high_ms": float(inside.max()),
            "p95_ms": metrics.percentile(lat, 0.95),
            "outliers_ms": [float(v) for v in (outside[keep] if outside.size else [])],
        }
    )


def _burst(report: Report, pools: list[_Pool]) -> None:
    samples = {p.target: p.all("burst_ms") for p in pools}
    for name, lat in samples.items():
        if lat.size:
            report.series.setdefault("compare_burst", []).append(_box(name, lat))
    ranked = _ranked(samples)
    if len(ranked) >= 2:
        c = metrics.compare(ranked[0][1], ranked[1][1])
        p95 = f" At p95: {duration(c.p95.a_ms)} against {duration(c.p95.b_ms)}."
        _latency_question(report, "burst", "latency under a burst", samples, p95)


def _streams(report: Report) -> None:
    """TTFT and ITL of every streaming target; the verdict is on TTFT (what a user waits)."""
    for figure in ("ttft_ms", "itl_ms"):
        samples = {}
        for target, parts in report.pooled.get(figure, {}).items():
            values = np.concatenate(parts) if parts else np.zeros(0)
            samples[target] = np.sort(values[~np.isnan(values)])
            if samples[target].size:
                report.series.setdefault(f"compare_{figure[:-3]}", []).append(
                    _box(target, samples[target])
                )
        if figure == "ttft_ms":
            _latency_question(report, "ttft", "time to first token", samples)


def _daily_bill(
    target: str,
    billing: BillingModel,
    rate: float,
    traffic: DailyTraffic,
    inference_ms: float,
    cold_ms: float,
) -> ScenarioBill:
    from ..cost import scenario_bill

    return scenario_bill(
        label=target,
        billing=billing,
        rate_usd_per_s=rate,
        requests_per_day=traffic.requests_per_day,
        inference_s=inference_ms / 1000,
        scale_down_s=traffic.scale_down_s,
        scale_down_events=traffic.scale_down_events,
        cold_start_s=(cold_ms if math.isfinite(cold_ms) else 0.0) / 1000,
    )


def _cost(report: Report, pools: list[_Pool], traffic: DailyTraffic) -> None:
    from ..cost import load_catalog
    from ..cost._priced import target_rate
    from ..cost._tables import TargetSpec

    catalog = load_catalog()
    bills: list[Row] = []
    for p in pools:
        plan = p.plan or {}
        if not (plan.get("price_sku") or plan.get("price_per_s_usd") is not None):
            continue
        spec = TargetSpec(
            p.target,
            plan.get("billing") or plan.get("provider", ""),
            plan.get("price_sku"),
            0.0,
            plan.get("price_per_s_usd"),
        )
        billing, rate = catalog.billing_model(spec.provider), target_rate(catalog, spec)
        inference, cold = p.all("warm_inference_ms"), p.all("cold_ms")
        if not inference.size:
            continue

        ci = [metrics.quantile_ci(v, 0.5) if v.size else (math.nan, math.nan)
              for v in (inference, cold)]  # fmt: skip
        bill = functools.partial(_daily_bill, p.target, billing, rate, traffic)
        mid = bill(metrics.percentile(inference, 0.5), metrics.percentile(cold, 0.5))
        low, high = bill(ci[0][0], ci[1][0]), bill(ci[0][1], ci[1][1])
        parts = {
            "inference": mid.inference_s if billing.bills("execution") else 0.0,
            "idle": mid.idle_s if billing.bills("idle") else 0.0,
            "cold start": mid.cold_start_s if billing.bills("cold_boot") else 0.0,
        }
        row: Row = {"target": p.target, "usd_per_day": mid.total_usd}
        row |= {"usd_per_day_low": low.total_usd, "usd_per_day_high": high.total_usd}
        row |= {f"{k.replace(' ', '_')}_usd": v * rate for k, v in parts.items()}
        row["rounding_usd"] = max(0.0, (mid.billed_s - sum(parts.values())) * rate)
        row["fees_usd"] = mid.fees_usd
        row |= {"rate_usd_per_s": rate, "cold_start_measured": bool(cold.size)}
        bills.append(clean(row))
    report.series["compare_cost"] = bills
    if len(bills) < 2:
        return
    order = sorted(bills, key=lambda r: r["usd_per_day"])
    best, second = order[0], order[1]
    diff = second["usd_per_day"] - best["usd_per_day"]
    apart = best["usd_per_day_high"] < second["usd_per_day_low"]
    verdict = (
        f"{best['target']} costs least at {traffic.requests_per_day:,} requests a day: "
        f"{usd(best['usd_per_day'])} a day against {usd(second['usd_per_day'])} for "
        f"{second['target']}, {usd(diff)} less{_share(diff, second['usd_per_day'])}; "
        + (
            "significant (the bills' ranges from the 95% CIs of the measured medians do not "
            "overlap)."
            if apart
            else "not significant (the bills' ranges from the 95% CIs of the measured medians "
            "overlap)."
        )
    )
    report.table("comparison").append(
        {
            "question": "cost_per_day",
            "best": best["target"],
            "runner_up": second["target"],
            "best_usd_per_day": best["usd_per_day"],
            "runner_up_usd_per_day": second["usd_per_day"],
            "difference_usd": diff,
            "significant": apart,
            "verdict": verdict,
        }
    )


def add_comparisons(
    report: Report, store: Store, infos: Sequence[RunInfo], traffic: DailyTraffic
) -> None:
    """Fill ``tables["comparison"]`` and ``series["compare_*"]`` (after the per-run sections:
    the variability question reads their ``daily`` and ``variability`` tables)."""
    pools = _pools(store, infos)
    _cold_start(report, pools)
    _variability(report, pools)
    _burst(report, pools)
    _streams(report)
    _cost(report, pools, traffic)
