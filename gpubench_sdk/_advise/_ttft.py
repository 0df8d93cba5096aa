"""The TTFT objective: time to first token of simulated requests, from measured streams.

A simulated request's TTFT is its wait for a worker (queueing, and the worker's cold start
when it had to boot one: the simulator's ``SimResult.wait_s``) plus a warm TTFT drawn from the
target's measured warm requests (``MeasuredTarget.ttft_s``: ``first_byte_ns - start_ns`` of
streamed responses). So cold starts add to the TTFT of cold requests exactly as they add to
their latency. Each draw first resamples the measured TTFTs with replacement (the bootstrap
that latency's execution and cold-start samples get), then draws one per request from them.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from .._base._errors import ConfigError
from ._inputs import MeasuredTarget


def ttft_percentile(
    served: Sequence[tuple[MeasuredTarget, npt.NDArray[np.float64]]], seed: int, q: float
) -> float:
    """The ``q``th percentile of TTFT over requests served by each ``(target, waits)`` pair
    (seconds each request waited for a worker of that target) on the draw ``seed``."""
    rng = np.random.default_rng([seed, 0x7F7])
    parts = []
    for target, waits in served:
        if target.ttft_s is None or target.ttft_s.size == 0:
            raise ConfigError(
                "--ttft-p95-ms",
                target.name,
                f"streamed responses measured for {target.name} (a run whose requests stream, "
                "so each stores its first token's time), or no TTFT objective",
            )
        boot = rng.choice(target.ttft_s, size=target.ttft_s.size)
        parts.append(np.asarray(waits, dtype=np.float64) + rng.choice(boot, size=waits.size))
    ttft = np.concatenate(parts) if parts else np.zeros(0)
    return float(np.percentile(ttft, q)) if ttft.size else 0.0
