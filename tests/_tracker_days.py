"""A campaign of many simulated days against two emulated providers, for the tracker's tests.

Both targets are the RunPod plugin against its emulator (the testing kit's simulated fleet),
served in this process so that the test can change a fleet between days: from ``CHANGE_DAY``
on, the ``shifty`` provider's cold start doubles. Each call is one ``runsync`` request (no
status polls: the emulators share this process's two cores with the runner, and a poll's
timing noise would blur the change). Every slot is a real ``run_campaign`` pass with
the wall clock moved to the slot's day (``time.time_ns`` is the only clock the runner and the
campaign stamp with), as tests/test_report_campaign.py does for three days.
"""

from __future__ import annotations

import contextlib
import dataclasses
import time
import tomllib
from collections.abc import Iterator
from pathlib import Path

import pytest

from gpubench_sdk import testing as kit
from gpubench_sdk._plan._config import parse_config
from gpubench_sdk.campaign import Schedule, create_campaign, run_campaign

KEY = "rp-tracker-secret-7f3a9c1e"  # the secret the tests look for in every file
DAY_NS = 86_400 * 10**9
DAY0_NS = 1_767_225_600 * 10**9 + 9 * 3_600 * 10**9  # 2026-01-01T09:00Z
COLD_S = 0.05
CHANGE_DAY = 20  # 1-based: the 20th day's slot runs with the doubled cold start
NAME = "tracker"

PLAN = """
[run]
name = "tracker"

[workload]
kind = "probe"
sleep_ms = 5

[[targets]]
name = "steady"
provider = "runpod"
region = "emu-east"
endpoint_id = "emulated-endpoint"
api_key_env = "RUNPOD_API_KEY"
base_url = "{steady}/v2"
rest_url = "{steady}/v1"
cold_threshold_ms = 30
mode = "runsync"  # one request a call: the emulator in this process answers less
poll_interval_s = 0.01
price_per_s_usd = 0.00055

[[targets]]
name = "shifty"
provider = "runpod"
region = "emu-west"
endpoint_id = "emulated-endpoint"
api_key_env = "RUNPOD_API_KEY"
base_url = "{shifty}/v2"
rest_url = "{shifty}/v1"
cold_threshold_ms = 30
mode = "runsync"  # one request a call: the emulator in this process answers less
poll_interval_s = 0.01
price_per_s_usd = 0.00031

[[scenarios]]
kind = "cold_starts"
n = 5
warm_after = 1
cold_timeout_s = 30

[[scenarios]]
kind = "burst"
total = 8
concurrency = 4
"""


@contextlib.contextmanager
def campaign_days(store: Path, days: int, change_day: int = CHANGE_DAY) -> Iterator[Path]:
    """``store`` holding campaign ``NAME``'s first ``days`` daily slots, run for real, the
    ``shifty`` cold start doubled from day ``change_day`` (1-based) on."""
    emulator = pytest.importorskip("gpubench_runpod.emulator", reason="plugins/runpod")
    fleets = {
        name: kit.quick_fleet(COLD_S, max_workers=1, idle_timeout_s=0.02, seed=i)
        for i, name in enumerate(("steady", "shifty"))
    }
    mp = pytest.MonkeyPatch()
    mp.setenv("RUNPOD_API_KEY", KEY)
    try:
        with (
            kit.serve(emulator.make_app(fleets["steady"], api_key=KEY)) as steady,
            kit.serve(emulator.make_app(fleets["shifty"], api_key=KEY)) as shifty,
        ):
            plan = PLAN.replace("{steady}", steady.url).replace("{shifty}", shifty.url)
            config = parse_config(tomllib.loads(plan))
            schedule = Schedule(DAY0_NS, days * 86_400, every_s=86_400, grace_s=3_600)
            create_campaign(config, schedule, store=store, name=NAME)
            real = time.time_ns
            for day in range(days):
                if day + 1 == change_day:
                    fleet = fleets["shifty"]
                    fleet.config = dataclasses.replace(
                        fleet.config, cold_start=kit.Duration.fixed(2 * COLD_S)
                    )
                offset = DAY0_NS + day * DAY_NS + 10**9 - real()  # a second after the slot
                mp.setattr(time, "time_ns", lambda offset=offset: real() + offset)
                (slot,) = run_campaign(store, NAME, once=True)
                assert (slot.slot, slot.status) == (day, "completed"), slot
            mp.setattr(time, "time_ns", real)
        yield store
    finally:
        mp.undo()


if __name__ == "__main__":
    # By hand: time 30 days (python tests/_tracker_days.py), or rewrite examples/tracker/sample,
    # the documents docs/tracker.md builds a site from (python tests/_tracker_days.py --sample).
    import sys
    import tempfile

    from gpubench_sdk.campaign import export_campaign

    sample = "--sample" in sys.argv
    days, change = (14, 10) if sample else (30, CHANGE_DAY)
    started = time.perf_counter()
    with (
        tempfile.TemporaryDirectory() as tmp,
        campaign_days(Path(tmp) / "t.sqlite", days, change) as s,
    ):
        print(f"{time.perf_counter() - started:.1f} s for {days} days: {s.stat().st_size} bytes")
        if sample:
            out = Path(__file__).resolve().parents[1] / "examples" / "tracker" / "sample"
            origin = "gpubench's test suite: two emulated RunPod endpoints on loopback"
            print(export_campaign(s, NAME, out, origin=origin))
