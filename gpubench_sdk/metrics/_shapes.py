"""What the load shapes measure: per-step statistics, the throughput-latency curve and its
knee (``sweep``), the SLO verdict and the search's answer (``max_rate``), and the scaling
response time of each stage change (``stages``).

Pure functions over ``Invocation`` lists (``Store.invocations`` or a shape's ``Load.results``)
and fleet readings (``Store.fleet``); ``run_*`` adapters read them from a stored run. The
runner takes its decisions with these same functions, so a stored run re-analysed later says
what the run decided.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from .._base._types import Invocation
from .._plugins import workload_class
from .._scenarios import SEQ_BLOCK
from .._scenarios._slo import SLOVerdict, StepStats, slo_verdict, step_stats
from .._store._store import Store
from ._groups import GROUPINGS, LatencyGroup, groupings_of, token_sources

NAN = math.nan


def knee_index(x: Sequence[float], y: Sequence[float]) -> int | None:
    """Kneedle (Satopää et al., ICDCS 2011) for a convex increasing curve such as latency
    against throughput: after scaling both axes to [0, 1], the point farthest below the
    diagonal, i.e. the most throughput before latency climbs. None with fewer than 3 points."""
    xs, ys = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)
    keep = np.isfinite(xs) & np.isfinite(ys)
    if keep.sum() < 3:
        return None
    idx = np.flatnonzero(keep)
    xk, yk = xs[keep], ys[keep]
    xr, yr = np.ptp(xk), np.ptp(yk)
    if xr == 0 or yr == 0:
        return None
    diff = (xk - xk.min()) / xr - (yk - yk.min()) / yr
    return int(idx[int(np.argmax(diff))])


@dataclass(frozen=True, slots=True)
class SweepCurve:
    steps: list[StepStats]  # in order of throughput
    knee: StepStats | None  # the step at the knee of p95 latency against throughput
    max_throughput_rps: float


def sweep_curve(invs: Sequence[Invocation]) -> SweepCurve:
    """The throughput-latency curve of a ``sweep`` (or any stepped shape) and its knee."""
    steps = sorted(step_stats(invs), key=lambda s: (s.throughput_rps, s.step))
    k = knee_index([s.throughput_rps for s in steps], [s.p95_ms for s in steps])
    peak = max((s.throughput_rps for s in steps if s.ok), default=NAN)
    return SweepCurve(steps, None if k is None else steps[k], peak)


@dataclass(frozen=True, slots=True)
class MaxRateResult:
    """``max_rate``'s answer: the highest rate that passed, the lowest above it that failed."""

    max_rate_rps: float  # 0 when no rate passed
    first_failed_rps: float  # NaN when none failed (max_rps reached)
    confidence: float
    trials: list[tuple[float, SLOVerdict]]  # (offered rate, verdict) in the order run


