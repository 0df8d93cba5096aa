"""``gpubench cost catalog`` and one stale-price warning per command or run."""

from __future__ import annotations

import json
from pathlib import Path

from test_cli import gpubench


def test_catalog_lists_every_entry_with_source_and_date_oldest_first() -> None:
    done = gpubench("cost", "catalog", "--json")
    assert done.returncode == 0, done.stderr
    rows = json.loads(done.stdout)
    assert len(rows) > 30
    assert all(r["source"] and r["read_on"] and r["unit"] for r in rows)
    assert [r["read_on"] for r in rows] == sorted(r["read_on"] for r in rows)
    stale = json.loads(gpubench("cost", "catalog", "--json", "--stale").stdout)
    assert all(r["stale"] for r in stale) and rows[0] in stale  # the oldest is stale
    table = gpubench("cost", "catalog", "--provider", "runpod")
    assert "A100 80GB" in table.stdout and "runpod.io" in table.stdout
    bad = gpubench("cost", "catalog", "--provider", "nope")
    assert bad.returncode == 2 and "--provider" in bad.stderr


def test_a_command_using_many_stale_prices_warns_once(tmp_path: Path) -> None:
    done = gpubench("cost", "scenario", "--max-age-days", "1")  # five catalog targets
    assert done.returncode == 0, done.stderr
    warnings = [line for line in done.stderr.splitlines() if line.startswith("warning:")]
    assert len(warnings) == 1, done.stderr
    assert "5 catalog price(s)" in warnings[0] and "oldest:" in warnings[0]


STALE_PLAN = """
[workload]
kind = "probe"
sleep_ms = 5
{targets}
[[scenarios]]
kind = "burst"
total = 2
concurrency = 1
"""
TARGET = """
[[targets]]
name = "{name}"
provider = "local"
handler = "gpubench_sdk.demo:echo"
load = ""
billing = "{billing}"
price_sku = "{sku}"
timeout_s = 5
"""


def test_a_run_priced_from_stale_catalog_entries_warns_once(tmp_path: Path) -> None:
    # both prices are looked up before the run (the price check) and after it (the bill)
    targets = TARGET.format(name="a", billing="runpod", sku="A100 80GB")
    targets += TARGET.format(name="b", billing="inferless", sku="A100 (shared)")
    plan = tmp_path / "plan.toml"
    plan.write_text(STALE_PLAN.format(targets=targets))
    done = gpubench("run", str(plan), "--store", str(tmp_path / "s.sqlite"), "--quiet")
    assert done.returncode == 0, done.stderr
    warnings = [line for line in done.stderr.splitlines() if line.startswith("warning:")]
    stale = [line for line in warnings if "catalog price" in line]
    assert len(stale) == 1, done.stderr
    assert "oldest: inferless A100 (shared) (read 2023-12-31" in stale[0]
