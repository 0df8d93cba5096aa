"""``gpubench advise`` as a page of the HTML report, drawn from the advice's JSON
(``Advice.to_json``): so ``gpubench advise --html`` and ``gpubench report --advice FILE`` show
the same thing.

The page: the inputs (traffic, objectives, what was measured per target), the recommendation
in a sentence, the warnings, the cost/latency frontier chart and the options table. In the
chart every option is a point at its median daily cost (x) and median latency percentile (y)
with its 5-95% ranges over the resamples as whiskers on both axes; the frontier's points are
joined, the objective's latency is a dashed line, the recommendation and the runner-up are
ringed. Every point is ``class="mark" data-kind="option"`` with its figures in ``data-`` fields.
"""

from __future__ import annotations

from collections.abc import Mapping
from html import escape
from typing import TYPE_CHECKING, Any

from ._format import figure
from ._style import CSS
from ._svg import (
    PALETTE,
    WIDTH,
    _f,
    _legend,
    _plot,
    _Scale,
    _svg,
    _x_axis,
    _y_axis,
    nice_ticks,
)

if TYPE_CHECKING:
    from ._read import Report

_FRONTIER, _OTHER, _PICK, _SECOND = PALETTE[0], "#9498a0", PALETTE[2], PALETTE[1]
_GOAL = "#4a4f57"  # the objective's line: its own colour, not the recommendation's


def _key(o: dict[str, Any]) -> str:
    return str(o["label"])


def frontier_chart(data: dict[str, Any]) -> str:
    """The cost/latency chart of every option (an SVG)."""
    options: list[dict[str, Any]] = data["options"]
    goal_ms = float(data["objectives"]["latency_ms"])
    q = f"p{data['objectives']['latency_percentile']:g}"
    pick = data.get("recommended") or {}
    second = data.get("runner_up") or {}
    top, bottom, left, right, height = 14, 300, 70, WIDTH - 24, 372
    costs = [v for o in options for v in o["cost_usd_per_day"].values()] or [1.0]
    lats = [v for o in options for v in o["latency_ms"].values()] + [goal_ms]
    xt = nice_ticks(min(0.0, min(costs)), max(costs))
    yt = nice_ticks(min(0.0, min(lats)), max(lats))
    x = _Scale(xt[0], xt[-1], left, right)
    y = _Scale(yt[0], yt[-1], bottom, top)
    body = _y_axis(y, yt, left, right, f"{q} latency (ms)")
    body += _x_axis(x, xt, top, bottom, "cost (USD per day)")
    body.append(_plot(left, top, right, bottom))
    gy = _f(y(goal_ms))
    body.append(
        f'<line class="objective" x1="{_f(left)}" x2="{_f(right)}" y1="{gy}" y2="{gy}" '
        f'stroke="{_GOAL}" stroke-dasharray="6 4"><title>objective: {q} &lt;= '
        f"{goal_ms:,.0f} ms</title></line>"
        f'<text x="{_f(right - 4)}" y="{_f(y(goal_ms) - 4)}" text-anchor="end" '
        f'fill="{_GOAL}">objective {goal_ms:,.0f} ms</text>'
    )
    front = sorted(
        (o for o in options if o["frontier"]), key=lambda o: o["cost_usd_per_day"]["median"]
    )
    if len(front) > 1:
        points = " ".join(
            f"{_f(x(o['cost_usd_per_day']['median']))},{_f(y(o['latency_ms']['median']))}"
            for o in front
        )
        body.append(
            f'<polyline class="frontier" points="{points}" fill="none" stroke="{_FRONTIER}" '
            'stroke-width="2"/>'
        )
    for o in options:
        c, lat = o["cost_usd_per_day"], o["latency_ms"]
        cx, cy = x(c["median"]), y(lat["median"])
        color = _FRONTIER if o["frontier"] else _OTHER
        tip = escape(
            f"{o['label']}: ${c['median']:,.2f}/day ({c['p5']:,.2f}-{c['p95']:,.2f}), {q} "
            f"{lat['median']:,.0f} ms ({lat['p5']:,.0f}-{lat['p95']:,.0f}), meets all in "
            f"{o['p_meets_all']['share']:.0%}"
        )
        body.append(
            f'<line class="mark" data-kind="whisker-cost" x1="{_f(x(c["p5"]))}" '
            f'x2="{_f(x(c["p95"]))}" y1="{_f(cy)}" y2="{_f(cy)}" stroke="{color}"/>'
            f'<line class="mark" data-kind="whisker-latency" x1="{_f(cx)}" x2="{_f(cx)}" '
            f'y1="{_f(y(lat["p5"]))}" y2="{_f(y(lat["p95"]))}" stroke="{color}"/>'
            f'<circle class="mark" data-kind="option" data-label="{escape(o["label"])}" '
            f'data-cost="{c["median"]!r}" data-latency="{lat["median"]!r}" '
            f'data-frontier="{str(o["frontier"]).lower()}" cx="{_f(cx)}" cy="{_f(cy)}" r="4" '
            f'fill="{color}"><title>{tip}</title></circle>'
        )
        for chosen, cls, ring in ((pick, "recommended", _PICK), (second, "runner-up", _SECOND)):
            if chosen and _key(chosen) == _key(o):
                # the pick's name above its point, the runner-up's below: never on each other
                ty = cy - 12 if cls == "recommended" else cy + 22
                body.append(
                    f'<circle class="{cls}" cx="{_f(cx)}" cy="{_f(cy)}" r="9" fill="none" '
                    f'stroke="{ring}" stroke-width="2.5"><title>{cls}</title></circle>'
                    f'<text x="{_f(cx)}" y="{_f(ty)}" text-anchor="start" fill="{ring}">'
                    f"{cls}</text>"
                )
    legend = [
        ("frontier (not dominated)", _FRONTIER),
        ("dominated", _OTHER),
        ("recommended", _PICK),
        ("runner-up", _SECOND),
        (f"objective ({q})", _GOAL),
    ]
    body += _legend(legend, height - 7, left)  # g.legend: the tests match colours to it
    return _svg(height, body, "cost/latency frontier of the options")


