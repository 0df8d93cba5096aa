"""The public tracker's done-when: 30 days of real campaign slots, exported, built into a site.

The days come from ``_tracker_days``: two emulated RunPod endpoints, every slot a real
``run_campaign`` pass with the clock moved to its day, the ``shifty`` endpoint's cold start
doubled from day 20. ``gpubench campaign export`` and ``gpubench site build`` then run as a
user runs them. Chromium loads every page at 1280 and 390 px: no console error, no request
but the page itself, no sideways scroll, no mark outside its plot, no colour off its legend,
every link resolving. Screenshots go to ``$GPUBENCH_ARTIFACTS/site/`` when it is set (CI).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

import pytest
from _tracker_days import CHANGE_DAY, KEY, NAME, campaign_days
from click.testing import CliRunner, Result
from test_cli import gpubench

from gpubench_sdk._cli import main
from gpubench_sdk.campaign import export_campaign

DAYS = 30
CHANGED = f"2026-01-{CHANGE_DAY:02d}"
ORIGIN = "the test suite, loopback"
ENV = {**os.environ, "RUNPOD_API_KEY": KEY}


@pytest.fixture(scope="module")
def tracker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Path]]:
    root = tmp_path_factory.mktemp("tracker")
    with campaign_days(root / "campaign.sqlite", DAYS) as store:
        data, site = root / "repo", root / "site"
        proc = gpubench("campaign", "export", NAME, "--store", str(store), "-o", str(data),
                        "--origin", ORIGIN, env=ENV)  # fmt: skip
        assert proc.returncode == 0, proc.stderr
        assert f"{DAYS} new, 0 rewritten, 0 unchanged" in proc.stdout
        built = CliRunner().invoke(main, ["site", "build", str(data), "-o", str(site)])
        assert built.exit_code == 0, built.output
        yield {"store": store, "data": data, "site": site, "root": root}


def _files(folder: Path) -> dict[str, bytes]:
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in folder.rglob("*.json")}


def test_each_slot_is_one_document_and_exporting_again_gives_the_same_bytes(
    tracker: dict[str, Path],
) -> None:
    first = _files(tracker["data"])
    assert len(first) == DAYS
    assert f"data/2026/01/{CHANGE_DAY:02d}/{NAME}-{CHANGE_DAY - 1}.json" in first
    # (in this process, the API: the fixture's export ran the command in a fresh one)
    again = tracker["root"] / "again"
    report = export_campaign(tracker["store"], NAME, again, origin=ORIGIN)
    assert len(report.written) == DAYS and _files(again) == first
    report = export_campaign(tracker["store"], NAME, tracker["data"], origin=ORIGIN)
    assert (len(report.written), len(report.rewritten), len(report.unchanged)) == (0, 0, DAYS)
    doc = json.loads(first[f"data/2026/01/{CHANGE_DAY:02d}/{NAME}-{CHANGE_DAY - 1}.json"])
    assert doc["schema"] == "gpubench-tracker" and doc["schema_version"] == 1
    shifty = next(t for t in doc["targets"] if t["name"] == "shifty")
    assert shifty["provider"] == "runpod" and shifty["region"] == "emu-west"
    assert shifty["plugin"]["name"] == "gpubench-runpod" and shifty["plugin"]["version"]
    assert shifty["plugin"]["as"] == "measured"  # stored by the run, not looked up at export
    # as RunPod's REST API said it when the slot began (idleTimeout in whole seconds)
    read = {"min_workers": 0, "max_workers": 1, "idle_timeout_s": 1}
    assert shifty["scaling_read"] == {"settings": read, "how": "provider"}
    assert shifty["deployed_read"]["details"]["image"] == "gpubench/emulated-worker:1.0"
    assert shifty["model"] == {"endpoint_id": "emulated-endpoint"}
    assert shifty["cold_start"]["count"] >= 5 and shifty["cold_start"]["starts"][0]["ms"] > 0
    assert shifty["latency_ms"]["p95_ci"][0] <= shifty["latency_ms"]["p95"]
    assert shifty["bill"]["usd"] > 0 and shifty["price"]["usd_per_s"] == 0.00031
    assert {s["kind"] for s in shifty["scenarios"].values()} == {"cold_starts", "burst"}
    assert doc["plan"]["hash"].startswith("sha256:") and doc["run"]["gpubench_version"]


def test_the_secret_is_in_no_document_and_no_page(tracker: dict[str, Path]) -> None:
    for folder in (tracker["data"], tracker["site"]):
        files = [p for p in folder.rglob("*") if p.is_file()]
        assert files
        leaked = [p for p in files if KEY.encode() in p.read_bytes()]
        assert leaked == []


def test_the_doubled_cold_start_is_flagged_on_its_page_and_the_front_page(
    tracker: dict[str, Path],
) -> None:
    site = tracker["site"]
    shifty = (site / "targets" / "runpod-emu-west-shifty.html").read_text()
    assert f'data-flag="{CHANGED}"' in shifty, _cold_days(tracker)
    changes = shifty.split("id='changes'")[1].split("</table>")[0]
    assert f"{CHANGED}.html" in changes
    steady = (site / "targets" / "runpod-emu-east-steady.html").read_text()
    assert f'data-flag="{CHANGED}"' not in steady, _cold_days(tracker)
    said = shifty.split("as the provider said")[1].split("</tr>")[0]
    assert "&quot;max_workers&quot;: 1" in said
    front = (site / "index.html").read_text()
    assert f'data-flag="{CHANGED}"' in front
    flagged = front.split("id='changes'")[1].split("</ul>")[0]
    assert f"{CHANGED}.html" in flagged and "runpod-emu-west-shifty.html#changes" in flagged
    index = json.loads((site / "index.json").read_text())
    by_slug = {t["slug"]: t for t in index["targets"]}
    assert CHANGED in by_slug["runpod-emu-west-shifty"]["flagged_days"]
    assert CHANGED not in by_slug["runpod-emu-east-steady"]["flagged_days"]
    assert len(index["days"]) == DAYS and all(d["files"] for d in index["days"])
    assert (site / "index.html").stat().st_size < 300_000


def _cold_days(tracker: dict[str, Path]) -> str:
    """Each target's flagged days and daily cold starts (ms), for a failure's message: the
    detector's verdicts rest on timing that a loaded machine can disturb."""
    index = json.loads((tracker["site"] / "index.json").read_text())
    lines = [f"{t['slug']} flagged {t['flagged_days']}" for t in index["targets"]]
    for path in sorted(tracker["data"].rglob("*.json")):
        doc = json.loads(path.read_text())
        starts = {
            t["name"]: " ".join(f"{s['ms']:.0f}" for s in t["cold_start"]["starts"])
            for t in doc["targets"]
        }
        lines.append(f"{path.stem}: {starts}")
    return "\n".join(lines)


