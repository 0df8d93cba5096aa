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
from .._base._validate import whole_number
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


def _asked(inv: Invocation, field: str) -> Any:
    """What ``inv`` asked for as ``field`` (its detail's ``requested``); None if it did not."""
    asked = (inv.detail or {}).get("requested")
    return asked.get(field) if isinstance(asked, dict) else None


def _turn_key(inv: Invocation) -> int | None:
    return whole_number((inv.detail or {}).get("turn"))


def _prefix_key(inv: Invocation) -> int | None:
    value = (inv.detail or {}).get("shared_prefix")
    return int(value) if isinstance(value, bool) else None


def _batch_key(inv: Invocation) -> int | None:
    value = whole_number(_asked(inv, "inputs"))
    return None if value is None or value < 1 else value.bit_length() - 1  # 2-3 -> 1


def _batch_label(k: int) -> str:
    return "1 text" if k == 0 else f"{1 << k}-{(2 << k) - 1} texts"


def _audio_key(inv: Invocation) -> int | None:
    ms = _asked(inv, "audio_ms")
    if not isinstance(ms, int | float) or isinstance(ms, bool) or ms <= 0:
        return None
    return 0 if ms < 1000 else int(ms // 1000).bit_length()  # 1 s -> 1, 2-3 s -> 2


def _audio_label(k: int) -> str:
    return "under 1 s" if k == 0 else f"{1 << (k - 1)}-{1 << k} s"


_SIDE = 100_000  # above any picture side: a size's key is pixels * _SIDE + width


def _size_key(inv: Invocation) -> int | None:
    width, _, height = str(_asked(inv, "image_size") or "").partition("x")
    if not (width.isdigit() and height.isdigit() and 0 < int(width) < _SIDE):
        return None
    return int(width) * int(height) * _SIDE + int(width)  # by pixels, then width


def _size_label(k: int) -> str:
    pixels, width = divmod(k, _SIDE)
    return f"{width}x{pixels // width}"


def _steps_key(inv: Invocation) -> int | None:
    return whole_number(_asked(inv, "steps"))


_SPLITS: dict[str, tuple[Callable[[Invocation], int | None], Callable[[int], str]]] = {
    "turn": (_turn_key, lambda t: f"turn {t + 1}"),
    "shared prefix": (_prefix_key, lambda k: "shared prefix" if k else "no shared prefix"),
    "batch size": (_batch_key, _batch_label),
    "audio duration": (_audio_key, _audio_label),
    "image size": (_size_key, _size_label),
    "steps": (_steps_key, lambda k: f"{k} steps"),
}


def by_turn(invocations: Iterable[Invocation]) -> list[LatencyGroup]:
    """A conversation workload's requests (``chat``) grouped by turn (1 = a session's first),
    in turn order; requests without a turn are left out."""
    return _groups(invocations, *_SPLITS["turn"])


def by_shared_prefix(invocations: Iterable[Invocation]) -> list[LatencyGroup]:
    """Requests with and without the workload's shared prefix (``shared_prefix_tokens``):
    ``no shared prefix`` (key 0) then ``shared prefix`` (key 1), where present."""
    return _groups(invocations, *_SPLITS["shared prefix"])


def by_batch_size(invocations: Iterable[Invocation]) -> list[LatencyGroup]:
    """An embeddings workload's requests grouped by how many texts each carried (its
    detail's ``requested.inputs``) in doubling buckets, ``1 text``, ``2-3 texts``, ``4-7
    texts``..., smallest first: a batch's latency grows with its tokens, and a table of every
    size from 1 to 2,048 would hide that."""
    return _groups(invocations, *_SPLITS["batch size"])


def by_audio_duration(invocations: Iterable[Invocation]) -> list[LatencyGroup]:
    """An audio workload's requests by the clip's duration (its detail's
    ``requested.audio_ms``) in doubling buckets of seconds, ``under 1 s``, ``1-2 s``, ``2-4 s``
    ..., shortest first: transcription time grows with the audio."""
    return _groups(invocations, *_SPLITS["audio duration"])


def by_image_size(invocations: Iterable[Invocation]) -> list[LatencyGroup]:
    """Requests by the picture size they asked for (their detail's ``requested.image_size``,
    ``"WxH"``: the image workload's output, the vision workload's input), smallest first."""
    return _groups(invocations, *_SPLITS["image size"])


def by_steps(invocations: Iterable[Invocation]) -> list[LatencyGroup]:
    """An image workload's requests by their denoising steps (``requested.steps``)."""
    return _groups(invocations, *_SPLITS["steps"])


def by_prompt_length(
    invocations: Iterable[Invocation], edges: Sequence[int] = DEFAULT_LENGTH_EDGES
) -> list[LatencyGroup]:
    """Requests grouped into prompt-length buckets ``[edges[i], edges[i + 1])`` (the last one
    open-ended), in length order; only the buckets that hold requests are returned."""
    return _groups(invocations, *_length_split(edges))


def _length_split(
    edges: Sequence[int],
) -> tuple[Callable[[Invocation], int | None], Callable[[int], str]]:
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

    return bucket, label


_SPLITS["prompt length"] = _length_split(DEFAULT_LENGTH_EDGES)


def members(invocations: Iterable[Invocation], grouping: str) -> dict[str, list[Invocation]]:
    """The measured invocations in each group of ``grouping`` (a ``GROUPINGS`` name), by
    label, in the groups' order: what a per-group figure (a bill, say) is computed over."""
    key, label = _SPLITS[grouping]
    return {label(k): invs for k, invs in _split(invocations, key)}


def _split(
    invocations: Iterable[Invocation], key: Callable[[Invocation], int | None]
) -> list[tuple[int, list[Invocation]]]:
    """The measured invocations by ``key``, in key order (None: left out)."""
    found: dict[int, list[Invocation]] = {}
    for inv in invocations:
        k = key(inv) if inv.phase is Phase.MEASURE else None
        if k is not None:
            found.setdefault(k, []).append(inv)
    return sorted(found.items())


def _groups(
    invocations: Iterable[Invocation],
    key: Callable[[Invocation], int | None],
    label: Callable[[int], str],
) -> list[LatencyGroup]:
    out = []
    for k, invs in _split(invocations, key):
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


def token_sources(invocations: Iterable[Invocation]) -> dict[str, dict[str, dict[str, int]]]:
    """Where each target's token counts came from, over its successful requests: ``{target:
    {"input" | "output": {source: requests}}}``, the sources the runner stored with each count
    (``"server"``, ``"tokenizer"``, ``"words"``, ``"chunks"``; ``docs/workloads.md``)."""
    found: dict[str, dict[str, dict[str, int]]] = {}
    for inv in invocations:
        detail = inv.detail
        if not detail or inv.phase is not Phase.MEASURE or not inv.ok:
            continue
        for side in ("input", "output"):
            source = detail.get(f"{side}_tokens_from")
            if isinstance(source, str):
                sides = found.setdefault(inv.target, {})
                counts = sides.setdefault(side, {})
                counts[source] = counts.get(source, 0) + 1
    return found


GROUPINGS: dict[str, Callable[[Iterable[Invocation]], list[LatencyGroup]]] = {
    "prompt length": by_prompt_length,
    "turn": by_turn,
    "shared prefix": by_shared_prefix,
    "batch size": by_batch_size,
    "audio duration": by_audio_duration,
    "image size": by_image_size,
    "steps": by_steps,
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
    if workload.get("kind") == "audio" and isinstance(workload.get("duration_ms"), Mapping):
        found.append("audio duration")
    sizes = workload.get("sizes", workload.get("image_sizes"))
    if workload.get("kind") in ("image", "vision") and isinstance(sizes, list) and len(sizes) > 1:
        found.append("image size")
    steps = workload.get("steps")
    if workload.get("kind") == "image" and isinstance(steps, list) and len(steps) > 1:
        found.append("steps")
    if workload.get("kind") == "chat" and int(workload.get("turns", 1) or 1) > 1:
        found.append("turn")
    share = workload.get("shared_prefix_share", 1.0)
    if workload.get("shared_prefix_tokens") and 0 < float(share) < 1:
        found.append("shared prefix")
    return found
