"""The proof of ``advise``: measure two emulated providers with ordinary runs, ask for advice,
then run the recommended setting on the testing fleet under that traffic.

Two RunPod emulators (the real plugin over loopback HTTP) front ``SimulatedFleet``s with known
behaviour: "cheap" boots slowly (0.6-1.0 s), "fast" boots in 0.2-0.3 s and costs 50% more per
second; both run the probe's 50 ms sleep (the fast one at half speed: 100 ms). A short Poisson
run measures each. ``advise`` then sees only the stored measurements. The check replays the
recommended setting, and the runner-up, on the same kind of fleet in virtual time
(``testing._replay.VirtualTimeLoop``) under an independent Poisson trace of the same rate.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from typing import Any

import anyio
import numpy as np
import pytest
from _plans import emulated_runpod
from _virtual_serve import overflow_day, serve_trace

from gpubench_sdk import Advice, Objectives, Store, Traffic, advise, build_run
from gpubench_sdk._plan._config import parse_config
from gpubench_sdk.cost import poisson_arrivals
from gpubench_sdk.cost._policy import provider_policy
from gpubench_sdk.testing import Duration, FleetConfig, SimulatedFleet, serve
from gpubench_sdk.testing._replay import VirtualTimeLoop

pytest.importorskip("gpubench_runpod")
from gpubench_runpod.emulator import make_app

KEY = "rpa_advise_0c9b7a3e5d1f"
POLICY = provider_policy("runpod").policy  # the emulated platforms pick workers as RunPod does
# name -> (cold start, time scale, USD per second)
PROVIDERS: dict[str, tuple[Duration, float, float]] = {
    "cheap": (Duration.uniform(0.6, 1.0), 1.0, 0.0010),
    "fast": (Duration.uniform(0.1, 0.15), 2.0, 0.0015),  # x2: boots 0.2-0.3 s, runs 100 ms
}
MEASURE_IDLE_S = 0.25  # the fleets' scale-down while measuring: most requests find them cold
RATE = 0.2  # the traffic advised for: Poisson, a request every 5 s on average
SLO_S = 0.8  # p95 latency objective
DELAYS = (1.0, 3.0, 10.0, 30.0)


def _fleet_config(name: str, *, min_workers: int, max_workers: int, idle_s: float) -> FleetConfig:
    cold, scale, _ = PROVIDERS[name]
    return FleetConfig(
        cold_start=cold,
        min_workers=min_workers,
        max_workers=max_workers,
        idle_timeout_s=idle_s / scale,  # durations are multiplied by time_scale
        time_scale=scale,
        worker_policy=POLICY,
        seed=7,
    )


@contextmanager
def _emulators() -> Iterator[dict[str, str]]:
    with ExitStack() as stack:
        urls = {}
        for name in PROVIDERS:
            fleet = SimulatedFleet(
                _fleet_config(name, min_workers=0, max_workers=2, idle_s=MEASURE_IDLE_S)
            )
            served = stack.enter_context(serve(make_app(fleet, api_key=KEY)))
            urls[name] = served.url
        yield urls


def _plan(urls: dict[str, str]) -> Any:
    return parse_config(
        {
            "run": {"name": "advise-proof"},
            "workload": {"kind": "probe", "sleep_ms": 50},
            # billed per millisecond of worker time ("local", the catalog's)
            "targets": [
                emulated_runpod(name, url, "ADVISE_RUNPOD_KEY", PROVIDERS[name][2])
                for name, url in urls.items()
            ],
            # confirmed cold starts one at a time (each after the fleet scaled to zero), each
            # followed by warm requests: cold starts measured without queueing behind another
            "scenarios": [{"kind": "cold_starts", "n": 12, "warm_after": 2, "cold_timeout_s": 10}],
        }
    )


def _on_fleet(name: str, min_workers: int, max_workers: int, idle_s: float) -> dict[str, float]:
    """Serve an independent Poisson trace (a simulated day's window) on the emulated platform
    in virtual time: its meter's bill per day, p95 latency and cold share."""
    window = Traffic(RATE).window_s
    config = _fleet_config(name, min_workers=min_workers, max_workers=max_workers, idle_s=idle_s)
    served = serve_trace(
        lambda clock: SimulatedFleet(config, clock=clock),
        poisson_arrivals(RATE, window, seed=12345),
        {"sleep_ms": 50},
        until_s=window,
    )
    return {
        "cost_usd_per_day": served.cost_usd(PROVIDERS[name][2]) * 86_400 / window,
        "p95_s": served.p95_s(),
        "cold_rate": served.cold_rate(),
    }


@pytest.fixture(scope="module")
def advice(tmp_path_factory: pytest.TempPathFactory) -> Advice:
    """The two emulated providers measured by an ordinary run, and the advice on them."""
    path = tmp_path_factory.mktemp("advise") / "measured.sqlite"
    with pytest.MonkeyPatch.context() as env, _emulators() as urls:
        env.setenv("ADVISE_RUNPOD_KEY", KEY)
        result = anyio.run(build_run(_plan(urls), store=path).run)
    with Store(path, readonly=True) as store:
        return advise(
            store,
            [result.run_id],
            Traffic(RATE),
            Objectives(latency_s=SLO_S),
            scale_down_s=DELAYS,
            resamples=30,
        )


def test_the_recommendation_holds_on_the_fleet(advice: Advice) -> None:
    best, second = advice.recommended, advice.runner_up
    assert best is not None and second is not None and advice.meets_objectives, advice.reason
    # the slow-booting provider cannot meet p95 <= 0.8 s scaled to zero with short delays,
    # and staying warm costs more than the fast one's boots: "fast" scaled to zero wins
    assert best.option.target == "fast" and best.option.min_workers == 0, advice.reason
    assert best.frontier and best.meets_all[0] >= 0.9
    # 12 cold starts for a p95 that falls among cold requests (most are): said to be too few
    assert any("cold starts would resolve it" in note for note in advice.notes), advice.notes
    o = best.option
    real = _on_fleet(o.target, o.min_workers, o.max_workers, o.scale_down_s)
    predicted = best.cost_usd_per_day[0]
    assert real["p95_s"] <= SLO_S, real
    assert abs(real["cost_usd_per_day"] / predicted - 1) <= 0.05, (real, best.cost_usd_per_day)
    r = second.option
    rival = _on_fleet(r.target, r.min_workers, r.max_workers, r.scale_down_s)
    beats_on_both = (
        rival["cost_usd_per_day"] < real["cost_usd_per_day"] and rival["p95_s"] < real["p95_s"]
    )
    assert not beats_on_both, (rival, real)


def _pair_on_fleets(
    primary: str, workers: int, secondary: str, max_workers: int, idle_s: float
) -> dict[str, float]:
    """``primary`` kept warm (``min = max = workers``) and ``secondary`` scaled to zero, each
    its own fleet on one virtual clock: a request goes to the primary when one of its workers
    is idle, else to the secondary. Both meters billed."""
    window = Traffic(RATE).window_s
    arrivals = poisson_arrivals(RATE, window, seed=54321)
    loop = VirtualTimeLoop()
    warm = _fleet_config(primary, min_workers=workers, max_workers=workers, idle_s=30.0)
    cold = _fleet_config(secondary, min_workers=0, max_workers=max_workers, idle_s=idle_s)

    async def drive() -> dict[str, float]:
        first, second = SimulatedFleet(warm, clock=loop.time), SimulatedFleet(cold, clock=loop.time)
        async with first, second:
            rates = [PROVIDERS[primary][2], PROVIDERS[secondary][2]]
            usd = await overflow_day(loop, [first, second], arrivals, window, rates)
            truths = first.truths() + second.truths()
        latency = [((t.queue_ms or 0.0) + (t.execution_ms or 0.0)) / 1e3 for t in truths]
        return {
            "cost_usd_per_day": usd * 86_400 / window,
            "p95_s": float(np.percentile(latency, 95)),
            "overflowed": len(second.truths()) / len(truths),
        }

    try:
        return loop.run_until_complete(drive())
    finally:
        loop.close()


def test_an_overflow_pair_costs_on_the_fleets_what_advise_said(advice: Advice) -> None:
    pair = next(
        e
        for e in advice.options
        if e.option.target == "cheap" and e.option.overflow_to == "fast"
        and e.option.min_workers == 1 and e.option.scale_down_s == DELAYS[0]
    )  # fmt: skip
    o = pair.option
    real = _pair_on_fleets(o.target, o.min_workers, "fast", o.overflow_max_workers, o.scale_down_s)
    assert 0 < real["overflowed"] < 0.2, real  # a worker busy 50 ms in 5 s rarely overflows
    assert abs(real["cost_usd_per_day"] / pair.cost_usd_per_day[0] - 1) <= 0.05, (
        real,
        pair.cost_usd_per_day,
    )
    assert pair.latency_s[1] * 0.8 <= real["p95_s"] <= max(pair.latency_s[2] * 1.2, SLO_S), real
