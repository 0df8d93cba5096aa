"""The proof of advise's concurrency per worker: the slowdown is measured from ordinary runs, and
an option with several requests per worker costs on the fleet what advise said.

Two RunPod endpoints (the real plugin over loopback HTTP, RunPod's emulator in front of
``_concurrent_fleet.ConcurrentFleet``, whose workers run up to 4 jobs at once): "io" runs a
job in 50 ms however many share its worker (an I/O-bound handler), "gpu" runs it 50% slower
per extra job (a shared GPU). One worker each while measuring, so bursts of 2, 3 and 4 in
flight put that many jobs on it; the stored ``workerId`` and execution times are all advise
reads. The replays serve the priced options on the same fleets in virtual time, their
workers picked by the policy advise simulated with (RunPod's, random).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

import anyio
import numpy as np
import pytest
from _concurrent_fleet import ConcurrentFleet
from _plans import emulated_runpod
from _virtual_serve import serve_trace

from gpubench_sdk import Objectives, Store, Traffic, build_run
from gpubench_sdk._advise import MeasuredTarget, advise_targets, measured_targets
from gpubench_sdk._plan._config import parse_config
from gpubench_sdk.cost import load_catalog, poisson_arrivals
from gpubench_sdk.testing import Duration, noise_tolerance_ms, serve

pytest.importorskip("gpubench_runpod")
from gpubench_runpod.emulator import make_app

KEY = "rpa_concurrency_3b8e6a1f0d2c"
SLOWDOWN = {"io": 0.0, "gpu": 0.5}
BOOT = Duration.uniform(0.3, 0.4)
EXEC_S = 0.05
RATE_USD_PER_S = 0.001
SLO_S = 1.0


@contextmanager
def _emulators() -> Iterator[dict[str, str]]:
    with ExitStack() as stack:
        urls = {}
        for name, slow in SLOWDOWN.items():
            fleet = ConcurrentFleet(
                boot=BOOT, execution_s=EXEC_S, per_worker=4, slowdown=slow, max_workers=1
            )
            app = make_app(fleet, api_key=KEY)  # type: ignore[arg-type]  # a fleet's interface
            urls[name] = stack.enter_context(serve(app)).url
        yield urls


def _target(name: str, url: str) -> dict[str, Any]:
    return emulated_runpod(name, url, "CONC_RUNPOD_KEY", RATE_USD_PER_S, poll_interval_s=0.005)


@pytest.fixture(scope="module")
def targets(tmp_path_factory: pytest.TempPathFactory) -> dict[str, MeasuredTarget]:
    path: Path = tmp_path_factory.mktemp("concurrency") / "measured.sqlite"
    with pytest.MonkeyPatch.context() as env, _emulators() as urls:
        env.setenv("CONC_RUNPOD_KEY", KEY)
        plan = parse_config(
            {
                "run": {"name": "advise-concurrency"},
                "workload": {"kind": "probe", "sleep_ms": 50},
                "targets": [_target(name, url) for name, url in urls.items()],
                "scenarios": [
                    {"kind": "cold_starts", "n": 3, "warm_after": 3, "cold_timeout_s": 10},
                    *({"kind": "burst", "total": 8 * c, "concurrency": c} for c in (2, 3, 4)),
                ],
            }
        )
        run = anyio.run(build_run(plan, store=path).run).run_id
    with Store(path, readonly=True) as store:
        return {t.name: t for t in measured_targets(store, [run], load_catalog())}


def _serve(
    target: MeasuredTarget, per_worker: int, max_workers: int, idle_s: float, rate: float
) -> dict[str, float]:
    """Poisson traffic at ``rate`` on ``target``'s fleet in virtual time, its workers picked
    by the policy advise simulated: bill per day and p95. Each job runs one of the executions
    ``target`` measured (brought to one job per worker), as advise's simulation draws them:
    the two then differ only in how they charge the slowdown, which is what is under test,
    not in how far this machine's timers overshot the nominal 50 ms while measuring."""
    window = Traffic(rate).window_s
    served = serve_trace(
        lambda _clock: ConcurrentFleet(  # on the running loop's clock: the virtual one
            boot=BOOT,
            execution_s=[float(v) for v in target.execution_s],
            per_worker=per_worker,
            slowdown=SLOWDOWN[target.name],
            max_workers=max_workers,
            idle_timeout_s=idle_s,
            policy=target.worker_policy,
            seed=11,
        ),
        poisson_arrivals(rate, window, seed=77),
        {"sleep_ms": 50},
        linger_s=idle_s + 1.0,
    )
    return {
        "cost_usd_per_day": served.cost_usd(RATE_USD_PER_S) * 86_400 / window,
        "p95_s": served.p95_s(),
    }


