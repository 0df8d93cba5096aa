"""The load shapes' part of a report: for ``stages``, latency and workers over time with each
change's scaling response time; for ``sweep``, the throughput-latency curve and its knee; for
``max_rate``, the search's trials and its answer.

``collect_shapes`` fills tables (printed by every format) and chart series; ``shapes_html``
draws them. The report's assembly calls each once (two hook lines), so this module owns the
whole section.
"""

from __future__ import annotations

import math
from html import escape
from typing import Any

import numpy as np

from .. import metrics
from .._scenarios import Stages
from .._store._store import RunInfo, Store
from ..metrics._shapes import _stored_scenario
from . import _svg
from ._read import Report, Row, thin
from ._read import clean as _clean
from ._read import num as _num

_SHAPES = ("stages", "sweep", "max_rate")


def collect_shapes(report: Report, store: Store, info: RunInfo) -> None:
    """Tables ``scaling_response``, ``sweep`` and ``max_rate``, and their chart series."""
    if not any(s.kind in _SHAPES for s in info.scenarios):
        return
    invs = store.invocations(info.id)
    for sidx, sc in enumerate(info.scenarios):
        if sc.kind not in _SHAPES:
            continue
        label = str(sc.params.get("name") or f"{sc.kind}-{sidx}")
        for t in info.targets:
            mine = [i for i in invs if i.scenario == sidx and i.target == t.name]
            if not mine:
                continue
            key = {"run": info.id, "target": t.name, "scenario": label}
            try:
                if sc.kind == "stages":
                    _stages(report, store, info, sidx, t.name, mine, key)
                elif sc.kind == "sweep":
                    _sweep(report, mine, key)
                else:
                    _max_rate(report, store, info, sidx, t.name, key)
            except (ValueError, KeyError) as exc:  # a scenario stopped before any answer
                report.notes.append(f"{label} on {t.name}: no {sc.kind} analysis ({exc})")


def _stages(
    report: Report, store: Store, info: RunInfo, sidx: int, target: str, invs: Any, key: Row
) -> None:
    changes = metrics.run_scaling_response(store, info.id, sidx, target)
    for c in changes:
        report.table("scaling_response").append(
            _clean(
                {
                    **key,
                    "change_at_s": c.at_s,
                    "to_rps": c.to_rps,
                    "baseline_p95_ms": c.baseline_p95_ms,
                    "baseline": c.baseline,
                    "latency_back_s": c.latency_s,
                    "workers_before": c.workers_before,
                    "workers_steady": c.workers_steady,
                    "workers_ready_s": c.workers_s,
                }
            )
        )
    sc = _stored_scenario(info.scenarios[sidx].kind, info.scenarios[sidx].params)
    assert isinstance(sc, Stages)
    origin = metrics.schedule_origin_ns(invs, list(sc.offsets_s()))
    ok = sorted((i.scheduled_ns, i.latency_ms) for i in invs if i.ok)
    keep = thin(len(ok))
    fleet = store.fleet(info.id, target=target)
    t_s = (fleet["t_ns"] - origin) / 1e9  # the scenario's span, and a second either side
    known = (fleet["ready"] >= 0) & (fleet["busy"] >= 0) & (t_s >= -1) & (t_s <= sc.duration_s + 1)
    report.series.setdefault("stages_timeline", []).append(
        {
            **key,
            "t_s": [(ok[k][0] - origin) / 1e9 for k in keep],
            "latency_ms": [ok[k][1] for k in keep],
            "workers_t_s": ((fleet["t_ns"][known] - origin) / 1e9).tolist(),
            "workers": (fleet["ready"] + fleet["busy"])[known].tolist(),
            "changes_s": [c.at_s for c in changes],
        }
    )


def _sweep(report: Report, invs: Any, key: Row) -> None:
    curve = metrics.sweep_curve(invs)
    for s in curve.steps:
        report.table("sweep").append(
            _clean(
                {
                    **key,
                    "step": s.step,
                    "offered_rps": s.offered_rps,
                    "throughput_rps": s.throughput_rps,
                    "p50_ms": s.p50_ms,
                    "p95_ms": s.p95_ms,
                    "error_rate": s.error_rate,
                    "knee": curve.knee is not None and s.step == curve.knee.step,
                }
            )
        )
    report.series.setdefault("sweep_curve", []).append(
        {
            **key,
            "throughput_rps": [_num(s.throughput_rps) for s in curve.steps],
            "p95_ms": [_num(s.p95_ms) for s in curve.steps],
            "knee": None if curve.knee is None else curve.steps.index(curve.knee),
        }
    )


def _max_rate(
    report: Report, store: Store, info: RunInfo, sidx: int, target: str, key: Row
) -> None:
    found = metrics.run_max_rate(store, info.id, sidx, target)
    for n, (rps, v) in enumerate(found.trials):
        report.table("max_rate").append(
            _clean(
                {
                    **key,
                    "trial": n,
                    "rate_rps": rps,
                    "requests": v.requests,
                    "p95_ms": v.p95_ms,
                    "passed": v.passed,
                    "slow_share_upper": v.slow_upper,
                    "error_rate_upper": v.error_upper,
                    "max_rate_rps": found.max_rate_rps if n == len(found.trials) - 1 else None,
                }
            )
        )