def max_rate_search(
    invs: Sequence[Invocation], p95_ms: float, error_rate: float, confidence: float
) -> MaxRateResult:
    """Re-judge a stored ``max_rate`` run's steps; the same rule the run searched with."""
    by_step: dict[int, list[Invocation]] = {}
    for inv in invs:
        by_step.setdefault(inv.seq // SEQ_BLOCK, []).append(inv)
    stats = {s.step: s for s in step_stats(invs)}
    trials = [
        (stats[j].offered_rps, slo_verdict(by_step[j], p95_ms, error_rate, confidence))
        for j in sorted(by_step)
    ]
    best = max((r for r, v in trials if v.passed), default=0.0)
    above = [r for r, v in trials if not v.passed and r > best]
    return MaxRateResult(best, min(above, default=NAN), confidence, trials)


@dataclass(frozen=True, slots=True)
class ScalingResponse:
    """How a target answered one stage change (times in seconds from the change)."""

    at_s: float  # when the change began, from the scenario's start
    to_rps: float
    baseline_p95_ms: float  # the level latency must come back to (x (1 + tolerance))
    baseline: str  # "before": the window before the change; "settled": its own last window
    latency_s: float  # until every later window's p95 was within tolerance; NaN: never
    workers_before: int | None
    workers_steady: int | None
    workers_s: float  # until ready workers reached their new steady count; NaN: unknown


def scaling_response(
    invs: Sequence[Invocation],
    changes: Sequence[tuple[float, float, float]],
    t0_ns: int,
    *,
    window_s: float,
    tolerance: float,
    fleet: Mapping[str, npt.NDArray[np.int64]] | None = None,
) -> list[ScalingResponse]:
    """Per change ``(at_s, until_s, rps)`` (``Stages.changes()``) of one target's requests,
    the scenario starting at ``t0_ns`` on the run's clock; ``fleet``: that target's readings
    (``Store.fleet(run, target=...)``) when its provider reports them."""
    ok = [i for i in invs if i.ok]
    t = np.array([(i.scheduled_ns - t0_ns) / 1e9 for i in ok], dtype=np.float64)
    lat = np.array([i.latency_ms for i in ok], dtype=np.float64)
    order = np.argsort(t)
    t, lat = t[order], lat[order]

    def p95(lo: float, hi: float) -> tuple[float, int]:
        sel = lat[(t >= lo) & (t < hi)]
        return (float(np.quantile(sel, 0.95)) if sel.size else NAN), int(sel.size)

    out = []
    for at, until, rps in changes:
        base, n = p95(at - window_s, at)
        kind = "before"
        if n < 5 or not math.isfinite(base):  # too few before it to tell a level
            base, kind = p95(until - window_s, until)[0], "settled"
        bound = base * (1 + tolerance)
        step = window_s / 10
        last_bad = None
        s = at
        while s + window_s <= until + 1e-9:  # windows by their start: no lag of a window
            value, count = p95(s, s + window_s)
            if count and value > bound:
                last_bad = s
            s += step
        if not math.isfinite(bound):
            latency = NAN
        elif last_bad is None:
            latency = 0.0
        elif last_bad + step + window_s > until + 1e-9:
            latency = NAN  # still out of tolerance in the change's last window
        else:
            latency = last_bad + step - at
        before, steady, workers = _workers(fleet, t0_ns, at, until)
        out.append(ScalingResponse(at, rps, base, kind, latency, before, steady, workers))
    return out


def _workers(
    fleet: Mapping[str, npt.NDArray[np.int64]] | None, t0_ns: int, at: float, until: float
) -> tuple[int | None, int | None, float]:
    if fleet is None or not len(fleet.get("t_ns", ())):
        return None, None, NAN
    ready, busy = fleet["ready"], fleet["busy"]
    known = (ready >= 0) & (busy >= 0)
    ts = (fleet["t_ns"][known] - t0_ns) / 1e9
    count = (ready + busy)[known]
    prior = count[ts < at]
    before = int(prior[-1]) if prior.size else 0
    tail = count[(ts >= until - (until - at) / 4) & (ts < until)]
    if not tail.size:  # polls were sparse (a busy provider answers late): its last reading
        tail = count[(ts >= at) & (ts < until)][-1:]
    if not tail.size:
        return before, None, NAN
    steady = int(np.median(tail))
    span = (ts >= at) & (ts < until)
    hit = count[span] >= steady if steady >= before else count[span] <= steady
    if steady == before:
        return before, steady, 0.0
    first = np.flatnonzero(hit)
    return before, steady, float(ts[span][first[0]] - at) if first.size else NAN


def schedule_origin_ns(invs: Sequence[Invocation], offsets_s: Sequence[float]) -> int:
    """When a scheduled shape started on the run's clock: every request ``seq`` was due at
    origin + ``offsets_s[seq]``, so any one of them gives it (the median, against rounding)."""
    gaps = [i.scheduled_ns - round(offsets_s[i.seq] * 1e9) for i in invs if i.seq < len(offsets_s)]
    if not gaps:
        raise ValueError("no request of this schedule was stored")
    return int(np.median(gaps))


def run_scaling_response(
    store: Store, run: int | str, scenario: int, target: str
) -> list[ScalingResponse]:
    """``scaling_response`` of a stored ``stages`` scenario for one target."""
    from .._scenarios import Stages

    info = store.run(run)
    sc = _stored_scenario(info.scenarios[scenario].kind, info.scenarios[scenario].params)
    if not isinstance(sc, Stages):
        raise ValueError(f"scenario {scenario} is {info.scenarios[scenario].kind!r}, not stages")
    invs = [i for i in store.invocations(info.id) if i.scenario == scenario and i.target == target]
    t0 = schedule_origin_ns(invs, list(sc.offsets_s()))
    fleet = store.fleet(info.id, target=target)
    return scaling_response(
        invs, sc.changes(), t0, window_s=sc.window_s, tolerance=sc.tolerance, fleet=fleet
    )


def run_sweep(store: Store, run: int | str, scenario: int, target: str) -> SweepCurve:
    """``sweep_curve`` of a stored ``sweep`` (or any stepped) scenario for one target."""
    info = store.run(run)
    invs = store.invocations(info.id)
    return sweep_curve([i for i in invs if i.scenario == scenario and i.target == target])


def run_max_rate(store: Store, run: int | str, scenario: int, target: str) -> MaxRateResult:
    """``max_rate_search`` of a stored ``max_rate`` scenario for one target, judged by the
    SLO stored with it."""
    info = store.run(run)
    p = info.scenarios[scenario].params
    invs = [i for i in store.invocations(info.id) if i.scenario == scenario and i.target == target]
    return max_rate_search(invs, p["p95_ms"], p["error_rate"], p["confidence"])


def _stored_scenario(kind: str, params: Mapping[str, object]) -> object:
    from .._plugins import build_scenario

    return build_scenario({"kind": kind, **params}, "stored scenario")


def shape_summary(store: Store, run: int | str) -> list[str]:
    """One line per stage change, sweep and max_rate search of a stored run: what the
    console prints after the summary table."""
    info = store.run(run)
    lines = []
    workload = info.config.get("workload") or {}
    groupings = groupings_of(workload, (s.kind for s in info.scenarios))
    counts_tokens = _counts_tokens(workload.get("kind"))
    # read once for every scenario, and only where a line needs them
    rows = store.invocations(info.id) if groupings or counts_tokens else []
    if counts_tokens:
        lines += _estimated_tokens_lines(rows)
    for sidx, sc in enumerate(info.scenarios):
        invs = [i for i in rows if i.scenario == sidx]
        label = sc.params.get("name") or f"{sc.kind}-{sidx}"
        for grouping in groupings:
            lines += _group_lines(invs, label, grouping)
        if sc.kind not in ("stages", "sweep", "max_rate"):
            continue
        for t in (t.name for t in info.targets):
            where = f"{label} on {t}"
            try:
                if sc.kind == "stages":
                    for c in run_scaling_response(store, info.id, sidx, t):
                        lines.append(
                            f"{where}: to {c.to_rps:g} req/s at {c.at_s:g} s: p95 back in "
                            f"{_secs(c.latency_s)}, workers ready in {_secs(c.workers_s)}"
                        )
                elif sc.kind == "sweep":
                    curve = run_sweep(store, info.id, sidx, t)
                    knee = curve.knee
                    at = (
                        "no knee"
                        if knee is None
                        else (f"knee at {knee.throughput_rps:.1f} req/s (p95 {knee.p95_ms:.0f} ms)")
                    )
                    lines.append(f"{where}: {at}; most {curve.max_throughput_rps:.1f} req/s")
                else:
                    m = run_max_rate(store, info.id, sidx, t)
                    p = sc.params
                    lines.append(
                        f"{where}: {m.max_rate_rps:.1f} req/s holds p95 < {p['p95_ms']:g} ms "
                        f"and errors < {p['error_rate']:.0%} ({m.confidence:.0%} confidence)"
                        + (
                            ""
                            if math.isnan(m.first_failed_rps)
                            else f"; {m.first_failed_rps:.1f} req/s did not"
                        )
                    )
            except (ValueError, KeyError):  # stopped before it sent anything to judge
                continue
    return lines


def _counts_tokens(kind: Any) -> bool:
    """Whether the workload ``kind`` counts tokens (and stores where each count came from)."""
    try:
        return isinstance(kind, str) and "tokens" in workload_class(kind).units
    except Exception:  # a plugin no longer installed: its run still has a summary
        return False


def _estimated_tokens_lines(rows: Sequence[Invocation]) -> list[str]:
    """A line per target whose token counts are not all the server's: which estimate made
    them (the workload's tokenizer, words, streamed chunks) and for how many requests."""
    lines = []
    for target, sides in token_sources(rows).items():
        if all(set(counts) <= {"server"} for counts in sides.values()):
            continue
        each = "; ".join(
            f"{side} " + ", ".join(f"{_SOURCES.get(k, k)} {n}" for k, n in sorted(counts.items()))
            for side, counts in sides.items()
        )
        lines.append(f"{target}: token counts (requests): {each}")
    return lines


_SOURCES = {
    "server": "by the server",
    "tokenizer": "by the tokenizer",
    "words": "estimated in words",
    "chunks": "estimated in streamed chunks",
}


def _secs(value: float) -> str:
    return "-" if math.isnan(value) else f"{value:.2f} s"


def _length_line(where: str, buckets: list[LatencyGroup]) -> str:
    """Latency and TTFT p50 in each prompt-length bucket."""
    each = ", ".join(
        f"{g.label} {g.latency_p50_ms:.0f} / {g.ttft_p50_ms:.0f} ms ({g.requests})" for g in buckets
    )
    return f"{where}: p50 latency / TTFT by prompt length: {each}"


def _turn_line(where: str, turns: list[LatencyGroup]) -> str:
    """How TTFT grows over a session's turns, with the context each turn sent."""
    ttft = ", ".join(f"{g.ttft_p50_ms:.0f}" for g in turns)
    first, last = turns[0].prompt_tokens_p50, turns[-1].prompt_tokens_p50
    return f"{where}: TTFT p50 by turn {ttft} ms (prompt p50 {first:.0f} -> {last:.0f} tokens)"


def _prefix_line(where: str, groups: list[LatencyGroup]) -> str:
    """TTFT of the requests with the shared prefix (key 1) against those without (key 0)."""
    without, with_ = groups
    line = (
        f"{where}: TTFT p50 {with_.ttft_p50_ms:.0f} ms with the shared prefix "
        f"({with_.requests} requests, prompt p50 {with_.prompt_tokens_p50:.0f} tokens), "
        f"{without.ttft_p50_ms:.0f} ms without ({without.requests}, "
        f"{without.prompt_tokens_p50:.0f} tokens)"
    )
    if not math.isnan(with_.cached_share):  # the server said what its cache served
        line += f"; {with_.cached_share:.0%} of the prefixed prompts' tokens were cached"
    return line


def _batch_line(where: str, buckets: list[LatencyGroup]) -> str:
    """Latency p50 in each batch-size bucket, with the tokens such a batch carried."""
    each = ", ".join(
        f"{g.label} {g.latency_p50_ms:.0f} ms ({g.requests}, {g.prompt_tokens_p50:.0f} tokens)"
        for g in buckets
    )
    return f"{where}: p50 latency by batch size: {each}"


def _plain_line(name: str) -> Callable[[str, list[LatencyGroup]], str]:
    """Latency p50 in each group, for a grouping whose label says it all."""

    def line(where: str, groups: list[LatencyGroup]) -> str:
        each = ", ".join(f"{g.label} {g.latency_p50_ms:.0f} ms ({g.requests})" for g in groups)
        return f"{where}: p50 latency by {name}: {each}"

    return line


_GROUP_LINES = {
    "prompt length": _length_line,
    "turn": _turn_line,
    "shared prefix": _prefix_line,
    "batch size": _batch_line,
    "audio duration": _plain_line("audio duration"),
    "image size": _plain_line("image size"),
    "steps": _plain_line("steps"),
}
"""What the console prints under the summary for each of ``groupings_of``'s groupings."""


def _group_lines(invs: list[Invocation], label: str, grouping: str) -> list[str]:
    """One line per target whose requests fall in two or more of ``grouping``'s groups."""
    lines = []
    for target in dict.fromkeys(i.target for i in invs):
        mine = (i for i in invs if i.target == target)
        groups = [g for g in GROUPINGS[grouping](mine) if g.requests]
        if len(groups) >= 2:
            lines.append(_GROUP_LINES[grouping](f"{label} on {target}", groups))
    return lines
