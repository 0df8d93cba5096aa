"""Batch work moved to the hours when the platform measured best.

Given runs spread over hours and days (a campaign's slots: each run is placed at the local hour
and date it started) and a batch (``jobs`` a day, to be done within ``hours`` consecutive
hours), advise:

1. Tables each hour of the day: the runs, the distinct days and the cold starts measured then,
   with the median cold start and execution (``HourSlot``).
2. Ranks every window of ``hours`` consecutive hours (wrapping at midnight) holding a measured
   hour by how its measurements compare with each target's own over the whole day: the mean
   over targets of (window median cold start / all-day median), ties broken by execution the
   same way. Lower is better: the window where cold starts and latency were best.
3. Prices the best ``windows`` of them and the batch spread over the day, each with the full
   search (``advise_targets``): in a window, only that window's runs are the measurements and
   the jobs arrive (Poisson) within it; spread over the day, every run counts and the jobs
   arrive all day. Runs pooled from several days are resampled day by day, so a window
   measured on few days gets wide intervals.

The uncertainty is said in numbers: how many days each hour slot of a window was measured, and
a note when one was measured on fewer than ``FEW_DAYS``.
"""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from .._base._errors import ConfigError, StoreError
from ._decide import Advice, advise_targets
from ._inputs import (
    MAX_PROFILED_ARRIVALS,
    Objectives,
    Traffic,
    measured_samples,
    measured_targets,
)

if TYPE_CHECKING:
    from .._store._store import Store
    from ..cost._catalog import PriceCatalog

FEW_DAYS = 3  # an hour slot measured on fewer days than this is flagged


@dataclass(frozen=True, slots=True)
class HourSlot:
    """One local hour of the day as measured: over how many runs and days, what it saw."""

    hour: int
    runs: tuple[int, ...]
    days: int
    cold_starts: int
    cold_start_p50_s: float
    execution_p50_s: float


@dataclass(frozen=True)
class BatchWindow:
    """A window of the day (``start_hour`` for ``hours``; ``None``: spread over the day), its
    measured hour slots, its score (lower: better measured than the day), and its advice."""

    start_hour: int | None
    hours: int
    slots: tuple[HourSlot, ...]
    score: float
    advice: Advice

    @property
    def label(self) -> str:
        if self.start_hour is None:
            return "spread over the day"
        end = (self.start_hour + self.hours) % 24
        return f"{self.start_hour:02d}:00-{end:02d}:00"

    @property
    def fewest_days(self) -> int:
        return min((s.days for s in self.slots), default=0)


@dataclass(frozen=True)
class BatchAdvice:
    """The batch spread over the day against the best windows; ``best``: the cheapest that
    meets every objective (else the spread), and the reason in a sentence."""

    jobs_per_day: float
    hours: int
    tz_offset_s: float
    slots: tuple[HourSlot, ...]
    spread: BatchWindow
    windows: tuple[BatchWindow, ...]
    best: BatchWindow
    reason: str
    notes: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        def window(w: BatchWindow) -> dict[str, Any]:
            rec = w.advice.to_json()
            return {
                "window": w.label,
                "start_hour": w.start_hour,
                "hours": w.hours,
                "score": w.score,
                "days_per_hour_slot": {s.hour: s.days for s in w.slots},
                "fewest_days": w.fewest_days,
                "cold_starts_measured": sum(s.cold_starts for s in w.slots),
                "meets_objectives": w.advice.meets_objectives,
                "recommended": rec["recommended"],
                "reason": w.advice.reason,
            }

        return {
            "batch": {"jobs_per_day": self.jobs_per_day, "hours": self.hours},
            "tz_offset_s": self.tz_offset_s,
            "hour_slots": [
                {
                    "hour": s.hour,
                    "runs": list(s.runs),
                    "days": s.days,
                    "cold_starts": s.cold_starts,
                    "cold_start_p50_s": s.cold_start_p50_s,
                    "execution_p50_s": s.execution_p50_s,
                }
                for s in self.slots
            ],
            "spread": window(self.spread),
            "windows": [window(w) for w in self.windows],
            "best": self.best.label,
            "reason": self.reason,
            "notes": self.notes,
        }


def _placed(store: Store, runs: Sequence[int], tz_offset_s: float) -> dict[int, tuple[int, str]]:
    """Each run's local (hour, date) from when it started."""
    out = {}
    for r in runs:
        info = store.run(r)
        t = dt.datetime.fromtimestamp(info.started_wall_ns / 1e9 + tz_offset_s, dt.UTC)
        out[info.id] = (t.hour, t.date().isoformat())
    return out


