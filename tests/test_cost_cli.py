"""``gpubench cost`` end to end in subprocesses, and the cost example."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from test_cli import gpubench

from gpubench_sdk.cost._reference import REFERENCE_LINES


def test_scenario_reference_prints_the_reports_totals() -> None:
    done = gpubench("cost", "scenario", "--reference")
    assert done.returncode == 0, done.stderr
    for line in REFERENCE_LINES:
        row = next(r for r in done.stdout.splitlines() if line.label in r)
        assert f"{line.report_total_usd:.3f}" in row.replace(",", ""), row
    ruled = json.loads(gpubench("cost", "scenario", "--reference", "--with-rules", "--json").stdout)
    hf = next(b for b in ruled if b["label"] == "Hugging Face")
    # per-event columns: the input is per event, the day's totals are events x that
    assert hf["cold_start_s_per_event"] == 53.3 and hf["scale_down_events"] == 100
    assert hf["cold_start_s"] == pytest.approx(hf["cold_start_s_per_event"] * 100)
    # 15 min is Hugging Face's default delay, not a minimum: the scenario's 60 s holds
    assert hf["scale_down_s"] == 60 and hf["billed_s"] % 60 == 0  # billed per minute


def test_scenario_with_catalog_targets_warns_about_stale_prices(tmp_path: Path) -> None:
    done = gpubench(
        "cost",
        "scenario",
        "-t",
        "runpod:A100 80GB,cold=20",
        "-t",
        "modal,rate=0.001,label=Acme",
        "--requests",
        "100",
        "--events",
        "10",
        "--json",
        "--max-age-days",
        "0",
    )
    assert done.returncode == 0, done.stderr
    bills = {b["label"]: b for b in json.loads(done.stdout)}
    # RunPod: (100 x 12 + (60 - 12) x 10 + 20 x 10) / 10 = 188 s per life, x 10, at 0.00076
    assert abs(bills["runpod A100 80GB"]["total_usd"] - 1880 * 0.00076) < 1e-12
    # Acme: an explicit rate, and the default --cold-start-s 30: 1,200 + 480 + 300 = 1,980 s
    assert abs(bills["Acme"]["total_usd"] - 1980 * 0.001) < 1e-12
    assert "warning:" in done.stderr and "runpod A100 80GB" in done.stderr


def test_scenario_errors_name_the_option() -> None:
    done = gpubench("cost", "scenario", "-t", "runpod")
    assert done.returncode == 2
    assert "--target" in done.stderr and "SKU" in done.stderr
    done = gpubench("cost", "scenario", "-t", "runpod:TPU")
    assert done.returncode == 2 and "price_sku" in done.stderr and "A100 80GB" in done.stderr


def test_price_override_file_changes_the_bill(tmp_path: Path) -> None:
    override = tmp_path / "prices.json"
    override.write_text(
        json.dumps(
            {
                "prices": [
                    {
                        "provider": "runpod",
                        "sku": "A100 80GB",
                        "price_usd": 0.001,
                        "unit": "usd_per_second",
                        "source": "test",
                        "read_on": "2026-11-01",
                    }
                ]
            }
        )
    )
    done = gpubench(
        "cost",
        "scenario",
        "-t",
        "runpod:A100 80GB,cold=0",
        "--prices",
        str(override),
        "--requests",
        "10",
        "--events",
        "1",
        "--inference-s",
        "1",
        "--json",
    )
    assert done.returncode == 0, done.stderr
    # one life: 10 x 1 s + (60 - 1) s idle = 69 s at $0.001
    assert abs(json.loads(done.stdout)[0]["total_usd"] - 0.069) < 1e-12


def test_whatif_sweeps_and_names_the_cheapest() -> None:
    done = gpubench(
        "cost",
        "whatif",
        "-t",
        "runpod:A100 80GB",
        "--rps",
        "0.02",
        "--hours",
        "6",
        "--exec-s",
        "2",
        "--cold-s",
        "20",
        "--scale-down",
        "5,120",
        "--min-workers",
        "0",
        "--slo-s",
        "100",
    )
    assert done.returncode == 0, done.stderr
    assert "what-if" in done.stdout and "cheapest meeting p95 <= 100 s" in done.stdout
    missing = gpubench("cost", "whatif", "-t", "runpod:A100 80GB", "--exec-s", "1", "--cold-s", "1")
    assert missing.returncode == 2 and "--rps" in missing.stderr


def test_cost_example_runs() -> None:
    path = Path(__file__).parents[1] / "examples" / "cost_scenario.py"
    done = subprocess.run([sys.executable, str(path)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    for line in REFERENCE_LINES:
        row = next(r for r in done.stdout.splitlines() if r.startswith(line.label))
        reported, as_reported = row.split()[-3:-1]
        assert reported == as_reported  # the report's total, reproduced by its own method
    assert "cheapest meeting p95" in done.stdout