def test_the_slowdown_is_measured_from_the_workers_ids(targets: dict[str, MeasuredTarget]) -> None:
    # priced "local", but measured on RunPod: simulated with RunPod's worker policy
    assert {t.worker_policy for t in targets.values()} == {"random"}
    io, gpu = targets["io"].slowdown, targets["gpu"].slowdown
    assert len(io) == 4 and len(gpu) == 4, (io, gpu)
    assert all(s == pytest.approx(1.0, abs=0.15) for s in io), io
    # the fleet makes a job 50% slower per other job its worker runs when it starts: x1.5 at
    # 2, x2 at 3, x2.5 at 4, read back from the stored worker ids and server times
    assert gpu == pytest.approx((1.0, 1.5, 2.0, 2.5), rel=0.1), gpu


def test_several_requests_per_worker_cost_on_the_fleet_what_advise_said(
    targets: dict[str, MeasuredTarget],
) -> None:
    rate = 6.0  # 0.3 busy workers on average: bursts that a second slot absorbs without a boot
    advice = advise_targets(
        [targets["io"]], Traffic(rate), Objectives(latency_s=SLO_S), resamples=10,
        scale_down_s=(1.0,), overflow=False,
    )  # fmt: skip
    levels = sorted({e.option.concurrency for e in advice.options})
    assert levels == [1, 2, 4], levels  # 8 was never measured: not extrapolated
    # one request per worker with room to burst (the default cap; lower caps are searched too)
    one = max(
        (e for e in advice.options if e.option.concurrency == 1 and e.option.min_workers == 0),
        key=lambda e: e.option.max_workers,
    )
    two = next(e for e in advice.options if e.option.concurrency == 2 and e.option.min_workers == 0)
    assert two.cost_usd_per_day[0] < one.cost_usd_per_day[0]  # fewer boots, less idle billed
    o = two.option
    real = _serve(targets["io"], 2, o.max_workers, o.scale_down_s, rate)
    assert abs(real["cost_usd_per_day"] / two.cost_usd_per_day[0] - 1) <= 0.05, (real, two)
    assert real["p95_s"] <= SLO_S, real
    assert any("measured slower by" in n and n.startswith("io:") for n in advice.notes)


def test_a_measured_slowdown_is_charged_by_level_as_on_the_fleet(
    targets: dict[str, MeasuredTarget],
) -> None:
    """Each simulated request is slowed by how many requests its worker runs once it has
    begun (the level the slowdown is measured by, and what the fleet does), from executions
    measured at level 2-4 brought back to level 1. The bill agrees with the fleet within 5%,
    where charging every request its setting's full x1.5 on the raw samples was 33% high."""
    rate = 6.0
    gpu = targets["gpu"]
    # the pooled executions are what each request took alone: the bursts' x1.5-x2.5 divided out
    assert float(np.median(gpu.execution_s)) == pytest.approx(EXEC_S, rel=0.1)
    # ... and so is their tail: within what the same sleep takes unslowed ("io", same run, same
    # machine: its timers overshoot under load, 62.6 ms p95 seen with both cores busy) and far
    # below what a missed division would leave: the raw samples' tail is the level-4 bursts'
    # x2.5 (125 ms). Never tighter than x1.75, halfway from right to that: two series' p95s on
    # a loaded machine differ by a few spikes (60.0, 62.6 and 72.6 ms failed bounds of x1.2,
    # x1.25 and x1.4 with a busy loop beside; the io series beside them was quieter).
    io_ms = [v * 1e3 for v in targets["io"].execution_s]
    io_p95_ms = float(np.percentile(io_ms, 95)) + noise_tolerance_ms(io_ms)
    bound_s = max(EXEC_S * 1.75, io_p95_ms / 1e3)
    assert bound_s < EXEC_S * 2.5, f"the machine's timers are too noisy to tell: {bound_s:.3f} s"
    assert float(np.percentile(gpu.execution_s, 95)) < bound_s
    advice = advise_targets(
        [gpu], Traffic(rate), Objectives(latency_s=SLO_S), resamples=10,
        scale_down_s=(1.0,), overflow=False,
    )  # fmt: skip
    two = next(e for e in advice.options if e.option.concurrency == 2 and e.option.min_workers == 0)
    o = two.option
    real = _serve(gpu, 2, o.max_workers, o.scale_down_s, rate)
    assert abs(real["cost_usd_per_day"] / two.cost_usd_per_day[0] - 1) <= 0.05, (real, two)
    # p95 is a request slowed x1.5 on both, from the same measured executions (_serve)
    assert abs(real["p95_s"] / two.latency_s[0] - 1) <= 0.10, (real, two)
    assert any("x1.5" in n or "x1.4" in n or "x1.6" in n for n in advice.notes), advice.notes
    assert any("slowed by how many its worker runs" in n for n in advice.notes), advice.notes