def _span(v: dict[str, float] | None, fmt: str, scale: float = 1.0) -> str:
    if v is None:
        return "-"
    return (
        f"{format(v['median'] * scale, fmt)} "
        f"({format(v['p5'] * scale, fmt)}-{format(v['p95'] * scale, fmt)})"
    )


def _inputs(data: dict[str, Any]) -> str:
    obj = data["objectives"]
    goals = [f"p{obj['latency_percentile']:g} latency &lt;= {obj['latency_ms']:,.0f} ms"]
    if obj.get("ttft_ms") is not None:
        goals.append(f"TTFT p{obj['ttft_percentile']:g} &lt;= {obj['ttft_ms']:,.0f} ms")
    if obj.get("max_cold_rate") is not None:
        goals.append(f"cold-start rate &lt;= {obj['max_cold_rate']:.1%}")
    if obj.get("budget_usd_per_day") is not None:
        goals.append(f"budget &lt;= ${obj['budget_usd_per_day']:,.2f}/day")
    rows = "".join(
        f'<tr><td class="l">{escape(t["name"])}</td><td class="l">{escape(t["provider"])}</td>'
        f"<td>{t['executions']:,}</td><td>{t['cold_starts']:,}</td><td>{t['ttfts']:,}</td>"
        f'<td class="l">{escape(", ".join(map(str, t["runs"])) or "-")}</td>'
        f"<td>{t['rate_usd_per_s']:.6g}</td><td>{t['billing_granularity_s']:g}</td>"
        f'<td class="l">{escape(t["worker_policy"])}</td></tr>'
        for t in data.get("targets", [])
    )
    head = (
        '<tr><th class="l">target</th><th class="l">provider</th><th>executions</th>'
        '<th>cold starts</th><th>TTFTs</th><th class="l">runs</th><th>USD/s</th>'
        '<th>billed per (s)</th><th class="l">worker policy</th></tr>'
    )
    traffic = data["traffic"]
    return (
        "<h3>Inputs</h3>"
        f"<p>Traffic: {escape(str(traffic.get('description') or ''))}. "
        f"Objectives (each met in at least {data['confidence']:.0%} of "
        f"{data['resamples']} resamples): {'; '.join(goals)}.</p>"
        f'<div class="scroll"><table>{head}{rows}</table></div>'
    )


