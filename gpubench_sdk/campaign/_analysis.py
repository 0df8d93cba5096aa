"""A campaign's results: per-slot time series, per-day and per-time-of-day variability.

Per target, over the latest attempt of every slot that made a run:

* ``points``: one per slot: requests, error rate, p50/p95 latency, median cold start.
* ``daily_latency`` / ``daily_cold_start``: ``metrics.daily_variability`` (per-day medians with
  CIs, range = max - min of the medians as the reference report measured it, CV of the
  medians, and the change detector: each day against the earlier days pooled, Mann-Whitney U,
  Holm-adjusted). Days are calendar days in the campaign's time zone, at its UTC offset when
  the campaign began (a DST change mid-campaign shifts day boundaries by an hour).
* ``time_of_day_latency`` / ``time_of_day_cold_start``: the same figures grouped by the hour
  of the day the request was sent: does 03:00 differ from 15:00?
* ``cold_start_modes_by_day``: each day's cold starts as the mixture they are
  (``metrics.cold_start_modes``), where a day had six or more.

Latency is from the scheduled send, successful measured requests only; cold start is
``metrics.cold_starts_of`` (latency - inference time). See docs/metrics.md.
"""

from __future__ import annotations

import datetime as dt
import math
from collections import Counter
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from .._base._types import Outcome
from .._store._store import Store
from ..metrics import (
    ColdStartModes,
    Variability,
    cold_start_modes,
    cold_starts_of,
    daily_variability,
    quantile_ci,
)
from ..metrics._modes import MIN_SAMPLES as MIN_MODE_SAMPLES
from ..metrics._variability import day_name, day_of
from ._db import CampaignDB
from ._schedule import zone

_NS_PER_HOUR = 3600 * 10**9


@dataclass(frozen=True, slots=True)
class SlotPoint:
    """One target in one slot (the slot's latest attempt)."""

    slot: int
    attempt: int
    run_id: int
    scheduled_ns: int
    local_date: str
    local_time: str
    weekday: int  # 0 = Monday
    requests: int
    ok: int
    error_rate: float
    p50_ms: float
    p95_ms: float
    cold_start_p50_ms: float  # NaN when the slot had no cold start


@dataclass(frozen=True, slots=True)
class HourStats:
    hour: int  # 0-23, local time of the send
    count: int
    median_ms: float
    median_ci_ms: tuple[float, float]


@dataclass(frozen=True, slots=True)
class TimeOfDay:
    """Per-hour medians and their spread: range (max - min) and CV of the hourly medians."""

    hours: tuple[HourStats, ...]
    range_ms: float
    cv: float


@dataclass(frozen=True, slots=True)
class TargetSeries:
    target: str
    region: str | None
    points: tuple[SlotPoint, ...]
    daily_latency: Variability
    daily_cold_start: Variability | None  # None: no cold start was measured
    time_of_day_latency: TimeOfDay
    time_of_day_cold_start: TimeOfDay | None
    # the cold starts' modes per day (a median of a mixture describes no real request); days
    # with fewer cold starts than a mode needs are left out
    cold_start_modes_by_day: tuple[tuple[str, ColdStartModes], ...] = ()

    @property
    def drift_days(self) -> list[str]:
        """Days the change detector flagged, in latency or cold start."""
        days = set(self.daily_latency.changed_days)
        if self.daily_cold_start is not None:
            days.update(self.daily_cold_start.changed_days)
        return sorted(days)


@dataclass(frozen=True, slots=True)
class CampaignSummary:
    name: str
    schedule: str
    tz: str
    slot_status: dict[str, int]  # slots by status
    runs: tuple[int, ...]  # the run ids analysed, in slot order
    requests: int
    cost_usd: float | None
    targets: tuple[TargetSeries, ...]


def _quantile(values: npt.NDArray[np.float64], q: float) -> float:
    return float(np.quantile(values, q)) if values.size else math.nan


