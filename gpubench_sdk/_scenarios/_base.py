"""What every scenario is: the ``Scenario`` base a built-in or third-party kind subclasses, and the
checks their ``__post_init__`` share so a bad plan names its field.

A shape is plain data (a frozen dataclass, validated by pydantic from its plan TOML table) plus
``drive``, which schedules its requests through a ``Load`` (``._load``, implemented by the
runner): the runner's own send path, so storage, progress, the budget and thresholds hold for
every shape.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Mapping
from dataclasses import replace
from typing import TYPE_CHECKING, Annotated, Any, ClassVar

from pydantic import ConfigDict, Strict

from .._base._errors import ConfigError
from .._base._types import REQUESTED, Request

if TYPE_CHECKING:
    from ._load import Load

# Plans are validated by building these dataclasses through pydantic: unknown fields are refused.
STRICT = ConfigDict(extra="forbid", allow_inf_nan=False)
# A count from a plan must be an integer: `concurrency = true` is refused, not read as 1.
Count = Annotated[int, Strict()]

# Bounds that only an absurd plan passes (a typo, a unit mistake): refused with the field
# named instead of running for years or hanging while the schedule is built.
MAX_REQUESTS = 1_000_000_000
"""Most requests one scenario may plan per target (a day at 10,000 req/s is 864 million)."""
MAX_RPS = 1_000_000.0
"""Most requests per second a ``Rate`` may ask for (beyond any one client machine)."""
MAX_DURATION_S = 30 * 86_400.0
"""Longest ``Rate.duration_s``, ``deadline_s`` and other waits: 30 days."""
MAX_CONCURRENCY = 1_000_000
"""Most requests in flight a scenario may ask for per target (each needs an open socket)."""
DEFAULT_MAX_INFLIGHT = 10_000
"""``Rate.max_inflight`` when the plan sets none (lowered to what the open-files limit holds)."""
SEQ_BLOCK = MAX_REQUESTS
"""A shape that runs in steps (sweep, max_rate) numbers step ``j``'s requests from
``j * SEQ_BLOCK``, so every request says which step it belonged to: ``seq // SEQ_BLOCK``."""


def check(cond: bool, field: str, value: Any, expected: str) -> None:
    """Raise ``ConfigError(field, value, expected)`` unless ``cond``: the plan's error names
    ``field`` (write it as ``"<kind>.<field>"``; the plan adds ``scenarios[i].``)."""
    if not cond:
        raise ConfigError(field, value, expected)


def finite(value: float | None) -> bool:
    """TOML and Python both allow inf and nan; no duration or rate here may be either."""
    return value is None or math.isfinite(value)


def check_deadline(kind: str, deadline_s: float | None) -> None:
    check(
        deadline_s is None or (finite(deadline_s) and 0 < deadline_s <= MAX_DURATION_S),
        f"{kind}.deadline_s",
        deadline_s,
        f"seconds > 0 (at most {MAX_DURATION_S:.0f}), or no deadline_s for none",
    )


def check_count(field: str, value: int, low: int, high: int) -> None:
    check(low <= value <= high, field, value, f"an integer >= {low}, at most {high:,}")


def check_seconds(field: str, value: float, *, zero_ok: bool = False) -> None:
    ok = finite(value) and (value >= 0 if zero_ok else value > 0) and value <= MAX_DURATION_S
    check(ok, field, value, f"seconds {'>=' if zero_ok else '>'} 0, at most {MAX_DURATION_S:.0f}")


def check_rps(field: str, value: float, *, zero_ok: bool = False) -> None:
    ok = finite(value) and (value >= 0 if zero_ok else value > 0) and value <= MAX_RPS
    low = ">= 0" if zero_ok else "> 0"
    check(ok, field, value, f"requests per second {low}, at most {MAX_RPS:,.0f}")


def check_name(kind: str, name: str | None) -> None:
    check(
        name is None or (0 < len(name) <= 100 and name.isprintable()),
        f"{kind}.name",
        name,
        "a short printable label (1-100 characters), or no name for the default '<kind>-<index>'",
    )


def check_max_inflight(kind: str, max_inflight: int | None) -> None:
    """An open loop's ``max_inflight``: unset (the default bound) or 1 to ``MAX_CONCURRENCY``."""
    if max_inflight is not None:
        check_count(f"{kind}.max_inflight", max_inflight, 1, MAX_CONCURRENCY)


