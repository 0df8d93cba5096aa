"""Thresholds: rules a run must hold, checked after it, the way CI gates on them (k6's idea).

Two kinds of rule share one grammar (whitespace allowed between tokens)::

    limit   METRIC OP VALUE UNIT      p95 < 500ms, error_rate < 1%, cost_per_1k_requests < $2
    change  METRIC OP SIGN VALUE UNIT p95 > +20% (from a baseline: ``gpubench compare`` only)

A limit is judged on the measured value, a change on the difference from a baseline; the sign
of a change is required, so one is never mistaken for the other. Where a rule is written says
which way it reads:

* in a plan's ``[thresholds]`` (and ``Threshold.parse``) a rule is what must **hold**:
  ``p95 = "< 500ms"`` passes while the p95 stays below 500 ms;
* after ``--fail-on`` a rule is what **fails**: ``--fail-on "p95>500ms"`` fails above 500 ms,
  ``--fail-on "p95>+20%"`` fails when the p95 grew by more than 20%.

Either way a ``Threshold`` stores the failing side (``op``), and a metric with no data to
judge (no cold start measured, no price in the plan, no successful request) fails its rule.
"""

from __future__ import annotations

import difflib
import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from .._base._errors import ConfigError

# metric -> (kind, description). kind decides the units a rule may use.
METRICS: dict[str, tuple[str, str]] = {
    "p50": ("duration", "median latency of successful requests (ms)"),
    "p90": ("duration", "90th percentile latency (ms)"),
    "p95": ("duration", "95th percentile latency (ms)"),
    "p99": ("duration", "99th percentile latency (ms)"),
    "mean": ("duration", "mean latency (ms)"),
    "cold_start.p50": ("duration", "median cold start, latency - inference time (ms)"),
    "cold_start.p95": ("duration", "95th percentile cold start (ms)"),
    "ttft.p50": ("duration", "median time to first byte/token (ms)"),
    "ttft.p95": ("duration", "95th percentile time to first byte/token (ms)"),
    "error_rate": ("fraction", "share of measured requests that did not succeed"),
    "throughput": ("rate", "successful requests per second over the runs' spans"),
    "cost_per_1k": ("usd", "estimated USD per 1,000 requests (the plan's prices)"),
}
# Other spellings of the same metrics: TOML keys cannot hold a dot without making a table.
ALIASES = {
    "cold_start_p50": "cold_start.p50",
    "cold_start_p95": "cold_start.p95",
    "ttft_p50": "ttft.p50",
    "ttft_p95": "ttft.p95",
    "cost_per_1k_requests": "cost_per_1k",
}
# units of a change (the gate's since 0.4) and of a limit, to the metric's base unit
_CHANGE_UNITS = {
    "duration": {"%": 1.0, "ms": 1.0, "s": 1000.0},
    "fraction": {"%": 1.0, "pp": 0.01},
    "rate": {"%": 1.0, "rps": 1.0},
    "usd": {"%": 1.0, "$": 1.0},
}
_LIMIT_UNITS = {
    "duration": {"ms": 1.0, "s": 1000.0, "m": 60_000.0, "h": 3_600_000.0},
    "fraction": {"%": 0.01},
    "rate": {"rps": 1.0},
    "usd": {"$": 1.0},
}
_RULE = re.compile(
    r"^\s*(?P<metric>[A-Za-z0-9_.]+)\s*(?P<op>[<>]=?|=+)?\s*(?P<sign>[+-])?\s*(?P<dollar>\$)?"
    r"\s*(?P<number>\d+(?:\.\d*)?|\.\d+)?\s*(?P<unit>[A-Za-z%$/]+)?\s*$"
)
# the metric keys a plan's [thresholds] takes (TOML keys: no dots)
_PLAN_KEYS = [k for k in METRICS if "." not in k and k != "cost_per_1k"] + list(ALIASES)
_FLIP = {"<": ">=", "<=": ">", ">": "<=", ">=": "<"}
ALL_FAILED = "every request failed"  # the rule every run has: see ThresholdRow