Samples = dict[int, dict[str, tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]]]


def _samples(store: Store, runs: Sequence[int]) -> Samples:
    """Each run's (executions, cold starts) per target; a target with no successful request
    in a run is left out of that run."""
    out: Samples = {}
    for r in runs:
        out[r] = {}
        for t in store.run(r).targets:
            try:
                out[r][t.name] = measured_samples(store, r, t.name)
            except StoreError:
                continue
    return out


def _pooled(
    samples: Samples, runs: Sequence[int], target: str | None = None
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    """(executions, cold starts) of ``runs``, of one target or all."""
    got = [v for r in runs for name, v in samples[r].items() if target in (None, name)]
    if not got:
        return np.zeros(0), np.zeros(0)
    return np.concatenate([e for e, _ in got]), np.concatenate([c for _, c in got])


def _median(values: npt.NDArray[np.float64]) -> float:
    return float(np.median(values)) if values.size else math.nan


def hour_slots(samples: Samples, placed: Mapping[int, tuple[int, str]]) -> tuple[HourSlot, ...]:
    """Every measured hour of the day, pooled over targets."""
    out = []
    for hour in sorted({h for h, _ in placed.values()}):
        in_hour = [r for r in samples if placed[r][0] == hour]
        execution, cold = _pooled(samples, in_hour)
        days = len({placed[r][1] for r in in_hour})
        out.append(
            HourSlot(hour, tuple(in_hour), days, int(cold.size), _median(cold), _median(execution))
        )
    return tuple(out)


def _ranked_windows(
    samples: Samples, placed: Mapping[int, tuple[int, str]], hours: int
) -> list[tuple[float, int, list[int]]]:
    """(score, start hour, runs) of every window holding a measured hour, best first; a
    target counts in a window's score where both it and the whole day measured it."""
    runs = list(samples)
    names = sorted({name for r in runs for name in samples[r]})
    day = {name: _pooled(samples, runs, name) for name in names}
    seen: set[tuple[int, ...]] = set()
    out = []
    for start in range(24):
        span = {(start + i) % 24 for i in range(hours)}
        in_window = tuple(r for r in runs if placed[r][0] in span)
        if not in_window or in_window in seen:
            continue
        seen.add(in_window)  # a later start holding the same runs holds the same hours
        cold, execution = [], []
        for name in names:
            e, c = _pooled(samples, in_window, name)
            if c.size and e.size and day[name][1].size:
                cold.append(np.median(c) / np.median(day[name][1]))
                execution.append(np.median(e) / np.median(day[name][0]))
        if cold:
            score = float(np.mean(cold)) + 1e-3 * float(np.mean(execution))
            out.append((score, start, list(in_window)))
    return sorted(out, key=lambda w: (w[0], w[1]))


def advise_batch(
    store: Store,
    runs: Sequence[int | str],
    jobs_per_day: float,
    hours: int,
    objectives: Objectives,
    *,
    campaign: str | None = None,
    prices: Mapping[str, tuple[str, float]] | None = None,
    catalog: PriceCatalog | None = None,
    tz_offset_s: float = 0.0,
    windows: int = 2,
    resamples: int = 40,
    confidence: float = 0.9,
    scale_down_s: Sequence[float] | None = None,
    max_workers: int | None = None,
    seed: int = 0,
) -> BatchAdvice:
    """Where in the day to run a batch of ``jobs_per_day`` jobs within ``hours`` hours, from
    ``runs`` measured at different hours (see the module's docstring). ``campaign``: also its
    runs, placed in the day in its time zone (``tz_offset_s`` is then the campaign's)."""
    from ..cost._catalog import load_catalog
    from ._search import DEFAULT_SCALE_DOWN_S

    if not 1 <= hours <= 24:
        raise ConfigError("--batch-hours", hours, "whole hours from 1 to 24")
    if not 0 < jobs_per_day <= MAX_PROFILED_ARRIVALS:
        raise ConfigError("--batch", jobs_per_day, f"jobs a day in (0, {MAX_PROFILED_ARRIVALS:,}]")
    if windows < 1:
        raise ConfigError("windows", windows, "an integer >= 1")
    catalog = catalog or load_catalog()
    ids = [store.run(r).id for r in runs]
    if campaign is not None:
        found, tz_offset_s = campaign_runs(store, campaign)
        ids += [r for r in found if r not in ids]
    if not ids:
        raise ConfigError("runs", [], "runs measured at different hours, or a campaign")
    placed = _placed(store, ids, tz_offset_s)
    samples = _samples(store, ids)
    slots = hour_slots(samples, placed)
    by_hour = {s.hour: s for s in slots}
    search: dict[str, Any] = {
        "resamples": resamples,
        "confidence": confidence,
        "scale_down_s": scale_down_s or DEFAULT_SCALE_DOWN_S,
        "max_workers": max_workers,
        "seed": seed,
        "overflow": False,
    }
    whole = measured_targets(store, ids, catalog, prices)
    spread = BatchWindow(
        None,
        24,
        slots,
        1.0,
        advise_targets(whole, Traffic.per_day(jobs_per_day), objectives, **search),
    )
    # the window's hours first in the simulated day: the jobs arrive within them only
    profile = (1.0,) * hours + (0.0,) * (24 - hours)
    traffic = Traffic.per_day(jobs_per_day, daily_profile=profile)
    chosen: list[BatchWindow] = []
    skipped: list[str] = []
    for score, start, in_window in _ranked_windows(samples, placed, hours):
        if len(chosen) == windows:
            break
        span = [(start + i) % 24 for i in range(hours)]
        held = tuple(by_hour[h] for h in span if h in by_hour)
        try:  # every target needs a cold start measured in the window's hours
            targets = measured_targets(store, in_window, catalog, prices)
        except ConfigError as exc:
            label = BatchWindow(start, hours, held, score, spread.advice).label
            skipped.append(f"window {label} not priced: {exc}")
            continue
        priced = advise_targets(targets, traffic, objectives, **search)
        chosen.append(BatchWindow(start, hours, held, score, priced))
    best = min(
        [spread, *chosen],
        key=lambda w: (
            not w.advice.meets_objectives,
            w.advice.recommended.cost_usd_per_day[0] if w.advice.recommended else np.inf,
        ),
    )
    notes = [
        f"window {w.label}: {len(w.slots)} of its {hours} hour(s) measured, on "
        + ", ".join(f"{s.hour:02d}:00 {s.days} day(s)" for s in w.slots)
        + (
            "; the others are taken to behave like them (a campaign with more slots a day "
            "would measure them)"
            if len(w.slots) < hours
            else ""
        )
        + (
            f"; fewer than {FEW_DAYS} days per slot: more days of campaign would show whether "
            "these hours are reliably better"
            if w.fewest_days < FEW_DAYS
            else ""
        )
        for w in chosen
    ] + skipped
    return BatchAdvice(
        jobs_per_day, hours, tz_offset_s, slots, spread, tuple(chosen), best,
        _reason(best, spread), notes,
    )  # fmt: skip


def _reason(best: BatchWindow, spread: BatchWindow) -> str:
    rec, base = best.advice.recommended, spread.advice.recommended
    assert rec is not None and base is not None
    if best is spread:
        return (
            f"Spread over the day is cheapest: {rec.option.label} at "
            f"${rec.cost_usd_per_day[0]:,.2f}/day; no measured window did better."
        )
    saving = base.cost_usd_per_day[0] - rec.cost_usd_per_day[0]
    return (
        f"Run the batch in {best.label} (measured on at least {best.fewest_days} day(s) per "
        f"hour slot): {rec.option.label} at ${rec.cost_usd_per_day[0]:,.2f}/day "
        f"({rec.cost_usd_per_day[1]:,.2f}-{rec.cost_usd_per_day[2]:,.2f}), "
        f"${saving:,.2f}/day less than spread over the day (${base.cost_usd_per_day[0]:,.2f})."
    )


def campaign_runs(store: Store, name: str) -> tuple[list[int], float]:
    """A campaign's runs (the latest attempt of each slot that made one, in slot order) and
    its time zone's UTC offset in seconds when it began (as ``campaign_summary`` places
    days and hours)."""
    from ..campaign._db import CampaignDB
    from ..campaign._schedule import zone

    with CampaignDB(store.path, readonly=True) as db:
        campaign = db.get(name)
        tags = db.tags(campaign)
    start = dt.datetime.fromtimestamp(campaign.schedule.start_ns / 1e9, zone(campaign.schedule.tz))
    offset = start.utcoffset()
    runs = list(dict.fromkeys(int(str(row[0])) for row in tags))
    if not runs:
        raise ConfigError("--campaign", name, "a campaign with at least one finished slot")
    return runs, offset.total_seconds() if offset is not None else 0.0
