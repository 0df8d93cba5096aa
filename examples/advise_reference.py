"""The reference report's scenario, decided by ``advise``: 1,000 documents a day, 12 s of
inference each, on five A100 offers; which one, scaled how, for a p95 under 60 s?

    python examples/advise_reference.py

The report (shared/seeds/001, "Scenario 1 - Llama 2-7Bn") gives each provider's A100 rate and
daily total but only point values for the cold starts. Its totals imply them:
``cold = (total / rate - 12,000 - 4,800) / 100`` (the same figures as ``gpubench cost
reference``). A decision needs distributions, so each one here is 15 draws of a lognormal with
that median and a 30% spread, and execution is 30 draws of 12 s +- 5%: stand-ins for what
``gpubench run`` would have measured. With your own runs, call ``advise(store, [run], ...)``
or ``gpubench advise RUN --per-day 1000 --p95-ms 60000``.
"""

from __future__ import annotations

import warnings

import numpy as np

from gpubench_sdk import MeasuredTarget, Objectives, Traffic, advise_targets
from gpubench_sdk.cost import StalePriceWarning, load_catalog, provider_policy

# label, catalog billing model, USD per second (the report's A100 rates), implied cold start
REFERENCE = (
    ("Hugging Face", "huggingface", 0.108333333 / 60, 53.30),
    ("Replicate", "replicate", 0.0014, 128.00),
    ("Runpod", "runpod", 0.000552777, 38.23),
    ("Inferless", "inferless", 0.000745, 19.44),
)


def measured(seed: int = 0) -> list[MeasuredTarget]:
    warnings.simplefilter("ignore", StalePriceWarning)  # `gpubench cost catalog --stale`
    catalog = load_catalog()
    rng = np.random.default_rng(seed)
    return [
        MeasuredTarget(
            name=label,
            provider=billing,
            execution_s=rng.uniform(11.4, 12.6, 30),
            cold_start_s=rng.lognormal(np.log(cold_s), 0.3, 15),
            billing=catalog.billing_model(billing),
            rate_usd_per_s=rate,
            worker_policy=provider_policy(billing).policy,
        )
        for label, billing, rate, cold_s in REFERENCE
    ]


def main() -> None:
    advice = advise_targets(
        measured(),
        Traffic.per_day(1000),
        Objectives(latency_s=60.0),
        resamples=30,
    )
    print(f"{advice.traffic.describe()}, p95 <= 60 s; {advice.resamples} resamples")
    for e in advice.frontier:
        lo, hi = e.cost_usd_per_day[1:]
        print(
            f"  frontier: {e.option.label}: ${e.cost_usd_per_day[0]:.2f}/day "
            f"({lo:.2f}-{hi:.2f}), p95 {e.latency_s[0]:.1f} s, "
            f"meets it in {e.meets_all[0]:.0%} of resamples"
        )
    print(f"recommendation: {advice.reason}")
    if advice.stable:
        print("stable: no cheaper option is left undecided by the resamples")
    else:
        print(f"unstable: about {advice.more_cold_starts} cold starts would settle it")


if __name__ == "__main__":
    main()
