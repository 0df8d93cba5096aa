"""Before you spend: what a plan will cost, which commitment pays, and how the simulator's
worker policy changes a what-if bill.

    python examples/cost_break_even.py

1. A dry run of examples/reference_report.toml: requests, duration and cost per scenario,
   nothing sent (the same as `gpubench run examples/reference_report.toml --dry-run`).
2. Break-even of an active RunPod worker and a 12-month reservation against on demand (the
   same as `gpubench cost break-even`), with "never" where one never pays.
3. The same hour of traffic simulated with each worker-selection policy: the bill differs.
"""

from __future__ import annotations

import warnings
from pathlib import Path

from gpubench_sdk import load_config
from gpubench_sdk.cost import (
    WORKER_POLICIES,
    Commitment,
    FleetSettings,
    StalePriceWarning,
    compare_commitments,
    dry_run,
    load_catalog,
    poisson_arrivals,
    provider_policy,
    simulate,
)

HERE = Path(__file__).resolve().parent


def main() -> None:
    warnings.simplefilter("ignore", StalePriceWarning)  # `gpubench cost catalog --stale` lists them
    catalog = load_catalog()

    plan = dry_run(load_config(HERE / "reference_report.toml"), catalog=catalog)
    print("1. dry run of reference_report.toml (nothing sent)")
    for row in plan.rows:
        print(
            f"   {row.target} scenario {row.scenario} {row.kind}: {row.requests} requests, "
            f"about {row.expected_s:.1f} s, expected ${row.expected_usd:.6f}, "
            f"worst case ${row.worst_usd:.4f}"
        )

    on_demand = catalog.rate_usd_per_s("runpod", "A100 80GB")
    options = [
        Commitment("active worker", 2.05, "hour"),
        Commitment("12-month reservation", 1100.0, "month", min_months=12),
    ]
    result = compare_commitments(on_demand, options, need_months=12, billed_s_per_request=12)
    print(f"2. break-even against RunPod A100 80GB on demand (${on_demand:g}/s)")
    for line in result.lines:
        u = line.break_even_utilization
        where = "never pays" if u is None else f"breaks even at {100 * u:.1f}% utilisation"
        print(f"   {line.commitment.name}: ${line.usd_per_day:.2f}/day, {where}")
    print(f"   on demand wins below {100 * result.on_demand_wins_below:.1f}% utilisation")

    arrivals = poisson_arrivals(0.25, 3600, seed=3)
    billing = catalog.billing_model("runpod")
    print("3. one hour at 0.25 req/s, 4 workers, 30 s scale-down, by worker policy")
    for policy in WORKER_POLICIES:
        sim = simulate(
            arrivals,
            execution_s=2.0,
            cold_start_s=20.0,
            settings=FleetSettings(0, 4, 30.0, 1, policy),
            billing=billing,
            rate_usd_per_s=on_demand,
        )
        print(f"   {policy}: ${sim.cost_usd:.3f}, {sim.cold_requests} cold requests")
    fact = provider_policy("runpod")
    print(f"   RunPod's stated policy: {fact.policy} ({fact.basis}: {fact.source[:60]}...)")


if __name__ == "__main__":
    main()
