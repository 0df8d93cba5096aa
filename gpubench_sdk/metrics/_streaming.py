"""Streaming LLM metrics from per-request token arrival times.

Input: for each request, the arrival times of its output tokens in ns *relative to the
request's send* (one array per request; the store has no per-token column yet, a streaming
provider will add one). Optionally each request's end (last byte) relative to its send, and
its send time on a shared clock for the total rate. Our definitions, for a request with N
tokens arriving at t_1 <= ... <= t_N and ending at e (default t_N):

* TTFT = t_1; time to second token = t_2 (NaN when N < 2).
* ITL = the gaps t_{i+1} - t_i, i = 1..N-1, pooled over requests (as vLLM's
  ``benchmark_serving`` collects ``itl``).
* TPOT = (e - TTFT) / (N - 1), NaN when N < 2 (vLLM's ``benchmark_serving``: "Time per
  Output Token (excl. 1st token)"); it equals the mean of a request's ITL when e = t_N.
* Output tokens/s per request = N / e (llmperf's ``request_output_throughput_token_per_s``);
  decode tokens/s = 1 / TPOT.
* Total output tokens/s = sum N / (last end - first send) across requests.

How the others differ (see docs/metrics.md): GuideLLM's ``time_per_output_token_ms`` is
(last token - request start) / N, so it includes TTFT, and its ``inter_token_latency_ms`` is
our TPOT (``request_stats.py`` in vllm-project/guidellm). llmperf's ``inter_token_latency_s``
is the sum of the gaps *including* TTFT divided by N, i.e. t_N / N, the same figure as
GuideLLM's TPOT (ray-project/llmperf,
``openai_chat_completions_client.py`` and ``token_benchmark_ray.py``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from ._stats import FloatArray


@dataclass(frozen=True, slots=True)
class StreamMetrics:
    """Per-request arrays (aligned with the input) and pooled ITL, all in ms."""

    ttft_ms: FloatArray
    time_to_second_token_ms: FloatArray
    tpot_ms: FloatArray
    e2e_ms: FloatArray
    last_token_ms: FloatArray
    output_tokens: npt.NDArray[np.int64]
    output_tokens_per_s: FloatArray
    decode_tokens_per_s: FloatArray
    itl_ms: FloatArray
    total_output_tokens_per_s: float

    def first_token_inclusive_tpot_ms(self) -> FloatArray:
        """t_N / N: GuideLLM's ``time_per_output_token_ms`` and llmperf's per-request
        ``inter_token_latency_s`` (both fold TTFT in); NaN without tokens."""
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.where(self.output_tokens > 0, self.last_token_ms / self.output_tokens, np.nan)


def stream_metrics(
    token_times_ns: Sequence[npt.ArrayLike],
    *,
    end_ns: npt.ArrayLike | None = None,
    send_ns: npt.ArrayLike | None = None,
) -> StreamMetrics:
    """Streaming metrics per request (see the module doc for every definition).

    ``token_times_ns[i]``: request i's token arrival times in ns since its send, ascending.
    ``end_ns``: each request's last byte since its send (default: its last token).
    ``send_ns``: each request's send on a clock shared by all (for the total rate; default:
    all sent at once, so the total is sum N / max e).
    """
    n = len(token_times_ns)
    ends = None if end_ns is None else np.asarray(end_ns, dtype=np.float64)
    if ends is not None and ends.shape != (n,):
        raise ValueError(f"end_ns must have one value per request ({n}), got {ends.shape}")
    sends = np.zeros(n) if send_ns is None else np.asarray(send_ns, dtype=np.float64)
    if sends.shape != (n,):
        raise ValueError(f"send_ns must have one value per request ({n}), got {sends.shape}")
    ttft, second, tpot, e2e, last = (np.full(n, np.nan) for _ in range(5))
    count = np.zeros(n, dtype=np.int64)
    gaps: list[FloatArray] = []
    for i, times in enumerate(token_times_ns):
        t = np.asarray(times, dtype=np.float64) / 1e6
        if t.ndim != 1:
            raise ValueError(f"token_times_ns[{i}] must be one-dimensional")
        if t.size and ((t < 0).any() or (np.diff(t) < 0).any()):
            raise ValueError(
                f"token_times_ns[{i}] must be ascending ns since the request's send (>= 0)"
            )
        count[i] = t.size
        end = t[-1] if t.size else math.nan
        if ends is not None:
            end = ends[i] / 1e6
            if t.size and end < t[-1]:
                raise ValueError(f"end_ns[{i}] is before request {i}'s last token")
        e2e[i] = end
        if not t.size:
            continue
        ttft[i], last[i] = t[0], t[-1]
        if t.size >= 2:
            second[i] = t[1]
            tpot[i] = (end - t[0]) / (t.size - 1)
            gaps.append(np.diff(t))
    with np.errstate(divide="ignore", invalid="ignore"):
        per_request = np.where((count > 0) & (e2e > 0), count / (e2e / 1e3), np.nan)
        decode = np.where(tpot > 0, 1e3 / tpot, np.nan)
    finished = ~np.isnan(e2e)
    if finished.any():
        span_s = (
            float(np.max(sends[finished] / 1e6 + e2e[finished])) - float(sends.min() / 1e6)
        ) / 1e3
        total = float(count.sum()) / span_s if span_s > 0 else math.nan
    else:
        total = math.nan
    return StreamMetrics(
        ttft_ms=ttft,
        time_to_second_token_ms=second,
        tpot_ms=tpot,
        e2e_ms=e2e,
        last_token_ms=last,
        output_tokens=count,
        output_tokens_per_s=per_request,
        decode_tokens_per_s=decode,
        itl_ms=np.concatenate(gaps) if gaps else np.zeros(0),
        total_output_tokens_per_s=total,
    )