def listen(page: Any, seen: list[str]) -> None:
    """Console errors, page errors and every request of ``page``, appended to ``seen``."""
    page.on("console", lambda m: seen.append(m.text) if m.type == "error" else 0)
    page.on("pageerror", lambda e: seen.append(str(e)))
    page.on("request", lambda r: seen.append(f"request {r.url}"))


def _links(page: Any) -> list[str]:
    hrefs: list[str] = page.eval_on_selector_all(
        "a[href]", "as => as.map(a => a.getAttribute('href'))"
    )
    return hrefs


def test_every_page_loads_offline_fits_a_phone_and_links_resolve(tracker: dict[str, Path]) -> None:
    sync_api = pytest.importorskip("playwright.sync_api", reason="pip install playwright")
    # (imported here: that module skips itself without playwright, the tests above need none)
    from test_report_browser import CHROMIUM, CHROMIUM_ARGS, COLORS_OFF_THE_LEGEND, MARKS_OUTSIDE

    if not Path(CHROMIUM).exists():
        pytest.skip("needs Debian's chromium (apt-get install chromium)")
    site = tracker["site"]
    pages = sorted(site.rglob("*.html"))
    assert len(pages) == 1 + 2 + 2 + DAYS  # front, methodology + data, 2 targets, the days
    shots_of = {"index.html", "targets/runpod-emu-west-shifty.html", "methodology.html",
                f"days/{CHANGED}.html"}  # fmt: skip
    shots_dir = tracker["root"] / "shots"
    shots_dir.mkdir()
    problems: list[str] = []
    with sync_api.sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            for width in (1280, 390):
                context = browser.new_context(viewport={"width": width, "height": 900})
                page = context.new_page()
                seen: list[str] = []
                listen(page, seen)
                for path in pages:
                    rel = path.relative_to(site).as_posix()
                    seen.clear()
                    page.goto(path.as_uri(), wait_until="load")
                    if seen != [f"request {path.as_uri()}"]:
                        problems.append(f"{rel} at {width}: {seen}")
                    if page.evaluate("document.documentElement.scrollWidth") > width:
                        problems.append(f"{rel} scrolls sideways at {width} px")
                    if outside := page.evaluate(MARKS_OUTSIDE):
                        problems.append(f"{rel} at {width}: marks outside: {outside[:3]}")
                    if width == 1280:
                        if off := page.evaluate(COLORS_OFF_THE_LEGEND):
                            problems.append(f"{rel}: colours off the legend: {off[:3]}")
                        problems += _broken(path, _links(page), site)
                    if rel in shots_of:
                        name = rel.replace("/", "-").replace(".html", f"-{width}.png")
                        page.screenshot(path=str(shots_dir / name), full_page=True)
                context.close()
            context = browser.new_context(viewport={"width": 800, "height": 900})
            page = context.new_page()
            page.emulate_media(media="print")
            page.goto((site / "index.html").as_uri(), wait_until="load")
            assert page.evaluate("getComputedStyle(document.querySelector('nav')).display") == (
                "none"
            )
        finally:
            browser.close()
    assert problems == []
    shots = sorted(shots_dir.iterdir())
    assert len(shots) == 8 and all(s.stat().st_size > 10_000 for s in shots)
    artifacts = os.environ.get("GPUBENCH_ARTIFACTS")
    if artifacts:
        folder = Path(artifacts) / "site"
        folder.mkdir(parents=True, exist_ok=True)
        for shot in shots:
            shutil.copy(shot, folder / shot.name)


