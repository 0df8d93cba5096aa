"""The metrics library in a script: run a small benchmark (or read a stored run) and analyse it.

Run: python examples/metrics_notebook.py [STORE]           # runs a benchmark, then analyses it
     python examples/metrics_notebook.py STORE --run RUN    # analyses a run already stored

Two local targets differ only in how far they may scale out ("wide": up to 4 workers,
"narrow": 1). The local runtime's workers serve several requests at once, so on this light
probe the two often tie: the comparison says whether a difference is real or noise. Copy any
numbered block into a notebook cell.
"""

from __future__ import annotations

import argparse

import anyio
import numpy as np

import gpubench_sdk as gb
from gpubench_sdk import metrics


async def benchmark(store: str) -> str:
    result = await gb.run(
        {
            "wide": gb.LocalProvider(max_workers=4, idle_timeout_s=5.0),
            "narrow": gb.LocalProvider(max_workers=1, idle_timeout_s=5.0),
        },
        gb.EchoProbe(sleep_ms=20),
        [gb.ColdStarts(2, warm_after=2), gb.Burst(total=80, concurrency=4)],
        store=store,
        name="metrics-notebook",
    )
    return result.run.uuid


def analyse(store_path: str, run_ref: str) -> None:
    with gb.Store(store_path, readonly=True) as store:
        run = store.run(run_ref)
        targets = [t.name for t in run.targets]
        kinds = [s.kind for s in run.scenarios]
        burst = kinds.index("burst") if "burst" in kinds else len(kinds) - 1
        print(f"run {run.id} {run.name!r}: targets {targets}, scenarios {kinds}")

        # 1. Summary of one target's latency in the burst, with CIs
        for name in targets:
            s = metrics.latency_summary(store, run, target=name, scenario=burst)
            lo, hi = s.p50_ci_ms
            print(
                f"[summary] {name}: n={s.count} p50={s.p50_ms:.1f} ms (95% CI {lo:.1f}-{hi:.1f})"
                f" p95={s.p95_ms:.1f} ms cv={s.cv:.2f}"
            )

        # 2. Cold starts over the whole run, decomposed where the provider reports phases
        for name in targets:
            cs = metrics.run_cold_starts(store, run, target=name)
            boot = np.nanmedian(cs.boot_ms) if cs.boot_ms.size else float("nan")
            confirmed = int(cs.confirmed.sum())
            print(
                f"[cold start] {name}: {cs.summary.count} values, p50={cs.summary.p50_ms:.0f} ms"
                f" (boot {boot:.0f} ms), rate={cs.rate.rate:.0%}, confirmed={confirmed}"
            )

        # 3. Autoscaling under the burst: latency against request index
        for name in targets:
            b = metrics.run_burst(store, run, target=name, scenario=burst)
            print(
                f"[burst] {name}: slope={b.by_index.slope:.2f} ms/request"
                f" r={b.by_index.pearson_r:.2f} rho={b.by_index.spearman_rho:.2f}"
                f" back to baseline after {b.time_to_baseline_s:.2f} s"
            )

        # 4. Throughput and goodput against an SLO
        slo = metrics.SLO(latency_ms=100)
        for name in targets:
            tp = metrics.run_throughput(store, run, target=name, scenario=burst, slo=slo)
            print(
                f"[throughput] {name}: {tp.ok_per_s:.1f} req/s, goodput(<=100 ms)"
                f" {tp.goodput_per_s:.1f} req/s"
            )

        # 5. A vs B
        if len(targets) >= 2:
            c = metrics.compare_targets(store, run, targets[0], targets[1], scenario=burst)
            print(f"[compare] {c.verdict}")

        # 6. Partial histograms (e.g. one per process or machine) merge exactly
        cols = metrics.run_columns(store, run, target=targets[0])
        ok = cols["outcome"] == gb.Outcome.OK.code
        latency = cols["latency_ms"][ok]
        parts = [metrics.LogHistogram.from_values(p) for p in np.array_split(latency, 4)]
        wire = [p.to_bytes() for p in parts]  # what processes or machines would ship
        merged = metrics.merge_histograms(metrics.LogHistogram.from_bytes(b) for b in wire)
        exact = float(np.quantile(latency, 0.95))
        print(f"[histogram] merged p95={merged.quantile(0.95):.1f} ms, exact {exact:.1f} ms")

        # 7. Weighted scoring over any figures
        figures = {}
        for name in targets:
            s = metrics.latency_summary(store, run, target=name, scenario=burst)
            cs = metrics.run_cold_starts(store, run, target=name)
            figures[name] = {"p95_ms": s.p95_ms, "cold_start_p50_ms": cs.summary.p50_ms}
        criteria = [metrics.Criterion("p95_ms", 2), metrics.Criterion("cold_start_p50_ms", 1)]
        for row in metrics.score(figures, criteria):
            parts_text = ", ".join(f"{k} {v:.2f}" for k, v in row.contributions.items())
            print(f"[score] #{row.rank} {row.candidate}: {row.score:.2f} ({parts_text})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("store", nargs="?", default="metrics-notebook.sqlite")
    parser.add_argument("--run", help="analyse this stored run instead of running a benchmark")
    args = parser.parse_args()
    run_ref = args.run or anyio.run(benchmark, args.store)
    analyse(args.store, run_ref)


if __name__ == "__main__":
    main()