def _warnings(data: dict[str, Any]) -> str:
    out = []
    if not data["meets_objectives"]:
        out.append("No option met every objective with the confidence asked for.")
    unsettled = data.get("unsettled_by")
    if unsettled is not None:
        out.append(
            f"Unstable pick: {unsettled['label']} ranks above it and met every objective in "
            f"{unsettled['p_meets_all']['share']:.0%} of the resamples, neither ruled in nor "
            f"out; about {data['more_cold_starts']:,} cold starts of {unsettled['target']} in "
            f"all (now {data['cold_starts_measured']:,}) would settle it"
            + (
                f", or about {data['more_days']:,} days of campaign in all (now "
                f"{data['days_measured']:,})."
                if data.get("more_days") is not None
                else "."
            )
        )
    else:
        out.append("Stable: no option ranked above the pick is left undecided by the resamples.")
    items = "".join(
        f'<li class="{"note" if w.startswith(("Unstable", "No option")) else "l"}">{escape(w)}</li>'
        for w in out
    )
    notes = "".join(f"<li>{escape(n)}</li>" for n in data.get("notes", []))
    return f"<h3>Warnings and notes</h3><ul class='review'>{items}{notes}</ul>"


def _options(data: dict[str, Any]) -> str:
    obj = data["objectives"]
    q = f"p{obj['latency_percentile']:g}"
    names = list(data["options"][0]["p_meets"]) if data["options"] else []
    names = names if len(names) > 1 else []  # one objective: "meets all" says it
    ttft = obj.get("ttft_ms") is not None
    scored = data.get("scoring") is not None
    cols = ["", "option", "$/day (5-95%)", f"{q} ms (5-95%)"]
    cols += [f"TTFT p{obj['ttft_percentile']:g} ms (5-95%)"] if ttft else []
    cols += ["cold rate (5-95%)"] + [f"meets {n}" for n in names] + ["meets all (90% CI)"]
    cols += ["score"] if scored else []
    pick, second = data.get("recommended") or {}, data.get("runner_up") or {}
    rows = []
    for o in data["options"]:
        mark = "* " if pick and _key(o) == _key(pick) else ""
        mark += "2 " if second and _key(o) == _key(second) else ""
        mark += "f" if o["frontier"] else ""
        cells = [mark, o["label"], _span(o["cost_usd_per_day"], ",.2f")]
        cells.append(_span(o["latency_ms"], ",.0f"))
        if ttft:
            cells.append(_span(o["ttft_ms"], ",.0f"))
        cells.append(_span(o["cold_rate"], ".1%"))
        cells += [f"{o['p_meets'][n]['share']:.0%}" for n in names]
        a = o["p_meets_all"]
        cells.append(f"{a['share']:.0%} ({a['low']:.0%}-{a['high']:.0%})")
        if scored:
            cells.append(f"{o['score']['score']:.2f}" if o.get("score") else "-")
        wrap = '<td class="l" style="white-space:normal;min-width:14em">'
        left = ['<td class="l">', wrap] + ["<td>"] * (len(cells) - 2)
        rows.append(
            "<tr>"
            + "".join(f"{td}{escape(c)}</td>" for td, c in zip(left, cells, strict=True))
            + "</tr>"
        )
    head = "".join(f"<th{' class=l' if i < 2 else ''}>{escape(c)}</th>" for i, c in enumerate(cols))
    legend = (
        "<p>* recommended, 2 runner-up, f on the frontier. Figures are the median over the "
        "resamples with the 5-95% range; 'meets' is the share of resamples meeting that "
        "objective.</p>"
    )
    table = f"<table><tr>{head}</tr>{''.join(rows)}</table>"
    return f'<h3>Options</h3>{legend}<div class="scroll">{table}</div>'


def _scoring(data: dict[str, Any]) -> str:
    scoring = data.get("scoring")
    if scoring is None:
        return ""
    weights = scoring["weights"]
    named = ", ".join(f"{k}={v:g}" for k, v in (weights or {}).items())
    how = (
        f"Weights {named} (criteria not named weigh 0) rank the options that meet every objective."
        if scoring["ranks"]
        else "Every criterion weighs 1; the scores are shown, the ranking stays cheapest first."
    )
    crit = "".join(
        f"<li>{escape(name)}: {escape(', '.join(f'{k} {v:g}' for k, v in values.items()))}</li>"
        for name, values in scoring["criteria"].items()
    )
    return (
        "<h3>Weighted score</h3><p>Each criterion is normalised min-max over every option onto "
        "0-1, 1 the best (cost, latency, cold rate and TTFT: lower is better; user criteria: "
        f"higher is better); the score is the weighted mean. {escape(how)}</p>"
        + (f"<ul class='review'>{crit}</ul>" if crit else "")
    )


