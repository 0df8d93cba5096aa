"""The tracker's documents gathered per target and per day, and the change detector run on them.

A target is a (provider, region, target name) triple: the same endpoint measured by several
campaigns (a campaign renamed, a plan changed) is one history. A day is the slot's local date.
With several slots a day, a day's cold-start median pools their cold starts, and its p95
latency is the median of the slots' p95s with a band from the lowest to the highest of their
CIs' ends (the per-request rows stay in the store, so the p95 cannot be pooled).

The change detector is ``metrics.daily_variability``, the one ``gpubench campaign show`` runs:
each day's cold starts against every earlier day's pooled, Mann-Whitney U, Holm-adjusted. The
site flags only a material change, a day's median ``MIN_CHANGE`` or more away from the earlier
days' (``campaign show`` lists every significant one): a public page's flag is news, and with
cold starts that barely vary, a few milliseconds on one day are significant. It runs on cold
starts only: they are in the documents one by one, the latencies only as quantiles.
"""

from __future__ import annotations

import datetime as dt
import math
import os
import re
import statistics
from collections.abc import Iterable
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from ...metrics import DayStats, daily_variability

_NS_PER_DAY = 86_400 * 10**9
_EPOCH = dt.date(1970, 1, 1)
MIN_CHANGE = 0.25  # the smallest flagged move of a day's median, relative to the earlier days'
EPISODE_GAP = 7  # measured days without a flag that end a change's run of flagged days
_PARALLEL_ABOVE = 50_000  # cold starts in all: below it, starting processes costs more


@dataclass
class Day:
    """One target on one day (every slot of that day pooled)."""

    date: str
    files: list[str] = field(default_factory=list)  # the documents, relative to DATA_DIR
    requests: int = 0
    ok: int = 0
    errors: dict[str, int] = field(default_factory=dict)
    cold_ms: list[float] = field(default_factory=list)
    p95: list[tuple[float, float, float]] = field(default_factory=list)  # per slot, with CI
    burst_p95: list[float] = field(default_factory=list)
    bill_usd: float | None = None
    billed_requests: int = 0
    usd_per_s: float | None = None
    cold: DayStats | None = None  # the detector's verdict, once run

    @property
    def error_rate(self) -> float:
        return (self.requests - self.ok) / self.requests if self.requests else math.nan

    @property
    def p95_ms(self) -> tuple[float, float, float]:
        """(median of the slots' p95, lowest CI end, highest CI end); NaN without data."""
        if not self.p95:
            return math.nan, math.nan, math.nan
        lows = [lo for _, lo, _ in self.p95 if math.isfinite(lo)]
        highs = [hi for _, _, hi in self.p95 if math.isfinite(hi)]
        return (
            statistics.median(v for v, _, _ in self.p95),
            min(lows) if lows else math.nan,
            max(highs) if highs else math.nan,
        )

    @property
    def burst_p95_ms(self) -> float:
        return statistics.median(self.burst_p95) if self.burst_p95 else math.nan

    def usd_per_request(self) -> float:
        if self.bill_usd is None or not self.billed_requests:
            return math.nan
        return self.bill_usd / self.billed_requests


@dataclass
class Target:
    provider: str
    region: str | None
    name: str
    slug: str = ""
    days: dict[str, Day] = field(default_factory=dict)
    meta: dict[str, Any] = field(default_factory=dict)  # the latest document's metadata
    versions: dict[str, list[str]] = field(default_factory=dict)  # gpubench version: days
    plugins: dict[str, list[str]] = field(default_factory=dict)  # plugin version: days
    campaigns: set[str] = field(default_factory=set)

    @property
    def label(self) -> str:
        where = f", {self.region}" if self.region else ""
        return f"{self.name} ({self.provider}{where})"

    def ordered(self) -> list[Day]:
        return [self.days[d] for d in sorted(self.days)]

    @property
    def changed(self) -> list[Day]:
        return [d for d in self.ordered() if d.cold is not None and d.cold.changed]

    def episodes(self) -> list[list[Day]]:
        """The flagged days as changes: runs of flagged days, a run going on across fewer than
        ``EPISODE_GAP`` unflagged measured days. After a lasting step every later day differs
        from the pooled days before it too, until the pool has taken in enough of the new
        level (then days are flagged on and off): one change, whose first day is when it
        happened."""
        runs: list[list[Day]] = []
        gap = EPISODE_GAP
        for d in self.ordered():
            if d.cold is not None and d.cold.changed:
                if gap < EPISODE_GAP:
                    runs[-1].append(d)
                else:
                    runs.append([d])
                gap = 0
            else:
                gap += 1
        return runs


@dataclass
class Campaign:
    """What the methodology page says of a campaign: its latest plan and where it ran."""

    name: str
    schedule: str = ""
    tz: str = "UTC"
    origin: str | None = None
    workload: Any = None
    scenarios: Any = None
    hashes: dict[str, list[str]] = field(default_factory=dict)  # plan hash: [first, last day]
    first: str = ""
    last: str = ""
    documents: int = 0


@dataclass
class Tracker:
    targets: list[Target]
    campaigns: list[Campaign]
    files_by_day: dict[str, list[str]]

    @property
    def dates(self) -> list[str]:
        return sorted(self.files_by_day)


def _f(value: Any) -> float:
    """A document's number (``null`` for NaN) as a float."""
    return float(value) if isinstance(value, int | float) else math.nan


