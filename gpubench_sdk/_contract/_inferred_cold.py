"""The option of a provider whose answers never say whether a worker was started for them.

Modal's web endpoints, Azure Container Apps and Cloud Run answer a cold request like a warm one,
only later: the one thing a plugin can do is call a first byte that slow a cold start, with the
threshold the user gives. Each such plugin declared the same option and built the same
``ColdMark`` from it; here they are once.
"""

from __future__ import annotations

from pydantic import Field

from ._kit import ColdMark
from ._provider import ProviderOptions


class ColdThresholdOptions(ProviderOptions):
    """Options of a provider that infers cold starts from the first byte:
    ``cold_threshold_ms`` (a first byte at least this slow is cold; unset, no guess is made),
    and ``cold_mark()``, the ``ColdMark`` that judges by it."""

    cold_threshold_ms: float | None = Field(
        default=None,
        gt=0,
        description="infer 'cold' when the first byte takes longer (None: no guess)",
    )

    def cold_mark(self) -> ColdMark:
        """A new ``ColdMark`` judging by ``cold_threshold_ms`` (one per opened provider: it
        also remembers an ``expect()`` from ``ensure_cold``)."""
        return ColdMark(self.cold_threshold_ms)
