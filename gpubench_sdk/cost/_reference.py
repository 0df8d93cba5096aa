"""The reference report's pricing scenario (shared/seeds/001, "Scenario 1 - Llama 2-7Bn").

The report gives the rates and the daily totals but not the cold start per provider it used
(those came from its charts). The cold starts here are the ones its totals imply, to 0.01 s:
``cold = (total / rate - 12,000 - 4,800) / 100``. They reproduce every total within the
report's own rounding with its method (no per-interval rounding, the 60 s delay for all).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class ReferenceLine:
    label: str
    billing: str  # a provider (billing plan) of the catalog
    rate_usd_per_s: float
    cold_start_s: float  # implied by the report's total
    report_total_usd: float


REFERENCE_REQUESTS_PER_DAY = 1000
REFERENCE_INFERENCE_S = 12.0
REFERENCE_SCALE_DOWN_S = 60.0
REFERENCE_SCALE_DOWN_EVENTS = 100
REFERENCE_LINES: tuple[ReferenceLine, ...] = (
    # "A100 per minute rate: $0.108333333 (Billed by the minute)"
    ReferenceLine("Hugging Face", "huggingface", 0.108333333 / 60, 53.30, 39.957),
    # "A100 pricing: $0.001400/sec" (new plan: bills cold boots and idle)
    ReferenceLine("Replicate", "replicate", 0.0014, 128.00, 41.44),
    # "Pricing for A100: $0.000552777/sec"
    ReferenceLine("Runpod", "runpod", 0.000552777, 38.23, 11.4),
    # "Shared A100 pricing: $0.000745/sec" (V1 and V2)
    ReferenceLine("Inferless V1", "inferless", 0.000745, 19.44, 13.964),
    ReferenceLine("Inferless V2", "inferless", 0.000745, 18.83, 13.919),
)
