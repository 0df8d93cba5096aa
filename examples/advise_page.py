"""The reference report's scenario decided by ``advise`` with weighted scores, written as a
page of the HTML report with the cost/latency frontier chart.

    python examples/advise_page.py [advise.html]

The measured stand-ins are ``advise_reference.py``'s (the report's A100 rates and implied
cold starts). On top of cost, latency and cold starts, the decision weighs an SLA: a number
per provider that *you* supply (the values below are placeholders, not the providers'
published terms; higher is better). Without weights, advise picks the cheapest option
meeting every objective; with them, the highest weighted score among those options. With
your own runs: ``gpubench advise RUN --per-day 1000 --p95-ms 60000 --criterion
sla=runpod:99.9,... --weight cost=2,latency=1,sla=1 --html advise.html``.
"""

from __future__ import annotations

import sys
from pathlib import Path

from advise_reference import measured

from gpubench_sdk import Objectives, Scoring, Traffic, advise_targets

# placeholders: put your contracts' figures here (percent availability, higher is better)
SLA = {"huggingface": 99.5, "replicate": 99.5, "runpod": 99.9, "inferless": 99.0}


def main(out: str = "advise.html") -> None:
    traffic, objectives = Traffic.per_day(1000), Objectives(latency_s=60.0)
    cheapest = advise_targets(measured(), traffic, objectives, resamples=20)
    weighted = advise_targets(
        measured(),
        traffic,
        objectives,
        resamples=20,
        scoring=Scoring(weights={"cost": 2, "latency": 1, "sla": 2}, criteria={"sla": SLA}),
    )
    print(f"cheapest meeting p95 <= 60 s: {cheapest.reason}")
    print(f"weighted (cost 2, latency 1, SLA 2): {weighted.reason}")
    scored = [(s.score, e) for e, s in zip(weighted.options, weighted.scores or [], strict=True)]
    for score, e in sorted(scored, key=lambda p: -p[0])[:5]:
        print(
            f"  score {score:.2f}: {e.option.label}, ${e.cost_usd_per_day[0]:.2f}/day, "
            f"meets p95 in {e.meets_all[0]:.0%} of resamples"
        )
    Path(out).write_text(weighted.to_html("Reference scenario: weighted advice"), encoding="utf-8")
    print(f"wrote {out}")


if __name__ == "__main__":
    main(*sys.argv[1:2])