def shapes_html(report: Report, figure: Any, table: Any) -> str:
    """The section: ``figure(kind, svg, caption)`` and ``table(rows)`` are the page's own."""
    parts = []
    for s in report.series.get("stages_timeline", []):
        where = f"run {s['run']}, {s['target']}, {s['scenario']}"
        parts.append(
            figure(
                "stages-latency",
                timeline(s["t_s"], s["latency_ms"], s["changes_s"], "latency (ms)", dots=True),
                f"{where}: latency of each successful request by its scheduled send; dashed "
                "lines are stage changes",
            )
        )
        if s["workers"]:
            parts.append(
                figure(
                    "stages-workers",
                    timeline(s["workers_t_s"], s["workers"], s["changes_s"], "workers up"),
                    f"{where}: workers ready or busy, as the provider reported them",
                )
            )
    if parts or report.tables.get("scaling_response"):
        parts.insert(0, "<h2>Stages: scaling response time</h2>")
        parts.append(table(report.tables.get("scaling_response", [])))
    sweeps = []
    for s in report.series.get("sweep_curve", []):
        svg = curve(s["throughput_rps"], s["p95_ms"], s["knee"])
        where = f"run {s['run']}, {s['target']}, {s['scenario']}"
        sweeps.append(figure("sweep", svg, f"{where}: p95 latency against throughput per step"))
    if sweeps:
        parts += ["<h2>Sweep: throughput against latency</h2>", *sweeps]
        parts.append(table(report.tables.get("sweep", [])))
    if report.tables.get("max_rate"):
        parts += ["<h2>Highest rate within the SLO</h2>", table(report.tables["max_rate"])]
    return "".join(parts)


def timeline(
    t_s: list[float], values: list[float], changes_s: list[float], unit: str, dots: bool = False
) -> str:
    """Values over scenario time, with a dashed line at each stage change."""
    top, bottom, height = 10, 200, 250
    xs, ys = np.asarray(t_s, float), np.asarray(values, float)
    xt = _ticks(min(0.0, float(xs.min())) if xs.size else 0.0, float(xs.max()) if xs.size else 1.0)
    yt = _ticks(0.0, float(ys.max()) if ys.size and ys.max() > 0 else 1.0)
    x = _svg._Scale(xt[0], xt[-1], 60, _svg.WIDTH - 24)
    y = _svg._Scale(yt[0], yt[-1], bottom, top)
    body = _svg._y_axis(y, yt, 60, _svg.WIDTH - 24, unit)
    body += _svg._x_axis(x, xt, top, bottom, "seconds from the scenario's start")
    for c in changes_s:
        body.append(
            f'<line x1="{x(c):.1f}" x2="{x(c):.1f}" y1="{top}" y2="{bottom}" stroke="#ff725c" '
            f'stroke-dasharray="4 3"><title>change at {c:g} s</title></line>'
        )
    color = _svg.PALETTE[0]
    if dots:
        for a, b in zip(xs, ys, strict=True):
            body.append(
                f'<circle class="mark" data-kind="point" cx="{x(a):.1f}" cy="{y(b):.1f}" r="2" '
                f'fill="{color}" fill-opacity="0.5"><title>{a:.2f} s: {b:.1f}</title></circle>'
            )
    elif xs.size:  # a count holds until the next reading: drawn as steps
        steps = [(float(xs[0]), float(ys[0]))]
        for a, b in zip(xs[1:], ys[1:], strict=True):
            steps += [(float(a), steps[-1][1]), (float(a), float(b))]
        points = " ".join(f"{x(a):.1f},{y(b):.1f}" for a, b in steps)
        body.append(
            f'<polyline class="mark" data-kind="line" points="{points}" fill="none" '
            f'stroke="{color}" stroke-width="2"><title>{escape(unit)}</title></polyline>'
        )
    return _svg._svg(height, body, unit)


def curve(throughput: list[float | None], p95_ms: list[float | None], knee: int | None) -> str:
    """The sweep's steps joined in order of throughput, the knee ringed."""
    top, bottom, height = 10, 220, 270
    # (step index, throughput, p95) of the steps with both figures (None: not measured)
    pts = [
        (n, a, b)
        for n, (a, b) in enumerate(zip(throughput, p95_ms, strict=True))
        if a is not None and b is not None and math.isfinite(a) and math.isfinite(b)
    ]
    xs = [a for _, a, _ in pts] or [1.0]
    ys = [b for _, _, b in pts] or [1.0]
    xt, yt = _ticks(0.0, max(xs)), _ticks(0.0, max(ys))
    x = _svg._Scale(xt[0], xt[-1], 60, _svg.WIDTH - 24)
    y = _svg._Scale(yt[0], yt[-1], bottom, top)
    body = _svg._y_axis(y, yt, 60, _svg.WIDTH - 24, "p95 latency (ms)")
    body += _svg._x_axis(x, xt, top, bottom, "throughput (successful req/s)")
    line = " ".join(f"{x(a):.1f},{y(b):.1f}" for _, a, b in pts)
    body.append(f'<polyline points="{line}" fill="none" stroke="{_svg.PALETTE[0]}"/>')
    for n, a, b in pts:
        at_knee = n == knee
        body.append(
            f'<circle class="mark" data-kind="{"knee" if at_knee else "point"}" '
            f'cx="{x(a):.1f}" cy="{y(b):.1f}" r="{6 if at_knee else 3}" '
            f'fill="{_svg.PALETTE[2] if at_knee else _svg.PALETTE[0]}">'
            f"<title>{'knee: ' if at_knee else ''}{a:.1f} req/s, p95 {b:.1f} ms</title></circle>"
        )
    return _svg._svg(height, body, "sweep")


def _ticks(lo: float, hi: float) -> list[float]:
    """``nice_ticks``, one more where its last falls short of ``hi`` (213 -> ... 200, 250),
    so no point is drawn above the chart."""
    ticks = _svg.nice_ticks(lo, hi)
    if len(ticks) >= 2 and ticks[-1] < hi:
        ticks.append(ticks[-1] + ticks[1] - ticks[0])
    return ticks