def _broken(path: Path, hrefs: list[str], site: Path) -> list[str]:
    """Links from ``path`` to a file that is not there, or to an id its page lacks."""
    out = []
    for href in hrefs:
        parts = urlsplit(href)
        assert not parts.scheme and not parts.netloc, f"an external link: {href}"
        target = (path.parent / unquote(parts.path)).resolve() if parts.path else path
        if not target.is_file() or site.resolve() not in target.parents:
            out.append(f"{path.name}: {href} does not resolve")
        elif parts.fragment and target.suffix == ".html":
            text = target.read_text()
            if f"id='{parts.fragment}'" not in text and f'id="{parts.fragment}"' not in text:
                out.append(f"{path.name}: {href}: no such id")
    return out


def test_bad_input_names_the_field_and_the_fix(tracker: dict[str, Path], tmp_path: Path) -> None:
    def build(data: Path) -> Result:
        return CliRunner().invoke(main, ["site", "build", str(data), "-o", str(tmp_path / "out")])

    missing = build(tmp_path / "nowhere")
    assert missing.exit_code == 2
    assert "DATA_DIR" in missing.output and "gpubench campaign export" in missing.output
    data = tmp_path / "data"
    shutil.copytree(tracker["data"], data)
    doc = next((data / "data").rglob("*.json"))
    doc.write_text(json.dumps(json.loads(doc.read_text()) | {"schema_version": 2}))
    newer = build(data)
    assert newer.exit_code == 2
    assert doc.name in newer.output and "schema_version" in newer.output
    assert "upgrade gpubench" in newer.output
    doc.write_text("{not json")
    broken = build(data)
    assert broken.exit_code == 2 and doc.name in broken.output and "JSON" in broken.output


def test_the_example_tracker_is_whole_and_installs_gpubench_as_written() -> None:
    """examples/tracker: the plan loads, the script parses, and the workflow runs that script
    after installing gpubench from the repository's wheels (it is on no package index), then
    deploys to Pages."""
    yaml = pytest.importorskip("yaml")
    from gpubench_sdk._plan._config import load_config

    folder = Path(__file__).resolve().parents[1] / "examples" / "tracker"
    plan = load_config(folder / "plan.toml")
    assert [t.provider for t in plan.targets] == ["local"] and plan.targets[0].region
    script = folder / "daily.sh"
    assert os.access(script, os.X_OK)
    assert subprocess.run(["bash", "-n", str(script)], check=False).returncode == 0
    text = script.read_text()
    for step in ("campaign create", "campaign tick", "campaign export", "site build", "git commit"):
        assert f"{step} " in text, step
    flow = yaml.safe_load((folder / "tracker.yml").read_text())
    assert "schedule" in flow[True]  # YAML 1.1 reads the key `on` as True
    steps = flow["jobs"]["measure"]["steps"]
    runs = " ".join(s.get("run", "") for s in steps)
    # from the wheels the repository keeps (docs/tracker.md step 1 builds them; test_plugins.py
    # builds every distribution's wheel and installs it in a fresh venv), not from an index
    # that serves no gpubench, and with nothing to edit
    assert "pip install wheels/*.whl" in runs and "examples/tracker/daily.sh" in runs
    assert "gpubench-sdk" not in runs and "OWNER" not in (folder / "tracker.yml").read_text()
    guide = (folder.parents[1] / "docs" / "tracker.md").read_text()
    assert "pip wheel --no-deps -w wheels /path/to/gpubench /path/to/gpubench/plugins/" in guide
    assert "git add .gitignore examples wheels" in guide
    assert flow["jobs"]["deploy"]["steps"][0]["uses"].startswith("actions/deploy-pages@")


def test_a_site_from_sparse_documents(tmp_path: Path) -> None:
    """One day, a target with no cold start, no bill and no price, and a field from a newer
    gpubench: the site is built and says what it lacks instead of failing."""
    from gpubench_sdk._report._site import build_site

    sample = Path(__file__).resolve().parents[1] / "examples" / "tracker" / "sample"
    data = tmp_path / "data"
    shutil.copytree(sample / "data" / "2026" / "01" / "01", data / "data" / "2026" / "01" / "01")
    (doc_path,) = (data / "data").rglob("*.json")
    doc = json.loads(doc_path.read_text())
    bare = doc["targets"][0]
    bare |= {"cold_start": {"count": 0, "starts": []}, "bill": None, "price": None}
    bare["a_field_from_a_newer_gpubench"] = {"x": 1}
    doc_path.write_text(json.dumps(doc))
    built = build_site(data, tmp_path / "site")
    assert built.documents == 1 and built.pages == 3 + 2 + 1
    front = (tmp_path / "site" / "index.html").read_text()
    assert "Too few days yet" in front
    page = (tmp_path / "site" / "targets" / f"runpod-emu-east-{bare['name']}.html").read_text()
    assert "No cold start was measured." in page
