"""`gpubench report`: every format carries the metrics library's figures, and no secret."""

from __future__ import annotations

import csv
import io
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from _plans import local_plan
from _report_store import BURST, build_store
from test_cli import gpubench

from gpubench_sdk import Store, metrics
from gpubench_sdk._report import build_report, render
from gpubench_sdk._report._summary import RATES, usd


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


PLAN = local_plan(
    """
[run]
name = "secret-check"
[workload]
kind = "probe"
""",
    """api_key_env = "GPUBENCH_REPORT_TEST_KEY"
headers = {{ "X-Trace" = "{secret}" }}
price_per_s_usd = 0.0004
""",
    """[[scenarios]]
kind = "burst"
total = 6
concurrency = 2
""",
)


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


def test_each_verdict_is_metrics_compare_on_the_pooled_samples(store_path: Path) -> None:
    with Store(store_path, readonly=True) as store:
        content = build_report(store, [1, 2, 3])
        pooled = {}
        for target in ("fast", "slow"):
            cold = [metrics.run_cold_starts(store, run, target=target).cold_start_ms
                    for run in (1, 2, 3)]  # fmt: skip
            pooled[target] = np.concatenate(cold)
    verdicts = {r["question"]: r for r in content.tables["comparison"]}
    # one target streams and one has a price: no verdict on those two questions
    assert set(verdicts) == {"cold_start", "variability", "burst"}
    cold = verdicts["cold_start"]
    c = metrics.compare(pooled["fast"], pooled["slow"], a_name="fast", b_name="slow")
    assert (cold["best"], cold["runner_up"]) == ("fast", "slow")  # the fixture boots "slow" later
    assert cold["difference_ms"] == pytest.approx(c.p50.diff_ms)
    assert (cold["difference_ci_low_ms"], cold["difference_ci_high_ms"]) == pytest.approx(
        c.p50.diff_ci_ms
    )
    assert cold["p_value"] == pytest.approx(c.rank_test.p_value)
    assert cold["significant"] and "significant" in cold["verdict"]
    assert cold["verdict"].startswith("fast has the lowest cold start")
    burst = verdicts["burst"]  # "slow" grows 2 ms per request: "fast" wins, significantly
    assert (burst["best"], burst["significant"]) == ("fast", True)
    days = {r["target"]: r["range_ms"] for r in content.tables["variability"]
            if r["figure"] == "cold_start"}  # fmt: skip
    assert verdicts["variability"]["best"] == min(days, key=lambda t: days[t])
    assert verdicts["variability"]["difference_ms"] == pytest.approx(
        max(days.values()) - min(days.values())
    )


def test_tables_read_as_people_read_them(store_path: Path, tmp_path: Path) -> None:
    """Human headers with units, the deciding columns first, money as the CLI shows it, and
    one definition of each rate: the JSON's fraction is the CLI's and the page's percent."""
    html_path = tmp_path / "r.html"
    proc = gpubench("report", "1", "2", "3", "--store", str(store_path), "-o", str(html_path))
    assert proc.returncode == 0, proc.stderr
    html = html_path.read_text()
    summary = html.split("<h2>Summary</h2>", 1)[1].split("</table>", 1)[0]
    headers = re.findall(r"<th[^>]*>(.*?)</th>", summary)
    assert headers[:5] == ["target", "scenario", "p50 (ms) [95% CI]", "p95 (ms)", "p99 (ms)"]
    assert not any("_" in h for h in headers)
    data = _report_json(store_path, tmp_path, "1", "2", "3")
    cost = data["tables"]["cost"][0]
    shown = usd(cost["total_usd"]).lstrip("$")
    assert len(shown.replace(".", "").lstrip("0")) >= 4  # 4 significant digits, not cents
    assert f"<td>{shown}</td>" in html
    # every unit the cost module prices is in the JSON; the page shows only those counted
    units = ("per_request_usd", "per_1k_requests_usd", "per_1k_input_tokens_usd",
             "per_million_output_tokens_usd", "per_image_usd", "per_audio_minute_usd")  # fmt: skip
    assert all(unit in cost for unit in units)
    costs = html.split("<h2>Cost of the runs</h2>", 1)[1].split("</table>", 1)[0]
    assert "per 1,000 requests ($)" in costs
    counted = [c for c in ("per_image_usd", "per_million_output_tokens_usd") if cost[c]]
    assert ("per image ($)" in costs) == ("per_image_usd" in counted)
    assert ("per 1M output tokens ($)" in costs) == ("per_million_output_tokens_usd" in counted)
    cli = gpubench("results", "show", "1", "--store", str(store_path), "--json")
    assert cli.returncode == 0, cli.stderr
    rows = {(r["target"], r["scenario"]): r for r in json.loads(cli.stdout)["summary"]}
    for row in data["tables"]["summary"]:
        if row["run"] != 1:
            continue
        ours = rows[(row["target"], row["scenario"])]
        for rate in RATES:
            assert row[rate] == pytest.approx(ours[rate])  # one definition, one value
    assert any(r["cold_rate"] == pytest.approx(1 / 3) for r in data["tables"]["summary"])
    assert "33%" in summary
    text = gpubench("results", "show", "1", "--store", str(store_path)).stdout
    assert "33%" in text  # the CLI shows the same rate the same way


@pytest.mark.parametrize(
    ("value", "shown"),
    [(0.013944, "$0.01394"), (0.01, "$0.01"), (1.5, "$1.50"), (39.957, "$39.96"),
     (1234.5, "$1,234.50"), (0.0000123, "$0.0000123"), (0.0, "$0"), (None, "-")],
)  # fmt: skip
def test_money_keeps_the_digits_that_matter(value: float | None, shown: str) -> None:
    assert usd(value) == shown


def test_the_compare_report_example_runs(tmp_path: Path) -> None:
    """examples/compare_report.py: two real local runtimes, one report with verdicts."""
    example = Path(__file__).parents[1] / "examples" / "compare_report.py"
    out = tmp_path / "compare.html"
    proc = subprocess.run(
        [sys.executable, str(example), str(out)],
        capture_output=True, text=True, timeout=180, cwd=tmp_path,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    verdicts = dict(line.split(": ", 1) for line in proc.stdout.splitlines() if ": " in line)
    assert {"cold_start", "burst", "cost_per_day"} <= set(verdicts)
    assert verdicts["cold_start"].startswith("echo has the lowest cold start")  # no model load
    html = out.read_text()
    for question in ("cold_start", "burst", "cost_per_day"):
        assert f'<section class="question" data-question="{question}">' in html
