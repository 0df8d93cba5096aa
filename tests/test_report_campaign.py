"""The report's done-when: a two-provider campaign over several simulated days, reported.

Two real targets: the local runtime (its own process per slot: a real cold start) and the
RunPod plugin against its emulator (built on ``gpubench_sdk.testing``'s simulated fleet, in its
own process). The campaign's three daily slots run for real, in this process, with the wall
clock moved to each slot's day (``time.time_ns`` is the only clock the runner stamps requests
with), so the store holds three days of measurements. ``gpubench report --campaign`` must then
show each of the four comparisons as one chart holding every target, under its verdict.
"""

from __future__ import annotations

import json
import re
import time
import tomllib
from collections.abc import Iterator
from pathlib import Path

import pytest
from _emulator import emulator as run_emulator
from test_cli import gpubench

from gpubench_sdk._plan._config import parse_config
from gpubench_sdk.campaign import Schedule, create_campaign, run_campaign

pytest.importorskip("gpubench_runpod", reason="the RunPod plugin (plugins/runpod)")

KEY = "rp-demo-key-1234"
DAY_NS = 86_400 * 10**9
DAY0_NS = 1_767_225_600 * 10**9 + 9 * 3_600 * 10**9  # 2026-01-01T09:00Z
DAYS = 3

PLAN = """
[run]
name = "two-providers"

[workload]
kind = "probe"
sleep_ms = 20

[[targets]]
name = "local"
provider = "local"
handler = "gpubench_sdk.demo:echo"
load = ""
max_workers = 2
idle_timeout_s = 1.0
price_per_s_usd = 0.0003

[[targets]]
name = "runpod"
provider = "runpod"
endpoint_id = "emulated-endpoint"
api_key_env = "RUNPOD_API_KEY"
base_url = "{url}/v2"
rest_url = "{url}/v1"
cold_threshold_ms = 300
poll_interval_s = 0.02
price_per_s_usd = 0.00055

[[scenarios]]
kind = "cold_starts"
n = 1
warm_after = 2
cold_timeout_s = 30

[[scenarios]]
kind = "burst"
total = 16
concurrency = 4
"""


@pytest.fixture(scope="module")
def emulator() -> Iterator[str]:
    args = ("--api-key-env", "RUNPOD_API_KEY", "--cold-start-s", "0.4", "--idle-timeout-s", "1")
    with run_emulator("gpubench_runpod.emulator", *args, env={"RUNPOD_API_KEY": KEY}) as url:
        yield url


@pytest.fixture(scope="module")
def campaign_store(emulator: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    store = tmp_path_factory.mktemp("campaign") / "campaign.sqlite"
    mp = pytest.MonkeyPatch()
    mp.setenv("RUNPOD_API_KEY", KEY)
    try:
        config = parse_config(tomllib.loads(PLAN.replace("{url}", emulator)))
        schedule = Schedule(DAY0_NS, DAYS * 86_400, every_s=86_400, grace_s=3_600)
        create_campaign(config, schedule, store=store, name="two-providers")
        real = time.time_ns
        for day in range(DAYS):
            offset = DAY0_NS + day * DAY_NS + 10**9 - real()  # a second after the slot's time
            mp.setattr(time, "time_ns", lambda offset=offset: real() + offset)
            (slot,) = run_campaign(store, "two-providers", once=True)
            assert (slot.slot, slot.status) == (day, "completed"), slot
        mp.setattr(time, "time_ns", real)
        yield store
    finally:
        mp.undo()


QUESTIONS = ("cold_start", "variability", "burst", "cost_per_day")


def test_the_campaign_report_answers_each_question_with_one_chart_and_a_verdict(
    campaign_store: Path, tmp_path: Path
) -> None:
    page = tmp_path / "report.html"
    proc = gpubench(
        "report", "--campaign", "two-providers", "--store", str(campaign_store), "-o", str(page)
    )
    assert proc.returncode == 0, proc.stderr
    assert f"{DAYS} run(s)" in proc.stdout
    html = page.read_text()
    # self-contained: nothing to run, nothing to fetch
    assert not re.search(r"<script|<link|<img|<iframe|\b(src|href)\s*=|url\(|@import", html)
    for question in QUESTIONS:
        section = re.search(
            rf'<section class="question" data-question="{question}">(.*?)</section>', html, re.S
        )
        assert section, f"no {question} section"
        body = section.group(1)
        assert body.count('<figure class="chart"') == 1, question  # one chart per question
        verdict = re.search(r'<p class="verdict (?:not-)?significant"[^>]*>(.*?)</p>', body)
        assert verdict, f"{question}: no verdict"
        assert verdict.group(1).startswith(("local ", "runpod ")), verdict.group(1)
        svg = body.split("<svg", 1)[1]
        for target in ("local", "runpod"):  # every target on the one chart
            assert f">{target}<" in svg, (question, target)

    out = tmp_path / "r.json"
    proc = gpubench("report", "--campaign", "two-providers", "--store", str(campaign_store),
                    "-o", str(out))  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    data = json.loads(out.read_text())
    print("\n".join(r["verdict"] for r in data["tables"]["comparison"]))
    verdicts = {r["question"]: r for r in data["tables"]["comparison"]}
    assert set(verdicts) == set(QUESTIONS)
    days = {d["day"] for d in data["tables"]["daily"]}
    assert days == {"2026-01-01", "2026-01-02", "2026-01-03"}
    cold = verdicts["cold_start"]
    assert {cold["best"], cold["runner_up"]} == {"local", "runpod"}
    assert cold["best_median_ms"] <= cold["runner_up_median_ms"]
    bills = {b["target"]: b for b in data["series"]["compare_cost"]}
    assert set(bills) == {"local", "runpod"}
    for b in bills.values():  # the bar's parts add up to the day's bill
        parts = ("inference", "idle", "cold_start", "rounding", "fees")
        assert sum(b[f"{p}_usd"] for p in parts) == pytest.approx(b["usd_per_day"], rel=1e-6)
        assert b["usd_per_day_low"] <= b["usd_per_day"] <= b["usd_per_day_high"]


def test_the_reference_layout_keeps_the_reference_reports_order(
    campaign_store: Path, tmp_path: Path
) -> None:
    page = tmp_path / "reference.html"
    proc = gpubench(
        "report", "--campaign", "two-providers", "--layout", "reference",
        "--requests-per-day", "5000", "--store", str(campaign_store), "-o", str(page),
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    html = page.read_text()
    headings = re.findall(r"<h2>(.*?)</h2>", html)
    order = ["Methodology", "Cold start", "Variability", "Autoscaling",
             "Comparative performance review", "Pricing", "Summary"]  # fmt: skip
    found = [h for h in headings if h in order]
    assert found == order, headings
    assert "at 5,000 requests a day" in html