@dataclass(frozen=True, slots=True)
class Threshold:
    """One rule. ``op`` and ``limit`` say when it **fails**: ``value op limit``.

    ``change``: judged on the change from a baseline (``relative``: ``limit`` is a fraction,
    0.2 for +20%), else on the measured value. ``limit`` is in the metric's base unit (ms,
    fraction, requests/s, USD). ``target``: the one target it applies to (None: each).
    ``text`` is the rule as written; ``holds`` whether it was written as what must hold.
    """

    metric: str
    op: str
    limit: float
    relative: bool
    text: str
    change: bool = True
    target: str | None = None
    holds: bool = False

    @classmethod
    def parse(cls, text: str, *, target: str | None = None) -> Threshold:
        """A rule as a plan writes it, what must hold: ``Threshold.parse("p95 < 500ms")``."""
        return parse_rule(text, "threshold", holds=True, target=target)

    def fails(self, value: float) -> bool:
        """Whether ``value`` (the measurement, or the change) breaks the rule; NaN breaks it."""
        if math.isnan(value):
            return True
        return {
            ">": value > self.limit,
            ">=": value >= self.limit,
            "<": value < self.limit,
            "<=": value <= self.limit,
        }[self.op]

    def describe(self) -> str:
        """The rule as a person reads it in a table: what must hold, or what fails."""
        return self.text if self.holds else f"fail on {self.text}"


def metric_name(name: str) -> str | None:
    name = name.strip()
    name = ALIASES.get(name, name)
    return name if name in METRICS else None


def parse_rule(
    text: str, field: str, *, holds: bool, target: str | None = None, allow_change: bool = True
) -> Threshold:
    """One rule, strictly; a ``ConfigError`` names ``field`` and the fix.

    ``holds``: the rule says what must hold (a plan), else what fails (``--fail-on``).
    """
    rule = text.strip()
    m = _RULE.match(rule)
    raw_metric = m.group("metric") if m else re.split(r"[<>=\s]", rule, maxsplit=1)[0]
    metric = metric_name(raw_metric)
    if metric is None:
        names = [*METRICS, *ALIASES]
        close = difflib.get_close_matches(raw_metric, names, n=1)
        hint = f" (did you mean {close[0]}?)" if close else " (e.g. p95 < 500ms)"
        raise ConfigError(field, rule, f"a metric among: {', '.join(names)}{hint}")
    if m is None or m.group("op") not in _FLIP:
        raise ConfigError(
            field,
            rule,
            f"{raw_metric}>CHANGE, {raw_metric}<CHANGE or a limit like {raw_metric} < VALUE "
            "(operators: < <= > >=)",
        )
    op, kind = m.group("op"), METRICS[metric][0]
    if m.group("number") is None:
        raise ConfigError(field, rule, f"a number with a unit after '{op}', e.g. {_example(kind)}")
    unit = "$" if m.group("dollar") else m.group("unit")
    if m.group("dollar") and m.group("unit") not in (None, "$"):
        unit = None
    if unit in ("USD", "usd"):
        unit = "$"
    number = float(m.group("number"))
    if m.group("sign") is not None:  # a change from a baseline
        if not allow_change:
            raise ConfigError(
                field,
                rule,
                f"a limit (no sign), e.g. {raw_metric} < {_example(kind)}: a signed change "
                "needs a baseline, so it belongs to gpubench compare --fail-on",
            )
        if op not in (">", "<"):
            raise ConfigError(field, rule, f"{raw_metric}>CHANGE or {raw_metric}<CHANGE")
        units = _CHANGE_UNITS[kind]
        if unit not in units:
            raise ConfigError(field, rule, f"a unit for {metric}: one of {', '.join(units)}")
        value = number * (1 if m.group("sign") == "+" else -1)
        relative = unit == "%"
        limit = value / 100 if relative else value * units[unit]
        if holds:
            op = ">" if op == "<" else "<"  # "p95 < +20%" must hold: fails above
        return Threshold(metric, op, limit, relative, rule.replace(" ", ""), True, target, holds)
    units = _LIMIT_UNITS[kind]
    if unit not in units:
        signed = " (for a change from a baseline: a signed change, e.g. +20%)"
        raise ConfigError(
            field,
            rule,
            f"a unit for a limit on {metric}: one of {', '.join(units)}"
            + (signed if allow_change else ""),
        )
    limit = number * units[unit]
    if kind == "fraction" and limit > 1:  # "error_rate < 150%" would hold for every run
        raise ConfigError(field, rule, f"a share from 0% to 100%, e.g. {_example(kind)}")
    fail_op = _FLIP[op] if holds else op
    return Threshold(metric, fail_op, limit, False, _tidy(rule), False, target, holds)


def _tidy(rule: str) -> str:
    """``p95<500ms`` -> ``p95 < 500ms``: the way the table prints a limit."""
    m = _RULE.match(rule)
    assert m is not None
    value = ("$" if m.group("dollar") else "") + m.group("number") + (m.group("unit") or "")
    return f"{m.group('metric')} {m.group('op')} {value}"


def _example(kind: str) -> str:
    return {"duration": "500ms", "fraction": "1%", "rate": "10rps", "usd": "$2"}[kind]


