"""Reproduce the reference report's daily bill, then ask what a scale-down delay really costs.

    python examples/cost_scenario.py

1. The report's "Scenario 1 - Llama 2-7Bn" (1,000 documents/day, 12 s each on an A100 80GB,
   60 s scale-down, 100 scale-down events) with the report's rates, billed the report's way
   and then with each provider's rounding and minimum scale-down delay.
2. The same traffic as Poisson arrivals through the fleet simulator, sweeping the scale-down
   delay and min workers on RunPod's catalog price, for a p95 latency SLO of 30 s.
"""

from __future__ import annotations

import warnings

from gpubench_sdk.cost import (
    StalePriceWarning,
    load_catalog,
    poisson_arrivals,
    scenario_bill,
    sweep,
)

# Rates the report used, and the cold start per scale-down event its totals imply.
REPORT = [  # label, billing rules, $/s, cold start s, the report's total $/day
    ("Hugging Face", "huggingface", 0.108333333 / 60, 53.30, 39.957),
    ("Replicate", "replicate", 0.0014, 128.00, 41.44),
    ("Runpod", "runpod", 0.000552777, 38.23, 11.4),
    ("Inferless V1", "inferless", 0.000745, 19.44, 13.964),
    ("Inferless V2", "inferless", 0.000745, 18.83, 13.919),
]

catalog = load_catalog()
print(f"{'provider':14} {'report $':>9} {'its method $':>12} {'with rules $':>12}")
for label, provider, rate, cold_s, reported in REPORT:
    common = dict(
        label=label,
        billing=catalog.billing_model(provider),
        rate_usd_per_s=rate,
        requests_per_day=1000,
        inference_s=12.0,
        scale_down_s=60.0,
        scale_down_events=100,
        cold_start_s=cold_s,
    )
    as_reported = scenario_bill(**common, round_per_interval=False, enforce_min_scale_down=False)  # type: ignore[arg-type]
    with_rules = scenario_bill(**common)  # type: ignore[arg-type]
    print(f"{label:14} {reported:9.3f} {as_reported.total_usd:12.3f} {with_rules.total_usd:12.3f}")

# 1,000 requests a day as Poisson arrivals; RunPod's catalog price (warns if it is stale)
arrivals = poisson_arrivals(1000 / 86_400, 86_400, seed=1)
with warnings.catch_warnings(record=True) as stale:
    warnings.simplefilter("always", StalePriceWarning)
    rate = catalog.rate_usd_per_s("runpod", "A100 80GB")
for w in stale:
    print(f"warning: {w.message}")
result = sweep(
    arrivals,
    execution_s=12.0,
    cold_start_s=38.23,
    billing=catalog.billing_model("runpod"),
    rate_usd_per_s=rate,
    scale_down_s=[5, 60, 300, 900],
    min_workers=[0, 1],
    max_workers=4,
    slo_latency_s=30.0,
    horizon_s=86_400,
)
print(f"\n{'min':>3} {'delay s':>7} {'cold %':>6} {'p95 s':>6} {'$/day':>7}")
for r in result.rows:
    s, cold_pct = r.settings, 100 * r.cold_rate
    row = f"{s.min_workers:3} {s.scale_down_s:7g} {cold_pct:6.1f} {r.latency_p95_s:6.1f}"
    print(f"{row} {r.cost_usd:7.2f}")
if result.best is not None:
    b = result.best.settings
    print(f"cheapest meeting p95 <= 30 s: min_workers={b.min_workers}, delay={b.scale_down_s:g} s")