def advice_section(data: dict[str, Any], level: str = "h2") -> str:
    """The advice as a section of a report page (``data``: ``Advice.to_json()``)."""
    verdict = escape(data["reason"])
    chart = figure(
        "advise-frontier",
        frontier_chart(data),
        "Every option at its median cost and latency percentile, whiskers the 5-95% range "
        "over the resamples; the frontier's options (no other is cheaper and faster) are "
        "joined; dashed: the latency objective.",
    )
    return (
        f"<{level}>Advice: provider and scaling settings</{level}>"
        f'<p class="verdict">{verdict}</p>'
        + _inputs(data)
        + _warnings(data)
        + chart
        + _options(data)
        + _scoring(data)
    )


def advice_page(data: dict[str, Any], title: str = "gpubench advise") -> str:
    """A standalone page in the report's style (no script, no external URL)."""
    csp = "default-src 'none'; style-src 'unsafe-inline'; img-src data:"
    return (
        '<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">'
        f'<meta http-equiv="Content-Security-Policy" content="{csp}">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{escape(title)}</title><style>{CSS}</style></head>"
        f"<body><h1>{escape(title)}</h1>{advice_section(data)}</body></html>\n"
    )


_REQUIRED = ("options", "objectives", "traffic", "reason", "recommended", "resamples")
_FIX = "the JSON that `gpubench advise ... --json > FILE` writes (Advice.to_json())"


def _check(data: Any, where: str) -> dict[str, Any]:
    from .._base._errors import ConfigError
    from ._advice_file import advice_problem

    missing = [k for k in _REQUIRED if not isinstance(data, Mapping) or k not in data]
    if missing:
        raise ConfigError("--advice", where, f"{_FIX} (missing {', '.join(missing)})")
    problem = advice_problem(data)
    if problem is not None:
        raise ConfigError("--advice", where, f"{_FIX}; in it, {problem}")
    return dict(data)


def read_advice(path: str) -> dict[str, Any]:
    """The advice saved by ``gpubench advise ... --json > FILE``, checked to be one."""
    import json
    from pathlib import Path

    from .._base._errors import ConfigError

    try:
        data = json.loads(Path(path).read_text(encoding="utf-8-sig"))
    except OSError as exc:
        raise ConfigError("--advice", path, f"a readable file ({exc.strerror}): {_FIX}") from None
    except ValueError as exc:
        raise ConfigError("--advice", path, f"valid JSON ({exc}): {_FIX}") from None
    return _check(data, path)


def attach_advice(report: Report, advice: Mapping[str, Any]) -> None:
    """Put ``advice`` (``Advice.to_json()``) in ``report``: whole for the HTML page and the
    JSON, and as the ``advice`` table (one row per option) that CSV and Markdown print."""
    data = _check(advice, "advice")
    report.advice = data
    pick = (data.get("recommended") or {}).get("label")
    second = (data.get("runner_up") or {}).get("label")
    rows = report.table("advice")
    for o in data["options"]:
        c, lat, share = o["cost_usd_per_day"], o["latency_ms"], o["p_meets_all"]
        rows.append(
            {
                "option": o["label"],
                "choice": "recommended" if o["label"] == pick else
                "runner-up" if o["label"] == second else "",
                "frontier": o["frontier"],
                "usd_per_day": c["median"],
                "usd_per_day_p5": c["p5"],
                "usd_per_day_p95": c["p95"],
                "latency_ms": lat["median"],
                "latency_p5_ms": lat["p5"],
                "latency_p95_ms": lat["p95"],
                "cold_rate": o["cold_rate"]["median"],
                "ttft_ms": (o.get("ttft_ms") or {}).get("median"),
                "p_meets_all": share["share"],
                "score": (o.get("score") or {}).get("score"),
            }
        )  # fmt: skip