PROMPT_TOKENS = "prompt_tokens"
"""A per-request field that sizes the prompt (words) instead of joining the body."""
MAX_TOKENS = "max_tokens"
"""The body field an LLM request's output length goes in (also its ``max_output_tokens``)."""


def with_fields(request: Request, fields: Mapping[str, Any]) -> Request:
    """``request`` with ``fields`` merged into its body. ``prompt_tokens = n`` makes the body's
    ``prompt`` n words long (the workload's own words, cycled, so it stays the workload's kind
    of text); ``max_tokens`` also sets the request's ``max_output_tokens`` hint."""
    payload = dict(request.payload)
    body = {k: v for k, v in fields.items() if k != PROMPT_TOKENS}
    payload.update(body)
    prompt_tokens = request.prompt_tokens
    n = fields.get(PROMPT_TOKENS)
    if isinstance(n, int) and n > 0:
        words = str(payload.get("prompt") or "lorem").split() or ["lorem"]
        payload["prompt"] = " ".join(words[i % len(words)] for i in range(n))
        prompt_tokens = n
    out = request.max_output_tokens
    if isinstance(body.get(MAX_TOKENS), int):
        out = body[MAX_TOKENS]
    detail = request.detail
    if (prompt_tokens, out) != (request.prompt_tokens, request.max_output_tokens):
        # the lengths this request asked for, stored with it as a drawn length is
        asked = {PROMPT_TOKENS: prompt_tokens, MAX_TOKENS: out}
        detail = {**(detail or {}), REQUESTED: asked}
    return replace(
        request, payload=payload, prompt_tokens=prompt_tokens, max_output_tokens=out, detail=detail
    )


class Scenario:
    """A scenario kind: subclass it as a frozen dataclass with ``kind``, ``name`` and
    ``deadline_s`` fields, and register it under the ``gpubench.scenarios`` entry point.

    ``planned`` and ``inflight`` size progress bars and the open-files check before anything
    is sent; ``drive`` sends the requests through the ``Load`` it is given (every target, this
    process's share of the schedule). Validate in ``__post_init__`` with ``check(...)`` naming
    ``"<kind>.<field>"``: a plan's error then reads ``scenarios[i].<kind>.<field>``; what
    depends on the targets (a capability the shape needs) in ``check_targets``.
    """

    __slots__ = ()
    __pydantic_config__ = STRICT  # unknown plan keys are refused, with the closest valid one
    kind: ClassVar[str]
    if TYPE_CHECKING:  # every shape declares these as dataclass fields (defaults None)
        name: str | None
        deadline_s: float | None

    def check_label(self) -> None:
        """Check the fields every shape has: ``deadline_s`` and ``name``."""
        check_deadline(self.kind, self.deadline_s)
        check_name(self.kind, self.name)

    def label(self, index: int) -> str:
        """Its ``name``, or ``"<kind>-<index>"``: what reports, spans and metrics call it."""
        return self.name or f"{self.kind}-{index}"

    def planned(self, targets: int) -> int:
        """Requests planned over all ``targets`` (an estimate where the shape adapts)."""
        raise NotImplementedError

    def inflight(self) -> int:
        """Most requests in flight at once per target (an open socket each)."""
        raise NotImplementedError

    def inflight_adapts(self) -> bool:
        """Whether ``inflight()`` adapts to the open-files limit rather than being fixed by the
        plan: an open loop whose ``max_inflight`` is unset (``Load.open_loop`` then holds to
        what the limit allows). Such a shape is left out of the open-files check."""
        return getattr(self, "max_inflight", 0) is None

    def inflight_field(self) -> str:
        """The field bounding ``inflight()``: what the open-files check asks to lower."""
        return "max_inflight" if hasattr(self, "max_inflight") else "concurrency"

    def check_targets(self, capabilities: Mapping[str, Collection[str]]) -> None:
        """Refuse (``ConfigError`` naming ``"<kind>.<field>"``) a plan this shape cannot run on
        these targets, given each one's capability names (``Capabilities.names()``), before
        anything is sent. Any targets will do unless a kind says otherwise."""

    async def drive(self, load: Load) -> None:
        """Send this scenario's requests through ``load``."""
        raise NotImplementedError(f"scenario kind {self.kind!r} has no drive()")
