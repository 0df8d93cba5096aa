"""What a report holds, gathered from stored runs: tables of figures plus the points charts draw.

Every figure comes from ``gpubench_sdk.metrics`` (and the cost module), never recomputed here:
the summary rows are ``_summary.summarize``'s, box-plot quartiles are ``metrics.percentile``,
cold-start phases are ``metrics.cold_starts``' decomposition, days are
``metrics.daily_variability``, bursts are ``metrics.burst_analysis`` and streaming runs go through
``metrics.run_stream_metrics``. Only chart geometry (which points to draw) is decided here.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import os
import warnings
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from .. import metrics
from .._base._secrets import redact, remember
from .._base._types import Phase
from .._store._store import Columns, RunInfo, Store
from ..cost import GroupBill, RunCost
from ..metrics._modes import MIN_SAMPLES as MIN_MODE_SAMPLES
from ._compare import DailyTraffic, add_comparisons
from ._read import PHASES, READ, Report, Row, clean, read_columns, succeeded, thin
from ._summary import summarize

if TYPE_CHECKING:  # the cost module is imported where a run has prices, not with the report
    from ..cost import GroupBill, RunCost

MAX_OUTLIERS = 200  # box plot dots beyond the whiskers, per box
_BURST_KINDS = ("burst",)  # scenarios whose latency against request index is worth a chart


def _iso(wall_ns: int | None) -> str | None:
    if wall_ns is None:
        return None
    return dt.datetime.fromtimestamp(wall_ns / 1e9, dt.UTC).isoformat(timespec="seconds")


def _env_names(value: Any) -> list[str]:
    """Environment variable names a config points at (``api_key_env`` and any ``*_env``)."""
    if isinstance(value, dict):
        found = [v for k, v in value.items() if str(k).endswith("_env") and isinstance(v, str)]
        return found + [n for v in value.values() for n in _env_names(v)]
    if isinstance(value, list | tuple):
        return [n for v in value for n in _env_names(v)]
    return []


def _remember_env_secrets(config: Any) -> None:
    """Remember the values of the variables the run read its secrets from, if set here too:
    the stored config is redacted by name, but a key the user also pasted under an innocent
    name (a custom header, a URL) would otherwise reach the page."""
    for name in _env_names(config):
        value = os.environ.get(name)
        if value:
            remember(value)


def _scrub(value: Any) -> Any:
    """The stored config is already redacted by name; redact remembered secret values too."""
    if isinstance(value, dict):
        return {redact(str(k)): _scrub(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_scrub(v) for v in value]
    if isinstance(value, str):
        return redact(value)
    return value


def build_report(
    store: Store,
    run_refs: Sequence[int | str],
    *,
    title: str | None = None,
    traffic: DailyTraffic | None = None,
    layout: str = "comparison",
    advice: Mapping[str, Any] | None = None,
) -> Report:
    """Gather the content of a report over ``run_refs`` (ids, uuid prefixes, ``"latest"``):
    the per-run sections, then the comparisons of every target over all the runs (the cost
    one priced at ``traffic``, by default the reference report's daily scenario). ``advice``:
    ``Advice.to_json()`` (or ``gpubench advise --json``'s file) adds advise's page."""
    from ._shapes import collect_shapes  # it builds on this module's rows

    by_id: dict[int, RunInfo] = {}
    for ref in run_refs:
        info = store.run(ref)
        by_id.setdefault(info.id, info)
    infos = list(by_id.values())
    if not infos:
        raise ValueError("a report needs at least one run")
    names = ", ".join(f"{i.id} {i.name!r}" for i in infos)
    report = Report(
        title=title or f"gpubench report: run{'s' if len(infos) > 1 else ''} {names}",
        generated_utc=dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        traffic=dataclasses.asdict(traffic or DailyTraffic()),
        layout=layout,
    )
    for info in infos:
        _remember_env_secrets(info.config)
    READ[store] = {}
    try:
        for info in infos:
            report.runs.append(_run_row(info))
            for collect in PER_RUN:
                collect(report, store, info)
            collect_shapes(report, store, info)  # stages, sweep, max_rate: _shapes.py
        _variability(report, store, infos)
        add_comparisons(report, store, infos, DailyTraffic(**report.traffic))
    finally:
        READ.pop(store, None)
    if advice is not None:
        from ._advise import attach_advice

        attach_advice(report, advice)
    return report


def _run_row(info: RunInfo) -> Row:
    return {
        "run": info.id,
        "uuid": info.uuid,
        "name": info.name,
        "status": info.status,
        "error": redact(info.error) if info.error else None,
        "started_utc": _iso(info.started_wall_ns),
        "ended_utc": _iso(info.ended_wall_ns),
        "samples": info.samples,
        "host": info.host,
        "gpubench_version": info.gpubench_version,
        "targets": [{"name": t.name, "provider": t.provider} for t in info.targets],
        "scenarios": [s.key(i) for i, s in enumerate(info.scenarios)],
        "config": _scrub(dict(info.config)),  # after _remember_env_secrets (build_report)
    }


def _summary(report: Report, store: Store, info: RunInfo) -> None:
    for row in summarize(store, info):
        data = row.as_dict()
        errors = data.pop("errors")
        lo, hi = data.pop("p50_ci_ms")
        lo95, hi95 = data.pop("p95_ci_ms")
        data |= {"p50_ci_low_ms": lo, "p50_ci_high_ms": hi}
        data |= {"p95_ci_low_ms": lo95, "p95_ci_high_ms": hi95}
        data["errors"] = ", ".join(f"{k}={v}" for k, v in sorted(errors.items())) or ""
        report.table("summary").append(clean({"run": info.id} | data))


def _each(store: Store, info: RunInfo) -> list[tuple[str, int, str, Columns]]:
    """(target, scenario index, scenario label, columns) for every pair with requests."""
    found = []
    for sidx, scenario in enumerate(info.scenarios):
        for t in info.targets:
            cols = read_columns(store, info.id, t.name, sidx)
            if cols["outcome"].size:
                found.append((t.name, sidx, scenario.key(sidx), cols))
    return found


def _boxes(report: Report, store: Store, info: RunInfo) -> None:
    """Tukey box plots: quartiles, whiskers at the furthest sample within 1.5 IQR, dots beyond."""
    for target, _, label, cols in _each(store, info):
        lat = np.sort(cols["latency_ms"][succeeded(cols)])
        if not lat.size:
            continue
        q1, med, q3 = (metrics.percentile(lat, q) for q in (0.25, 0.5, 0.75))
        fence_lo, fence_hi = q1 - 1.5 * (q3 - q1), q3 + 1.5 * (q3 - q1)
        inside = lat[(lat >= fence_lo) & (lat <= fence_hi)]
        outside = lat[(lat < fence_lo) | (lat > fence_hi)]
        keep = np.unique(np.linspace(0, outside.size - 1, MAX_OUTLIERS).round().astype(int))
        outliers = outside[keep] if outside.size > MAX_OUTLIERS else outside
        key = {"run": info.id, "target": target, "scenario": label}
        report.table("latency_box").append(
            clean(
                key
                | {
                    "count": lat.size,
                    "whisker_low_ms": inside.min() if inside.size else med,
                    "q1_ms": q1,
                    "median_ms": med,
                    "q3_ms": q3,
                    "whisker_high_ms": inside.max() if inside.size else med,
                    "outliers": outside.size,
                }
            )
        )
        report.series.setdefault("latency_outliers", []).append(
            key | {"latency_ms": [float(v) for v in outliers]}
        )


def _cold_starts(report: Report, store: Store, info: RunInfo) -> None:
    """Per target, cold requests: the reference report's cold start and the mean of each phase
    (means add up to the mean service time, which medians would not)."""
    for t in info.targets:
        cols = read_columns(store, info.id, t.name)
        if not cols["outcome"].size:
            continue
        cs = metrics.cold_starts_of(cols)
        if not cs.index.size:
            continue
        row: Row = {
            "run": info.id,
            "target": t.name,
            "cold_requests": cs.index.size,
            "confirmed": int(cs.confirmed.sum()),
            "cold_start_p50_ms": cs.summary.p50_ms,
            "cold_start_p95_ms": cs.summary.p95_ms,
            "cold_start_mean_ms": cs.summary.mean_ms,
            "inference_inferred": cs.inferred,
            "service_mean_ms": metrics.summarize_samples(cs.service_ms).mean_ms,
        }
        for phase in PHASES:
            row[f"{phase[:-3]}_mean_ms"] = metrics.summarize_samples(getattr(cs, phase)).mean_ms
        # the modes (a median of a mixture describes no real request), and the requests a
        # false "ready" slowed, which the run counted among these cold starts
        # (fitted only where there are enough: a fit's bootstrap is most of the work)
        modes = (
            metrics.cold_start_modes(cs.cold_start_ms)
            if cs.index.size >= MIN_MODE_SAMPLES
            else None
        )
        row["modes"] = None if modes is None else modes.text
        row["false_ready"] = int(store.false_ready_marks(info.id, target=t.name)["marked"].sum())
        report.table("cold_start").append(clean(row))
        if modes is not None:
            report.series.setdefault("cold_start_modes", []).append(
                {
                    "run": info.id,
                    "target": t.name,
                    "cold_start_ms": [round(float(v), 3) for v in cs.cold_start_ms],
                    "modes": [dataclasses.asdict(m) for m in modes.modes],
                }
            )


def _variability(report: Report, store: Store, infos: list[RunInfo]) -> None:
    """Per-day medians of latency and cold start for each target, where the runs span days."""
    targets = dict.fromkeys(t.name for i in infos for t in i.targets)
    for target in targets:
        walls, lat, cold_walls, cold = [], [], [], []
        for info in infos:
            if target not in [t.name for t in info.targets]:
                continue
            cols = read_columns(store, info.id, target)
            ok = succeeded(cols)
            walls.append(cols["wall_start_ns"][ok])
            lat.append(cols["latency_ms"][ok])
            cs = metrics.cold_starts_of(cols)
            cold_walls.append(cols["wall_start_ns"][cs.index])
            cold.append(cs.cold_start_ms)
        for figure, w, v in (
            ("latency", walls, lat),
            ("cold_start", cold_walls, cold),
        ):
            wall = np.concatenate(w) if w else np.zeros(0, np.int64)
            values = np.concatenate(v) if v else np.zeros(0)
            if not values.size:
                continue
            var = metrics.daily_variability(wall, values)
            if len(var.days) < 2:
                continue
            for d in var.days:
                lo, hi = d.median_ci_ms
                report.table("daily").append(
                    clean(
                        {
                            "target": target,
                            "figure": figure,
                            "day": d.day,
                            "count": d.count,
                            "median_ms": d.median_ms,
                            "median_ci_low_ms": lo,
                            "median_ci_high_ms": hi,
                            "changed": d.changed,
                            "p_adjusted": d.p_adjusted,
                        }
                    )
                )
            report.table("variability").append(
                clean(
                    {
                        "target": target,
                        "figure": figure,
                        "days": len(var.days),
                        "range_ms": var.range_ms,
                        "cv": var.cv,
                        "changed_days": ", ".join(var.changed_days),
                    }
                )
            )


def _bursts(report: Report, store: Store, info: RunInfo) -> None:
    for target, sidx, label, cols in _each(store, info):
        if info.scenarios[sidx].kind not in _BURST_KINDS:
            continue
        ba = metrics.burst_analysis(  # what metrics.run_burst does, on columns already read
            start_ns=cols["start_ns"],
            end_ns=cols["end_ns"],
            latency_ms=cols["latency_ms"],
            outcome=cols["outcome"],
        )
        if not ba.ok:
            continue
        key = {"run": info.id, "target": target, "scenario": label}
        report.table("burst").append(
            clean(
                key
                | {
                    "requests": ba.requests,
                    "ok": ba.ok,
                    "slope_ms_per_request": ba.by_index.slope,
                    "intercept_ms": ba.by_index.intercept_ms,
                    "pearson_r": ba.by_index.pearson_r,
                    "spearman_rho": ba.by_index.spearman_rho,
                    "baseline_ms": ba.baseline_ms,
                    "time_to_baseline_s": ba.time_to_baseline_s,
                }
            )
        )
        # the same order burst_analysis uses: requests by send time, index over all of them
        order = np.argsort(cols["start_ns"], kind="stable")
        ok = succeeded(cols)[order]
        index = np.flatnonzero(ok)
        latency = cols["latency_ms"][order][ok]
        keep = thin(index.size)
        report.series.setdefault("burst_points", []).append(
            key
            | {
                "index": [int(i) for i in index[keep]],
                "latency_ms": [float(v) for v in latency[keep]],
            }
        )


def _streaming(report: Report, store: Store, info: RunInfo) -> None:
    """TTFT and ITL of streamed requests (store schema v2 keeps per-token arrival times)."""
    for target, sidx, label, _ in _each(store, info):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            sm = metrics.run_stream_metrics(store, info, target=target, scenario=sidx)
        ttft = metrics.summarize_samples(sm.ttft_ms)
        if not ttft.count:
            continue  # nothing streamed
        report.pool("ttft_ms", target, sm.ttft_ms)
        report.pool("itl_ms", target, sm.itl_ms)
        itl = metrics.summarize_samples(sm.itl_ms)
        tpot = metrics.summarize_samples(sm.tpot_ms)
        key = {"run": info.id, "target": target, "scenario": label}
        report.table("streaming").append(
            clean(
                key
                | {
                    "requests": ttft.count,
                    "ttft_p50_ms": ttft.p50_ms,
                    "ttft_p95_ms": ttft.p95_ms,
                    "itl_p50_ms": itl.p50_ms,
                    "itl_p95_ms": itl.p95_ms,
                    "tpot_p50_ms": tpot.p50_ms,
                    "output_tokens_per_s": sm.total_output_tokens_per_s,
                }
            )
        )
        for name, values in (("ttft_ms", sm.ttft_ms), ("itl_ms", sm.itl_ms)):
            finite = np.sort(values[~np.isnan(values)])
            report.series.setdefault("stream_" + name, []).append(
                key | {name: [float(v) for v in finite[thin(finite.size)]]}
            )


def _latency_groups(report: Report, store: Store, info: RunInfo) -> None:
    """Latency by what each request asked for, where the run's workload makes it differ
    (``metrics.groupings_of``: prompt length, a conversation's turn, the shared prefix, an
    embeddings batch's size)."""
    workload = info.config.get("workload") or {}
    groupings = metrics.groupings_of(workload, (s.kind for s in info.scenarios))
    if not groupings:
        return
    invs = store.invocations(info.id)
    for sidx, scenario in enumerate(info.scenarios):
        for t in info.targets:
            mine = [i for i in invs if i.scenario == sidx and i.target == t.name]
            key = {"run": info.id, "target": t.name, "scenario": scenario.key(sidx)}
            for grouping in groupings:
                groups = metrics.GROUPINGS[grouping](mine)
                if len(groups) < 2:  # one group is the summary's row again
                    continue
                for g in groups:
                    figures = dataclasses.asdict(g)
                    del figures["key"]
                    row = key | {"grouping": grouping, "group": figures.pop("label")} | figures
                    report.table("latency_groups").append(clean(row))


def _costs(report: Report, store: Store, info: RunInfo) -> None:
    """The estimated bill of each target whose plan names a price (the cost module's replay)."""
    from ..cost import load_catalog
    from ..cost._priced import plan_has_prices, priced_targets

    if not plan_has_prices(info):
        return

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        costs = priced_targets(store, info, load_catalog(), {}, require_price=False)
    report.notes += [f"cost: {w.message}" for w in caught]
    for c in costs:
        u = c.units
        report.table("cost").append(
            clean(
                {
                    "run": info.id,
                    "target": c.target,
                    "requests": c.requests,
                    "workers": c.workers,
                    "billed_s": c.bill.billed_s,
                    "compute_usd": c.bill.cost_usd,
                    "fees_usd": c.fees_usd,
                    "total_usd": c.total_usd,
                    # every unit the cost module prices (per request, 1k requests, 1k/1M
                    # input and output tokens, image, audio minute); None where not counted
                    **{k: v for k, v in dataclasses.asdict(u).items() if k != "total_usd"},
                }
            )
        )
    for target, grouping, bill in bill_groups(store, info, costs):
        report.table("cost_groups").append(
            clean(
                {
                    "run": info.id,
                    "target": target,
                    "grouping": grouping,
                    "group": bill.group,
                    "requests": bill.requests,
                    "total_usd": bill.cost_usd,
                    **{k: v for k, v in dataclasses.asdict(bill.units).items() if k != "total_usd"},
                }
            )
        )


def bill_groups(
    store: Store, info: RunInfo, costs: Sequence[RunCost]
) -> list[tuple[str, str, GroupBill]]:
    """Each priced target's bill shared among the groups a run's workload makes worth showing
    (``metrics.groupings_of``: image size, audio duration, batch size...), by the worker time
    each group took (``cost.split_bill``): ``(target, grouping, bill)``."""
    from ..cost import split_bill
    from ..cost._priced import workload_units

    workload = info.config.get("workload") or {}
    groupings = metrics.groupings_of(workload, (s.kind for s in info.scenarios))
    if not groupings or not costs:
        return []
    units = workload_units(info)
    rows = store.invocations(info.id)
    found = []
    for cost in costs:
        mine = [i for i in rows if i.target == cost.target and i.phase is Phase.MEASURE]
        for grouping in groupings:
            groups = metrics.members(mine, grouping)
            found += [(cost.target, grouping, b) for b in split_bill(cost, mine, groups, units)]
    return found


# What is gathered from each run, in order. A new kind of chart adds its collector here (it may
# read columns with ``read_columns``: each is read once per build) and its section to
# ``_html.LAYOUTS``.
PER_RUN: tuple[Callable[[Report, Store, RunInfo], None], ...] = (
    _summary,
    _boxes,
    _cold_starts,
    _bursts,
    _streaming,
    _latency_groups,
    _costs,
)