def parse_fail_on(texts: str | Iterable[str], *, allow_change: bool = True) -> list[Threshold]:
    """``--fail-on`` rules (repeatable, or comma-separated in one): what fails the run."""
    rules = []
    for text in [texts] if isinstance(texts, str) else texts:
        for raw in text.split(","):
            if not raw.strip():
                raise ConfigError(
                    "--fail-on", text, 'rules separated by single commas: "p95>500ms,p99>1s"'
                )
            rules.append(parse_rule(raw, "--fail-on", holds=False, allow_change=allow_change))
    return rules


def plan_thresholds(table: Mapping[str, Any], targets: Iterable[str] = ()) -> list[Threshold]:
    """The rules of a plan's ``[thresholds]`` table; ``targets``: the plan's target names.

    ::

        [thresholds]
        p95 = "< 500ms"                             # METRIC = "OP VALUE", or a list of them
        rules = ["error_rate < 1%", "p99 < 2s"]     # whole rules
        [thresholds.fast]                           # a target's own rules, the same forms
        cold_start_p50 = "< 10s"
    """
    names = list(targets)
    rules: list[Threshold] = []
    for key, value in table.items():
        if isinstance(value, Mapping):
            if names and key not in names:
                raise ConfigError(
                    f"thresholds.{key}",
                    "(table)",
                    f"a target of this plan ({', '.join(names)}) or a metric = rule",
                )
            rules += _entries(value, f"thresholds.{key}", key)
        else:
            rules += _entries({key: value}, "thresholds", None)
    return rules


def _entries(table: Mapping[str, Any], where: str, target: str | None) -> list[Threshold]:
    rules = []
    for key, value in table.items():
        field = f"{where}.{key}"
        items = value if isinstance(value, list) else [value]
        # each rule of a list is named by its index: thresholds.rules[2]
        named = [f"{field}[{i}]" for i in range(len(items))] if isinstance(value, list) else [field]
        wrong = [i for i, v in enumerate(items) if not isinstance(v, str)]
        if not items or wrong:
            example = '["p95 < 500ms", "error_rate < 1%"]' if key == "rules" else '"< 500ms"'
            at, got = (named[wrong[0]], items[wrong[0]]) if wrong else (field, value)
            raise ConfigError(at, got, f"a rule string or a list of them, e.g. {example}")
        if key != "rules" and metric_name(key) is None:
            keys = [*_PLAN_KEYS, "rules"]
            close = difflib.get_close_matches(key, keys, n=1)
            hint = f"did you mean {close[0]!r}? " if close else ""
            also = "" if target is not None else ", or a table named after a target"
            raise ConfigError(field, value, f"{hint}one of {', '.join(keys)}{also}")
        for text, at in zip(items, named, strict=True):
            rule = text if key == "rules" else f"{key} {text}"
            try:
                parsed = parse_rule(rule, at, holds=True, target=target, allow_change=False)
            except ConfigError as exc:
                raise ConfigError(at, text, exc.expected) from None
            rules.append(replace(parsed, text=_tidy(rule)))
    return rules


def format_value(metric: str, value: float) -> str:
    if math.isnan(value):
        return "-"
    kind = METRICS[metric][0]
    if kind == "duration":
        return f"{value / 1000:.2f} s" if abs(value) >= 10_000 else f"{value:.1f} ms"
    if kind == "fraction":
        return f"{value * 100:.2f}%"
    if kind == "rate":
        return f"{value:.2f}/s"
    return f"${value:.4f}"


# -- checking a stored run ----------------------------------------------------------------

# The rule every run has, per target and scenario, unless a plan turns it off: a target that
# answered no request at all is a failed benchmark, whatever else was asked.
SOME_REQUEST_SUCCEEDS = Threshold(
    "error_rate", ">=", 1.0, False, "some request succeeds", False, None, True
)


@dataclass(frozen=True, slots=True)
class ThresholdRow:
    """One rule judged on one target (all its measured requests, or one scenario)."""

    target: str
    scenario: str  # "all", or "INDEX:KIND" for the per-scenario default rule
    rule: Threshold
    value: float  # NaN: nothing to judge, which fails the rule
    passed: bool
    note: str = ""

    @property
    def verdict(self) -> str:
        return "PASS" if self.passed else "FAIL"

    @property
    def shown(self) -> str:
        return format_value(self.rule.metric, self.value)


@dataclass(frozen=True, slots=True)
class ThresholdReport:
    run_id: int
    rows: tuple[ThresholdRow, ...]

    @property
    def failed(self) -> list[ThresholdRow]:
        return [r for r in self.rows if not r.passed]

    @property
    def passed(self) -> bool:
        return not self.failed
