"""Judging a stored run by its rules: the plan's ``[thresholds]``, ``--fail-on`` limits, and the
rule every run has (some request succeeds), per target, from the same per-target samples the
campaign gate reads (``_sides.read_sample``, ``_gate.point``).

Here, above the rule grammar (``_thresholds``) and beside the gate, because judging reads
stored runs; the grammar itself is part of the plan and knows nothing of stores."""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

from .._base._errors import ConfigError
from .._base._types import Outcome
from .._plan._thresholds import (
    SOME_REQUEST_SUCCEEDS,
    Threshold,
    ThresholdReport,
    ThresholdRow,
    plan_thresholds,
)
from ._gate import point
from ._sides import read_sample

_NO_DATA = {
    "cold_start": "no cold start measured",
    "ttft": "no first byte or token measured",
    "cost_per_1k": "no price in the plan (price_sku or price_per_s_usd)",
}


def check_thresholds(
    store: Any,
    run: int | str = "latest",
    rules: Iterable[Threshold] | None = None,
    *,
    default: bool = True,
) -> ThresholdReport:
    """Judge a stored run (``Store``, run id/uuid/'latest') by ``rules``.

    ``rules`` defaults to the plan's ``[thresholds]`` as stored with the run; pass more (e.g.
    ``parse_fail_on(...)``) to add to them. Each rule is judged per target, over all of its
    measured requests; with ``default``, each target and scenario must also have at least one
    successful request. A metric that cannot be measured fails its rule, with a note saying why.
    """
    info = store.run(run)
    names = [t.name for t in info.targets]
    given = list(rules) if rules is not None else []
    stored = info.config.get("thresholds") or {}
    todo = plan_thresholds(stored, names) + given
    for r in todo:
        if r.change:
            raise ConfigError(
                "--fail-on", r.text, "a limit (no sign): a change needs gpubench compare"
            )
    rows: list[ThresholdRow] = []
    with_cost = any(r.metric == "cost_per_1k" for r in todo)
    for target in names:
        mine = [r for r in todo if r.target in (None, target)]
        if mine:
            sample = read_sample(store, (info.id,), target, with_cost=with_cost)
            for r in mine:
                value = point(r.metric, sample)
                note = _why_no_data(r.metric, sample) if math.isnan(value) else ""
                rows.append(ThresholdRow(target, "all", r, value, not r.fails(value), note))
        if default:
            rows += _all_failed_rows(store, info, target)
    return ThresholdReport(info.id, tuple(rows))


def _why_no_data(metric: str, sample: Any) -> str:
    if not sample.requests:
        return "no request measured"
    if sample.failed == sample.requests and metric != "cost_per_1k":
        return "no successful request"
    return _NO_DATA.get(metric.split(".")[0], "nothing to measure it on")


def _all_failed_rows(store: Any, info: Any, target: str) -> list[ThresholdRow]:
    rows = []
    measured = 0
    for i, scenario in enumerate(info.scenarios):
        outcome = store.columns(info.id, target=target, scenario=i)["outcome"]
        if not outcome.size:
            continue  # not reached (a budget or Ctrl-C stopped the run first): the status says
        measured += int(outcome.size)
        ok = int((outcome == Outcome.OK.code).sum())
        rate = 1 - ok / outcome.size
        passed = not SOME_REQUEST_SUCCEEDS.fails(rate)
        note = "" if passed else f"0 of {outcome.size} requests succeeded"
        rows.append(
            ThresholdRow(target, f"{i}:{scenario.kind}", SOME_REQUEST_SUCCEEDS, rate, passed, note)
        )
    if not measured:
        rows.append(
            ThresholdRow(
                target, "all", SOME_REQUEST_SUCCEEDS, math.nan, False, "no request measured"
            )
        )
    return rows
