"""Cold starts as mixtures: the modes found in known mixtures (shares and medians inside their
intervals, one mode where there is one), and a fleet whose cold starts come from two modes,
measured through a real run over loopback, reported with both modes on the console."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from _scenario_fleet import FleetProvider, fleet_server, require_fair_measurement

from gpubench_sdk import Burst, EchoProbe, Store, metrics, run
from gpubench_sdk._cli._run import cold_start_mode_lines, print_run
from gpubench_sdk.testing import Duration, FleetConfig


def mixture(rng: np.random.Generator, n: int, parts: list[tuple[float, float]]) -> np.ndarray:
    """``n`` log-normal cold starts, ``round(share * n)`` of them around each part's median."""
    counts = [round(share * n) for share, _ in parts]
    return np.concatenate(
        [
            np.exp(rng.normal(np.log(median), 0.15, k))
            for k, (_, median) in zip(counts, parts, strict=True)
        ]
    )


@pytest.mark.parametrize(
    "parts",
    [
        [(0.82, 1900.0), (0.18, 41000.0)],  # FlashBoot-like: most from a snapshot, some not
        [(0.5, 800.0), (0.5, 4000.0)],
        [(0.6, 500.0), (0.25, 3000.0), (0.15, 20000.0)],
    ],
)
def test_the_modes_of_known_mixtures_are_found(parts: list[tuple[float, float]]) -> None:
    for seed in range(3):
        rng = np.random.default_rng(seed)
        samples = mixture(rng, 120, parts)
        found = metrics.cold_start_modes(samples, seed=seed)
        assert len(found.modes) == len(parts), found.text
        for mode, (share, median) in zip(found.modes, parts, strict=True):
            assert mode.share_ci[0] <= share <= mode.share_ci[1], found.text
            assert mode.median_ci_ms[0] <= median <= mode.median_ci_ms[1], found.text
        assert abs(sum(m.share for m in found.modes) - 1) < 1e-9


def test_one_mode_is_one_mode() -> None:
    for seed in range(10):
        rng = np.random.default_rng(seed)
        one = np.exp(rng.normal(np.log(2500), 0.4, 80))
        found = metrics.cold_start_modes(one)
        assert len(found.modes) == 1 and found.text.startswith("one mode at 2.")
    assert metrics.cold_start_modes([]).text == "no cold starts"
    assert len(metrics.cold_start_modes([900, 30000, 950, 31000]).modes) == 1  # too few


def test_the_text_says_shares_and_medians() -> None:
    rng = np.random.default_rng(4)
    found = metrics.cold_start_modes(mixture(rng, 200, [(0.8, 1900.0), (0.2, 41000.0)]))
    assert found.text in ("80% at 1.9 s, 20% at 41 s", "80% at 1.9 s, 20% at 40 s",
                          "80% at 1.9 s, 20% at 42 s")  # fmt: skip


@pytest.mark.slow
@pytest.mark.anyio
@pytest.mark.parametrize("two_modes", [True, False])
async def test_a_fleet_of_two_cold_start_modes_is_reported_with_both(
    two_modes: bool, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    fast, slow = Duration.lognormal(0.3, 0.08), Duration.lognormal(1.5, 0.08)
    cold = Duration.mixture((0.7, fast), (0.3, slow)) if two_modes else fast
    # 48 workers, a burst of 48 at once and executions longer than any boot: no worker is
    # free before every one has booted, so each request waits for a boot of its own.
    config = FleetConfig(cold_start=cold, max_workers=48, idle_timeout_s=60, seed=3)
    with fleet_server(config) as server:
        provider = FleetProvider(url=server.url)
        result = await run(
            {"fleet": provider},
            EchoProbe(sleep_ms=2000),  # each request holds its worker 2 s
            [Burst(total=48, concurrency=48), Burst(total=8, concurrency=4)],  # then 8 warm
            store=tmp_path / "modes.sqlite",
        )
    # 48 requests at once beside the fleet in one process: on a starved machine the client's
    # own delay joins every cold start, and the modes move with it (the check is of the fit)
    require_fair_measurement(result)
    with Store(tmp_path / "modes.sqlite", readonly=True) as store:
        info = store.run(result.run_id)
        found = metrics.run_cold_start_modes(store, info, target="fleet")
        lines = cold_start_mode_lines(store, info)
        capsys.readouterr()
        print_run(store, info, "completed")
        printed = capsys.readouterr().out
    assert found.n == 48
    if not two_modes:
        assert len(found.modes) == 1 and not lines
        return
    assert len(found.modes) == 2, found.text
    quick, long = found.modes
    # A loaded machine adds its own delay to every measured cold start alike, so the modes
    # are judged by what it cannot move: their shares, and the gap between their medians
    # (the fleet's: 1.5 s - 0.3 s).
    assert quick.share_ci[0] <= 0.7 <= quick.share_ci[1]
    assert 1050 <= long.median_ms - quick.median_ms <= 1350, found.text
    assert quick.median_ms >= 280 and quick.median_ci_ms[0] <= quick.median_ms
    (line,) = lines
    assert line.startswith("fleet: 48 cold starts, 2 modes: ")
    assert line in printed
