"""Latency grouped by what each request asked for: by a conversation's turn, and by prompt
length. Pure functions over invocations (``Store.invocations``, or a live observer's list).

A chat's later turns resend a longer history, so their prefill (TTFT) grows with the
context; a length distribution's long prompts take longer than its short ones. A single p50
over such a run describes no request: these tables split it by the cause.

Definitions (``docs/metrics.md``): latency is from the scheduled send to the last byte; TTFT is
from the scheduled send to the first streamed token, or to the first byte where nothing was
streamed; a request's prompt length is what it asked for (its detail's ``requested``), else
what was counted (``input_units``). Percentiles are linear, over successful requests only.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .._base._types import Invocation, Phase
from ._stats import percentile

_NAN = float("nan")
DEFAULT_LENGTH_EDGES = (0, 128, 256, 512, 1024, 2048, 4096, 8192, 16384, 32768, 65536, 131072)
"""Prompt-length bucket edges (tokens): ``[0, 128)``, ``[128, 256)``, ... doubling."""


@dataclass(frozen=True, slots=True)
class LatencyGroup:
    """One group's requests: ``label`` names it (``turn 3``, ``256-511 tokens``)."""

    label: str
    key: int
    requests: int  # successful
    errors: int
    prompt_tokens_p50: float
    latency_p50_ms: float
    latency_p95_ms: float
    ttft_p50_ms: float
    ttft_p95_ms: float
    cached_share: float = _NAN
    """The share of the prompt tokens the server served from its prefix cache, over the
    successful requests whose provider reported it (``detail["cached_tokens"]``); NaN where
    none did."""


def prompt_tokens(inv: Invocation) -> float:
    """The prompt length ``inv`` asked for (its detail's ``requested``), else its counted
    input; NaN where neither is known."""
    asked = (inv.detail or {}).get("requested")
    if isinstance(asked, dict) and isinstance(asked.get("prompt_tokens"), int | float):
        return float(asked["prompt_tokens"])
    return _NAN if inv.input_units is None else float(inv.input_units)


def ttft_ms(inv: Invocation) -> float:
    """Scheduled send to the first streamed token, or to the first byte; NaN if neither."""
    if inv.token_times_ns:
        return (inv.token_times_ns[0] - inv.scheduled_ns) / 1e6
    first = inv.ttfb_ms
    return _NAN if first is None else first


def by_turn(invocations: Iterable[Invocation]) -> list[LatencyGroup]:
    """A conversation workload's requests (``chat``) grouped by turn (1 = a session's first),
    in turn order; requests without a turn are left out."""

    def turn(inv: Invocation) -> int | None:
        value = (inv.detail or {}).get("turn")
        return value if isinstance(value, int) and not isinstance(value, bool) else None

    return _groups(invocations, turn, lambda t: f"turn {t + 1}")


def by_shared_prefix(invocations: Iterable[Invocation]) -> list[LatencyGroup]:
    """Requests with and without the workload's shared prefix (``shared_prefix_tokens``):
    ``no shared prefix`` (key 0) then ``shared prefix`` (key 1), where present."""

    def prefixed(inv: Invocation) -> int | None:
        value = (inv.detail or {}).get("shared_prefix")
        return int(value) if isinstance(value, bool) else None

    return _groups(invocations, prefixed, lambda k: "shared prefix" if k else "no shared prefix")


def by_batch_size(invocations: Iterable[Invocation]) -> list[LatencyGroup]:
    """An embeddings workload's requests grouped by how many texts each carried (its
    detail's ``requested.inputs``) in doubling buckets, ``1 text``, ``2-3 texts``, ``4-7
    texts``..., smallest first: a batch's latency grows with its tokens, and a table of every
    size from 1 to 2,048 would hide that."""

    def bucket(inv: Invocation) -> int | None:
        asked = (inv.detail or {}).get("requested")
        value = asked.get("inputs") if isinstance(asked, dict) else None
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            return None
        return value.bit_length() - 1  # 1 -> 0, 2-3 -> 1, 4-7 -> 2

    def label(k: int) -> str:
        return "1 text" if k == 0 else f"{1 << k}-{(2 << k) - 1} texts"

    return _groups(invocations, bucket, label)


