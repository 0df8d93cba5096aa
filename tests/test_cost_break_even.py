"""Break-even of commitments against on demand: "never" when it never pays, which wins where."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from gpubench_sdk import ConfigError
from gpubench_sdk._cli import main
from gpubench_sdk.cost import break_even
from gpubench_sdk.cost._commitments import Commitment, compare_commitments, parse_commitment


def test_a_reserved_price_above_on_demand_never_pays() -> None:
    b = break_even(on_demand_usd_per_s=0.00076, reserved_usd_per_s=0.001)
    assert b.never and b.utilization is None and b.billed_s_per_day is None
    assert b.reserved_usd_per_day == pytest.approx(86.4)
    exactly = break_even(on_demand_usd_per_s=0.001, reserved_usd_per_s=0.001)
    assert exactly.utilization == pytest.approx(1.0)  # pays only billed all day: still a point


def test_each_option_breaks_even_where_its_day_costs_a_day_on_demand() -> None:
    od = 0.00076  # $65.66 a day billed all day
    active = Commitment("active", 2.05, "hour")  # $49.20 a day
    yearly = Commitment("yearly", 1000.0, "month", min_months=12)
    result = compare_commitments(od, [active, yearly], need_months=12, billed_s_per_request=12)
    a, y = result.lines
    assert a.break_even_utilization == pytest.approx(49.2 / (od * 86_400))
    assert a.break_even_requests_per_day == pytest.approx(a.break_even_utilization * 7200)
    assert y.usd_per_day == pytest.approx(1000 * 12 / 365)
    assert y.break_even_utilization == pytest.approx(y.usd_per_day / (od * 86_400))
    # the cheaper flat option wins above its own point; the other never wins
    assert y.usd_per_day < a.usd_per_day
    assert y.wins_from == y.break_even_utilization and a.wins_from is None
    assert result.on_demand_wins_below == pytest.approx(y.break_even_utilization)
    # needed for 3 months only, a 12-month term costs four times as much per day used
    short = compare_commitments(od, [yearly], need_months=3).lines[0]
    assert short.usd_per_day == pytest.approx(4 * y.usd_per_day)
    assert short.break_even_utilization is None  # $131.5/day > $65.66: never


def test_parse_commitment_names_the_fix() -> None:
    assert parse_commitment("r=900,term=12", "month", 0) == Commitment("r", 900, "month", 12)
    assert parse_commitment("1.5", "hour", 1).name == "hourly-2"
    with pytest.raises(ConfigError, match="--monthly"):
        parse_commitment("r=lots", "month", 0)


def test_cli_prints_never_and_where_each_option_wins() -> None:
    runner = CliRunner()
    args = ["cost", "break-even", "-t", "runpod,rate=0.00076", "--hourly", "active=2.05"]
    done = runner.invoke(main, [*args, "--hourly", "dear=4", "--billed-s-per-request", "12"])
    assert done.exit_code == 0, done.output
    assert "never" in done.output and "above 74.9%" in done.output
    assert "on demand wins below 74.9% utilisation" in done.output
    as_json = runner.invoke(main, ["cost", "break-even", "-t", "x,rate=0.001", "--hourly", "9"])
    assert as_json.exit_code == 0
    table = runner.invoke(
        main, ["cost", "break-even", "-t", "x,rate=0.001", "--hourly", "9", "--json"]
    )
    doc = json.loads(table.output)
    assert doc["options"][0]["break_even"] == "never" and doc["on_demand_wins_below"] == 1.0
    missing = runner.invoke(main, ["cost", "break-even", "-t", "x,rate=0.001"])
    assert missing.exit_code == 2 and "--hourly/--monthly" in missing.output


def test_break_even_example_runs() -> None:
    import subprocess
    import sys
    from pathlib import Path

    path = Path(__file__).parents[1] / "examples" / "cost_break_even.py"
    done = subprocess.run([sys.executable, str(path)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "nothing sent" in done.stdout and "breaks even at 74.9%" in done.stdout
    costs = [float(line.split("$")[1].split(",")[0]) for line in done.stdout.splitlines()
             if line.strip().startswith(("most_recently_idle:", "longest_idle:"))]  # fmt: skip
    assert len(costs) == 2 and costs[0] < costs[1]  # reusing the newest idle worker is cheaper
