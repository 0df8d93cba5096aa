"""The options advise weighs beyond one provider's scaling settings, on the reference report's
scenario (1,000 documents a day, 12 s each, p95 under 60 s):

* a monthly commitment with a minimum term, over a horizon shorter than the term;
* concurrency per worker on RunPod (concurrent handlers), with a measured slowdown;
* overflow chains across three providers.

    python examples/advise_options.py

The targets are ``examples/advise_reference.py``'s stand-ins for measured runs (the report's
A100 rates; cold starts implied by its totals). The commitment is a made-up offer to show the
arithmetic ($300 a month for one RunPod worker, 12 months minimum), not a price RunPod lists;
the slowdown (two 12 s jobs on one A100 take 1.8x as long each) stands in for what a burst
scenario with worker ids would measure. With your own runs: ``gpubench advise RUN ...
--commit runpod=300,term=12 --horizon-months 6`` (docs/advise.md).
"""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path

from gpubench_sdk import Objectives, Traffic, advise_targets
from gpubench_sdk.cost import Commitment

sys.path.insert(0, str(Path(__file__).parent))
from advise_reference import measured  # the reference targets, as measured

OFFER = Commitment("$300/month for 12 months", usd=300.0, per="month", min_months=12)


def main() -> None:
    targets = [
        dataclasses.replace(t, commitments=(OFFER,), slowdown=(1.0, 1.8))
        if t.name == "Runpod"
        else t
        for t in measured()
    ]
    advice = advise_targets(
        targets,
        Traffic.per_day(1000),
        Objectives(latency_s=60.0),
        resamples=20,
        horizon_months=6,  # needed for 6 months: the 12-month term is paid in full
        overflow_depth=3,
    )
    kinds = {
        "committed": [e for e in advice.options if e.commitment is not None],
        "concurrency": [e for e in advice.options if e.option.concurrency > 1],
        "chains": [e for e in advice.options if e.option.via],
    }
    for kind, found in kinds.items():
        best = min(found, key=lambda e: e.cost_usd_per_day[0])
        print(
            f"{kind}: {len(found)} options; cheapest {best.option.label}: "
            f"${best.cost_usd_per_day[0]:.2f}/day, p95 {best.latency_s[0]:.1f} s, "
            f"meets p95 <= 60 s in {best.meets_all[0]:.0%} of resamples"
        )
    committed = min(kinds["committed"], key=lambda e: e.cost_usd_per_day[0])
    terms = committed.commitment
    assert terms is not None
    print(
        f"commitment over {terms.horizon_months:g} months: ${terms.committed_usd:,.0f} against "
        f"${terms.on_demand_usd:,.0f} for the same setting on demand; break-even at "
        f"{terms.break_even_utilization:.0%} utilisation"
    )
    print(f"recommendation: {advice.reason}")
    for note in advice.notes:
        if "concurrency" in note or "chains" in note:
            print(f"note: {note}")


if __name__ == "__main__":
    main()
