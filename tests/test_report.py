"""`gpubench report`: every format carries the metrics library's figures, and no secret."""

from __future__ import annotations

import csv
import io
import json
import os
from pathlib import Path

import numpy as np
import pytest
from _report_store import BURST, build_store
from test_cli import gpubench

from gpubench_sdk import Store, metrics
from gpubench_sdk._report import build_report, render


@pytest.fixture(scope="module")
def store_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("report") / "runs.sqlite"
    build_store(path)
    return path


def _report_json(store_path: Path, tmp_path: Path, *runs: str) -> dict:  # type: ignore[type-arg]
    out = tmp_path / "r.json"
    proc = gpubench("report", *runs, "--store", str(store_path), "-o", str(out))
    assert proc.returncode == 0, proc.stderr
    data: dict = json.loads(out.read_text())  # type: ignore[type-arg]
    return data


def test_json_figures_are_the_metrics_librarys(store_path: Path, tmp_path: Path) -> None:
    data = _report_json(store_path, tmp_path, "1", "2", "3")
    tables = data["tables"]
    with Store(store_path, readonly=True) as store:
        for row in tables["summary"]:
            sidx = int(row["scenario"].split(":")[0])
            s = metrics.latency_summary(store, row["run"], target=row["target"], scenario=sidx)
            assert row["p50_ms"] == pytest.approx(s.p50_ms)
            assert row["p95_ms"] == pytest.approx(s.p95_ms)
        for row in tables["cold_start"]:
            cs = metrics.run_cold_starts(store, row["run"], target=row["target"])
            assert row["cold_requests"] == 3
            assert row["boot_mean_ms"] == pytest.approx(float(np.mean(cs.boot_ms)))
            assert row["cold_start_p50_ms"] == pytest.approx(cs.summary.p50_ms)
        daily = metrics.daily_cold_starts(store, [1, 2, 3], target="slow")
        ours = [
            d["median_ms"]
            for d in tables["daily"]
            if d["target"] == "slow" and d["figure"] == "cold_start"
        ]
        assert ours == pytest.approx([d.median_ms for d in daily.days])
        for row in tables["burst"]:
            ba = metrics.run_burst(store, row["run"], target=row["target"], scenario=1)
            assert row["slope_ms_per_request"] == pytest.approx(ba.by_index.slope)
    # the growing target's slope is what the fixture built (2 ms per request), the flat one's ~0
    slopes = {(r["run"], r["target"]): r["slope_ms_per_request"] for r in tables["burst"]}
    assert all(slopes[(run, "slow")] == pytest.approx(2.0, abs=0.3) for run in (1, 2, 3))
    assert all(abs(slopes[(run, "fast")]) < 0.5 for run in (1, 2, 3))
    points = [p for p in data["series"]["burst_points"] if p["target"] == "slow"]
    assert all(len(p["index"]) == BURST - 1 and 7 not in p["index"] for p in points)
    assert {r["target"] for r in tables["cost"]} == {"fast"}  # only "fast" has a price
    assert all(r["total_usd"] > 0 for r in tables["cost"])
    assert [v["days"] for v in tables["variability"]] == [3, 3, 3, 3]


def test_one_day_has_no_variability_section(store_path: Path, tmp_path: Path) -> None:
    data = _report_json(store_path, tmp_path, "2")
    assert "daily" not in data["tables"]
    assert {r["run"] for r in data["tables"]["summary"]} == {2}


def test_csv_and_markdown_carry_the_same_figures(store_path: Path, tmp_path: Path) -> None:
    with Store(store_path, readonly=True) as store:
        content = build_report(store, ["latest"])
    rows = list(csv.DictReader(io.StringIO(render(content, "csv"))))
    markdown = render(content, "markdown")
    for section, table in content.tables.items():
        assert f"## {section.replace('_', ' ')}" in markdown
        for row in table:
            for field, value in row.items():
                if field in ("run", "target", "scenario") or value is None:
                    continue
                found = [
                    r["value"]
                    for r in rows
                    if r["section"] == section
                    and r["field"] == field
                    and r["target"] == str(row.get("target", ""))
                    and r["scenario"] == str(row.get("scenario", ""))
                ]
                assert str(value) in found, (section, field)
    assert sum(r["section"] == "burst_points" for r in rows) > 2 * BURST


@pytest.mark.parametrize(("suffix", "start"), [(".html", "<!DOCTYPE html>"), (".md", "# "),
                                               (".csv", "section,"), (".json", "{")])  # fmt: skip
def test_format_follows_the_suffix(
    store_path: Path, tmp_path: Path, suffix: str, start: str
) -> None:
    out = tmp_path / f"r{suffix}"
    proc = gpubench("report", "latest", "--store", str(store_path), "-o", str(out))
    assert proc.returncode == 0, proc.stderr
    assert out.read_text().startswith(start)


def test_bad_references_are_clear_errors(store_path: Path, tmp_path: Path) -> None:
    proc = gpubench("report", "99", "--store", str(store_path), "-o", str(tmp_path / "r.html"))
    assert proc.returncode == 2 and "99" in proc.stderr and "Traceback" not in proc.stderr
    missing = tmp_path / "none.sqlite"
    proc = gpubench("report", "1", "--store", str(missing), "-o", str(tmp_path / "r.html"))
    assert proc.returncode == 2 and "--store" in proc.stderr
    assert not missing.exists()


PLAN = """
[run]
name = "secret-check"
[workload]
kind = "probe"
[[targets]]
name = "loc"
provider = "local"
handler = "gpubench_sdk._local.demo:echo"
load = ""
api_key_env = "GPUBENCH_REPORT_TEST_KEY"
headers = {{ "X-Trace" = "{secret}" }}
price_per_s_usd = 0.0004
[[scenarios]]
kind = "burst"
total = 6
concurrency = 2
"""


def test_a_key_in_the_environment_never_reaches_a_report(tmp_path: Path) -> None:
    """A real run with an API key from the environment (also echoed into a header value):
    no format of its report contains the key."""
    secret = "sk-live-" + os.urandom(12).hex()
    plan = tmp_path / "plan.toml"
    plan.write_text(PLAN.format(secret=secret))
    env = os.environ | {"GPUBENCH_REPORT_TEST_KEY": secret}
    store = tmp_path / "s.sqlite"
    proc = gpubench("run", str(plan), "-o", str(store), "--quiet", env=env)
    assert proc.returncode == 0, proc.stderr
    for fmt in ("html", "json", "csv", "markdown"):
        out = tmp_path / f"r.{fmt}"
        proc = gpubench("report", "latest", "--store", str(store), "-o", str(out), env=env)
        assert proc.returncode == 0, proc.stderr
        text = out.read_text()
        assert "GPUBENCH_REPORT_TEST_KEY" in text  # the config is there, the value is not
        assert secret not in text
        assert secret[8:] not in text