def by_prompt_length(
    invocations: Iterable[Invocation], edges: Sequence[int] = DEFAULT_LENGTH_EDGES
) -> list[LatencyGroup]:
    """Requests grouped into prompt-length buckets ``[edges[i], edges[i + 1])`` (the last one
    open-ended), in length order; only the buckets that hold requests are returned."""
    if list(edges) != sorted(set(edges)) or not edges:
        raise ValueError(f"edges must be distinct and ascending, got {list(edges)}")

    def bucket(inv: Invocation) -> int | None:
        n = prompt_tokens(inv)
        if math.isnan(n) or n < edges[0]:
            return None
        return max(i for i, e in enumerate(edges) if n >= e)

    def label(i: int) -> str:
        high = f"-{edges[i + 1] - 1}" if i + 1 < len(edges) else "+"
        return f"{edges[i]}{high} tokens"

    return _groups(invocations, bucket, label)


def _groups(
    invocations: Iterable[Invocation],
    key: Callable[[Invocation], int | None],
    label: Callable[[int], str],
) -> list[LatencyGroup]:
    members: dict[int, list[Invocation]] = {}
    for inv in invocations:
        if inv.phase is not Phase.MEASURE:
            continue
        k = key(inv)
        if k is not None:
            members.setdefault(k, []).append(inv)
    out = []
    for k in sorted(members):
        invs = members[k]
        ok = [i for i in invs if i.ok]
        latency = [i.latency_ms for i in ok]
        ttft = [ttft_ms(i) for i in ok]
        out.append(
            LatencyGroup(
                label=label(k),
                key=k,
                requests=len(ok),
                errors=len(invs) - len(ok),
                prompt_tokens_p50=percentile([prompt_tokens(i) for i in invs], 0.5),
                latency_p50_ms=percentile(latency, 0.5),
                latency_p95_ms=percentile(latency, 0.95),
                ttft_p50_ms=percentile(ttft, 0.5),
                ttft_p95_ms=percentile(ttft, 0.95),
                cached_share=_cached_share(ok),
            )
        )
    return out


def _cached_share(invocations: list[Invocation]) -> float:
    cached = counted = 0
    for inv in invocations:
        n = (inv.detail or {}).get("cached_tokens")
        if isinstance(n, int) and inv.input_units:
            cached, counted = cached + n, counted + inv.input_units
    return cached / counted if counted else _NAN


GROUPINGS: dict[str, Callable[[Iterable[Invocation]], list[LatencyGroup]]] = {
    "prompt length": by_prompt_length,
    "turn": by_turn,
    "shared prefix": by_shared_prefix,
    "batch size": by_batch_size,
}
"""Each way of grouping a run's requests, by the name the console and the report give it."""


def groupings_of(workload: Mapping[str, Any], scenario_kinds: Iterable[str] = ()) -> list[str]:
    """The ``GROUPINGS`` worth showing for a run with this ``[workload]`` table (and these
    scenario kinds): prompt length where lengths vary (a distribution, a dataset, a replayed
    trace), turn for conversations, shared prefix where only a share of requests has one,
    batch size where an embeddings workload's varies."""
    found = []
    lengths = workload.get("prompt_tokens", workload.get("input_tokens"))
    if isinstance(lengths, Mapping) or workload.get("dataset") or "replay" in scenario_kinds:
        found.append("prompt length")
    if workload.get("kind") == "embeddings" and isinstance(
        workload.get("inputs_per_request"), Mapping
    ):
        found.append("batch size")
    if workload.get("kind") == "chat" and int(workload.get("turns", 1) or 1) > 1:
        found.append("turn")
    share = workload.get("shared_prefix_share", 1.0)
    if workload.get("shared_prefix_tokens") and 0 < float(share) < 1:
        found.append("shared prefix")
    return found
