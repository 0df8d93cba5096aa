"""How fast the what-if fleet simulator is: a day of traffic at 10 requests/s (864,000 requests).

Target (issue 4): under 10 s on the 2-core development machine. Run by hand:

    python bench/cost_sim_bench.py [--repeat 3]
    python bench/cost_sim_bench.py --agreement   # docs/cost.md's simulator-vs-fleet table

Prints the best and median wall time of ``simulate`` alone (arrivals generated beforehand) for
a fleet that scales out and in (10 req/s, 0.5 s execution sampled from an array, 5-20 s cold
starts, up to 100 workers, 60 s scale-down), and of the same with concurrency 4 per worker.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # run from a checkout without installing
    sys.path.insert(0, str(ROOT))

from gpubench_sdk.cost import BillingModel, FleetSettings, poisson_arrivals, simulate  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument(
        "--agreement",
        action="store_true",
        help="print the simulator against the metered fleet on every trace (markdown)",
    )
    args = parser.parse_args()
    if args.agreement:
        agreement()
        return
    arrivals = poisson_arrivals(10.0, 86_400, seed=1)
    rng = np.random.default_rng(2)
    execution_s = rng.gamma(4.0, 0.125, 10_000)  # mean 0.5 s
    cold_start_s = rng.uniform(5.0, 20.0, 1_000)
    billing = BillingModel(granularity_s=1.0)
    for concurrency in (1, 4):
        settings = FleetSettings(0, 100, 60.0, concurrency)
        times = []
        for _ in range(args.repeat):
            began = time.perf_counter()
            result = simulate(
                arrivals,
                execution_s=execution_s,
                cold_start_s=cold_start_s,
                settings=settings,
                billing=billing,
                rate_usd_per_s=0.00076,
            )
            times.append(time.perf_counter() - began)
        print(
            f"concurrency {concurrency}: {result.requests:,} requests, best {min(times):.2f} s, "
            f"median {statistics.median(times):.2f} s "
            f"({result.requests / min(times) / 1e3:.0f}k requests/s); "
            f"{result.workers_started} workers started, cold {100 * result.cold_rate:.3f}%, "
            f"p99 {result.latency_p99_s:.2f} s, ${result.cost_usd:.2f}"
        )


def agreement() -> None:
    """The same traces through the simulator and the testing kit's fleet (virtual time), per
    worker policy; and the gap when the two use different policies (as before issue 18)."""
    from gpubench_sdk.testing._replay import sim_vs_fleet

    print("| policy | trace | workers | billing | requests | fleet billed s | sim billed s "
          "| bill gap | cold (fleet / sim) |")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|---|")
    began = time.perf_counter()
    for policy in ("most_recently_idle", "longest_idle", "random"):
        for r in sim_vs_fleet(policy):  # type: ignore[arg-type]
            print(
                f"| {policy} | {r.trace} | {r.workers} | {r.billing} | {r.requests} "
                f"| {r.fleet_billed_s:,.1f} | {r.sim_billed_s:,.1f} | {100 * r.bill_gap:+.2f}% "
                f"| {r.fleet_cold} / {r.sim_cold} |"
            )
    took = time.perf_counter() - began
    print()
    print("mismatched (fleet longest_idle, simulator most_recently_idle):")
    for r in sim_vs_fleet("longest_idle", sim_policy="most_recently_idle"):
        if r.workers > 1:
            print(
                f"| {r.trace} | {r.workers} | {r.billing} | {r.fleet_billed_s:,.1f} "
                f"| {r.sim_billed_s:,.1f} | {100 * r.bill_gap:+.2f}% "
                f"| {r.fleet_cold} / {r.sim_cold} |"
            )
    print(f"\n54 comparisons in {took:.1f} s")
    print()
    print("always warm (min workers kept as a count), worst bill gap over the traces and sizes:")
    print("| policy | min workers | scale-down s | exact | per-second | per-minute | cold equal |")
    print("|---|---|---|---|---|---|---|")
    began = time.perf_counter()
    count = 0
    for policy in ("most_recently_idle", "longest_idle", "random"):
        for min_workers in (1, 2):
            for delay in (1.0, 3.0, 30.0):
                rows = sim_vs_fleet(
                    policy,  # type: ignore[arg-type]
                    min_workers=min_workers,
                    idle_timeout_s=delay,
                    traces=("poisson", "bursty", "bursty-1ms"),
                )
                count += len(rows)
                worst = {
                    b: max(abs(r.bill_gap) for r in rows if r.billing == b)
                    for b in ("exact", "per-second", "per-minute")
                }
                same = sum(r.sim_cold == r.fleet_cold for r in rows)
                print(
                    f"| {policy} | {min_workers} | {delay:g} | {100 * worst['exact']:.2f}% "
                    f"| {100 * worst['per-second']:.2f}% | {100 * worst['per-minute']:.2f}% "
                    f"| {same}/{len(rows)} |"
                )
    print(f"\n{count} comparisons in {time.perf_counter() - began:.1f} s")


if __name__ == "__main__":
    main()