def gather(documents: Iterable[tuple[Path, dict[str, Any]]]) -> Tracker:
    """Every document folded into per-target days and per-campaign facts, then the change
    detector run on each target's cold starts."""
    targets: dict[tuple[str, str | None, str], Target] = {}
    campaigns: dict[str, Campaign] = {}
    files_by_day: dict[str, list[str]] = {}
    for path, doc in documents:
        rel = path.as_posix()
        date = doc["local_date"]
        files_by_day.setdefault(date, []).append(rel)
        _campaign(campaigns, doc, date)
        for t in doc["targets"]:
            key = (str(t.get("provider")), t.get("region"), str(t["name"]))
            target = targets.setdefault(key, Target(*key))
            target.campaigns.add(doc["campaign"])
            _fold(target, t, doc, date, rel)
    ordered = sorted(targets.values(), key=lambda t: (t.provider, t.region or "", t.name))
    used: set[str] = set()
    for target in ordered:
        target.slug = _slug(f"{target.provider}-{target.region or 'any'}-{target.name}", used)
    _detect(ordered)
    return Tracker(ordered, sorted(campaigns.values(), key=lambda c: c.name), files_by_day)


def _campaign(campaigns: dict[str, Campaign], doc: dict[str, Any], date: str) -> None:
    c = campaigns.setdefault(doc["campaign"], Campaign(doc["campaign"], first=date))
    c.documents += 1
    c.first, c.last = min(c.first, date), max(c.last, date)
    if date >= c.last:  # the latest document describes the campaign as it runs now
        c.schedule, c.tz, c.origin = (
            doc.get("schedule", ""),
            doc.get("tz", "UTC"),
            doc.get("origin"),
        )
        plan = doc.get("plan") or {}
        c.workload, c.scenarios = plan.get("workload"), plan.get("scenarios")
    plan_hash = str((doc.get("plan") or {}).get("hash"))
    span = c.hashes.setdefault(plan_hash, [date, date])
    span[0], span[1] = min(span[0], date), max(span[1], date)


def _fold(target: Target, t: dict[str, Any], doc: dict[str, Any], date: str, rel: str) -> None:
    day = target.days.setdefault(date, Day(date))
    day.files.append(rel)
    day.requests += int(t.get("requests") or 0)
    day.ok += int(t.get("ok") or 0)
    for kind, n in (t.get("errors") or {}).items():
        day.errors[kind] = day.errors.get(kind, 0) + int(n)
    cold = t.get("cold_start") or {}
    day.cold_ms.extend(_f(s.get("ms")) for s in cold.get("starts") or [] if isinstance(s, dict))
    lat = t.get("latency_ms") or {}
    if lat.get("count"):
        lo, hi = (lat.get("p95_ci") or [None, None])[:2]
        day.p95.append((_f(lat.get("p95")), _f(lo), _f(hi)))
    for scenario in (t.get("scenarios") or {}).values():
        figures = scenario.get("latency_ms") or {}
        if scenario.get("kind") == "burst" and figures.get("count"):
            day.burst_p95.append(_f(figures.get("p95")))
    bill = t.get("bill") or {}
    if isinstance(bill.get("usd"), int | float):
        day.bill_usd = (day.bill_usd or 0.0) + float(bill["usd"])
        day.billed_requests += int(bill.get("requests") or t.get("requests") or 0)
    price = t.get("price") or {}
    if isinstance(price.get("usd_per_s"), int | float):
        day.usd_per_s = float(price["usd_per_s"])
    run = doc.get("run") or {}
    target.versions.setdefault(str(run.get("gpubench_version")), []).append(date)
    plugin = t.get("plugin") or {}
    target.plugins.setdefault(f"{plugin.get('name')} {plugin.get('version')}", []).append(date)
    if not target.meta or date >= target.meta["date"]:
        target.meta = {
            "date": date,
            **{k: t.get(k) for k in _META_KEYS},
        }


_META_KEYS = ("gpu", "model", "scaling", "scaling_read", "deployed_read", "plugin", "price")


def _cold_starts(target: Target) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.float64]]:
    """The target's cold starts, each stamped with its day's noon (UTC), for the detector."""
    walls, values = [], []
    for day in target.ordered():
        noon = (dt.date.fromisoformat(day.date) - _EPOCH).days * _NS_PER_DAY + _NS_PER_DAY // 2
        finite = [v for v in day.cold_ms if math.isfinite(v)]
        walls.extend([noon] * len(finite))
        values.extend(finite)
    return np.array(walls, dtype=np.int64), np.array(values, dtype=np.float64)


def _days(walls: npt.NDArray[np.int64], values: npt.NDArray[np.float64]) -> tuple[DayStats, ...]:
    return daily_variability(walls, values, min_change=MIN_CHANGE).days


def _detect(targets: list[Target]) -> None:
    """The change detector over each target's cold starts, day by day (see the module doc).

    Each day is tested against all the days before it, so a target's cost grows with the
    square of its history (about 1 s for two years of ten cold starts a day): a long history
    spreads the targets over the machine's cores."""
    inputs = [(t, *_cold_starts(t)) for t in targets]
    inputs = [(t, w, v) for t, w, v in inputs if v.size]
    big = sum(v.size for _, _, v in inputs) > _PARALLEL_ABOVE
    workers = min(len(inputs), os.cpu_count() or 1)
    if big and workers > 1:
        with ProcessPoolExecutor(workers) as pool:
            results = list(pool.map(_days, [w for _, w, _ in inputs], [v for _, _, v in inputs]))
    else:
        results = [_days(w, v) for _, w, v in inputs]
    for (target, _, _), days in zip(inputs, results, strict=True):
        for stats in days:
            target.days[stats.day].cold = stats


def _slug(text: str, used: set[str]) -> str:
    base = re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-") or "target"
    slug, n = base, 2
    while slug in used:
        slug, n = f"{base}-{n}", n + 1
    used.add(slug)
    return slug