def time_of_day(
    wall_start_ns: npt.ArrayLike, values_ms: npt.ArrayLike, *, tz_offset_s: float = 0.0
) -> TimeOfDay:
    """Medians (with 95% CIs) of ``values_ms`` by hour of day, NaN ignored, and their spread."""
    wall = np.asarray(wall_start_ns, dtype=np.int64)
    values = np.asarray(values_ms, dtype=np.float64)
    keep = ~np.isnan(values)
    hours = ((wall[keep] + round(tz_offset_s * 1e9)) // _NS_PER_HOUR) % 24
    values = values[keep]
    rng = np.random.default_rng(0)
    out = []
    for h in np.unique(hours):
        v = np.sort(values[hours == h])
        ci = quantile_ci(v, 0.5, rng=rng)
        out.append(HourStats(int(h), int(v.size), float(np.median(v)), ci))
    medians = np.array([s.median_ms for s in out])
    spread = float(medians.max() - medians.min()) if medians.size else math.nan
    mean = float(medians.mean()) if medians.size else math.nan
    cv = float(medians.std(ddof=1)) / mean if medians.size > 1 and mean else math.nan
    return TimeOfDay(tuple(out), spread, cv)


def campaign_summary(store: Store, name: str | None = None) -> CampaignSummary:
    """Everything the CLI and the HTML report show about a campaign (see the module doc).

    ``name`` may be omitted when the store holds one campaign.
    """
    from ._exec import campaign_spend

    with CampaignDB(store.path, readonly=store.readonly) as db:
        campaign = db.get(name)
        status = Counter(s.status for s in db.slots(campaign))
        tags = db.tags(campaign)
        if store.readonly:  # what finished attempts recorded; nothing priced anew
            attempts = db.attempts(campaign)
            costs = [a.cost_usd for a in attempts if a.cost_usd is not None]
            requests = sum(a.requests or 0 for a in attempts)
            usd = sum(costs) if costs else None
        else:
            requests, usd = campaign_spend(db, campaign)
    tz = zone(campaign.schedule.tz)
    start = dt.datetime.fromtimestamp(campaign.schedule.start_ns / 1e9, tz)
    offset = start.utcoffset()
    offset_s = offset.total_seconds() if offset is not None else 0.0
    by_target: dict[str, list[tuple[object, ...]]] = {}
    for row in tags:
        by_target.setdefault(row[1], []).append(row)
    series = []
    for target in [t.get("name") for t in campaign.plan.get("targets", [])]:
        rows = by_target.get(str(target), [])
        series.append(_target_series(store, str(target), rows, campaign.regions, offset_s))
    runs = tuple(dict.fromkeys(int(r[0]) for r in tags))
    return CampaignSummary(
        campaign.name, campaign.schedule.describe(), campaign.schedule.tz,
        {s: status[s] for s in sorted(status)}, runs, requests, usd, tuple(series),
    )  # fmt: skip


def _target_series(
    store: Store,
    target: str,
    rows: list[tuple[object, ...]],
    regions: object,
    offset_s: float,
) -> TargetSeries:
    points = []
    walls, lats, cold_walls, colds = [], [], [], []
    for run_id, _, slot, attempt, scheduled, date, clock, _, weekday, _ in rows:
        cols = store.columns(int(str(run_id)), target=target)
        ok = cols["outcome"] == Outcome.OK.code
        lat = cols["latency_ms"][ok]
        cs = cold_starts_of(cols)
        walls.append(cols["wall_start_ns"][ok])
        lats.append(lat)
        cold_walls.append(cols["wall_start_ns"][cs.index])
        colds.append(cs.cold_start_ms)
        n = int(ok.size)
        points.append(
            SlotPoint(
                int(str(slot)),
                int(str(attempt)),
                int(str(run_id)),
                int(str(scheduled)),
                str(date),
                str(clock),
                int(str(weekday)),
                n,
                int(ok.sum()),
                (n - int(ok.sum())) / n if n else math.nan,
                _quantile(lat, 0.5),
                _quantile(lat, 0.95),
                _quantile(cs.cold_start_ms, 0.5),
            )
        )
    wall = np.concatenate(walls) if walls else np.zeros(0, np.int64)
    lat_all = np.concatenate(lats) if lats else np.zeros(0)
    cold_wall = np.concatenate(cold_walls) if cold_walls else np.zeros(0, np.int64)
    cold_all = np.concatenate(colds) if colds else np.zeros(0)
    has_cold = bool(cold_all.size)
    region = regions.get(target) if isinstance(regions, dict) else None
    return TargetSeries(
        target=target,
        region=region,
        points=tuple(points),
        daily_latency=daily_variability(wall, lat_all, tz_offset_s=offset_s),
        daily_cold_start=(
            daily_variability(cold_wall, cold_all, tz_offset_s=offset_s) if has_cold else None
        ),
        time_of_day_latency=time_of_day(wall, lat_all, tz_offset_s=offset_s),
        time_of_day_cold_start=(
            time_of_day(cold_wall, cold_all, tz_offset_s=offset_s) if has_cold else None
        ),
        cold_start_modes_by_day=_modes_by_day(cold_wall, cold_all, offset_s),
    )


def _modes_by_day(
    wall_ns: npt.NDArray[np.int64], cold_ms: npt.NDArray[np.float64], offset_s: float
) -> tuple[tuple[str, ColdStartModes], ...]:
    """Each day's cold-start modes (``metrics.cold_start_modes``), on days with enough of them
    to hold two modes: a day whose snapshot cache missed shows as a second mode, not a drift."""
    days = day_of(wall_ns, offset_s)
    out = []
    for d in np.unique(days):
        values = cold_ms[days == d]
        if values.size >= MIN_MODE_SAMPLES:
            out.append((day_name(d), cold_start_modes(values, resamples=100)))
    return tuple(out)
