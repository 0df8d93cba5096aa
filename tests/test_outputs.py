"""Outputs never clobber inputs, and a failed or killed write leaves the old file whole.

Every command that takes an output path is pointed at the store it reads (and at its other
inputs): each is refused with exit 2 naming both paths, the store byte for byte as it was.
Every output is written beside its target and renamed into place, so a write that fails or is
killed mid-way costs the old file nothing.
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from _invocations import big_run
from _report_store import build_store
from click.testing import CliRunner

from gpubench_sdk._base._files import PART_SUFFIX, replacing, same_file, write_text
from gpubench_sdk._cli import main


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("outputs") / "runs.sqlite"
    build_store(path, days=2)
    return path


def cli(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(main, list(args))
    assert isinstance(result.exception, SystemExit | None), repr(result.exception)
    assert "Traceback" not in result.output and "internal error" not in result.output
    return result.exit_code, result.stderr


# Each command that writes a file, with {out} where its output path goes. {store} is the
# store it reads; the output is then pointed at the store (and at its other inputs below).
WRITERS = [
    ["report", "latest", "--store", "{store}", "-o", "{out}"],
    ["report", "latest", "--store", "{store}", "-o", "{out}", "--format", "markdown"],
    [
        "advise",
        "latest",
        "--store",
        "{store}",
        "--rate",
        "1",
        "--p95-ms",
        "1000",
        "--html",
        "{out}",
    ],
    ["results", "export", "latest", "--store", "{store}", "-o", "{out}"],
    ["results", "export", "latest", "--store", "{store}", "-o", "{out}", "--format", "csv"],
    ["results", "export", "latest", "--store", "{store}", "-o", "{out}", "--format", "parquet"],
]


def _spellings(store: Path) -> list[str]:
    """The store's path as given, relative with a detour, and through a hard link."""
    link = store.with_name("hard-link.sqlite")
    if not link.exists():
        os.link(store, link)
    detour = os.path.relpath(store.parent / ".." / store.parent.name / store.name)
    return [str(store), detour, str(link)]


@pytest.mark.parametrize("args", WRITERS, ids=[" ".join(a[:2] + a[-2:]) for a in WRITERS])
def test_an_output_naming_the_store_is_refused_and_the_store_is_untouched(
    args: list[str], store: Path
) -> None:
    before = digest(store)
    for out in _spellings(store):
        code, stderr = cli(*(a.format(store=store, out=out) for a in args))
        assert code == 2, stderr
        lines = stderr.strip().splitlines()
        assert len(lines) == 1 and "error:" in lines[0], stderr
        assert "--store" in lines[0] and str(store) in lines[0] and out in lines[0], lines[0]
        assert digest(store) == before
    assert not list(store.parent.glob(f"*{PART_SUFFIX}"))


def test_an_output_naming_another_input_is_refused(store: Path, tmp_path: Path) -> None:
    advice = tmp_path / "advice.json"
    criteria = tmp_path / "criteria.toml"
    for path, text in ((advice, "{}"), (criteria, "[cheapest]\ncost = 1\n")):
        path.write_text(text)
    refused = [
        (["report", "latest", "--store", str(store), "--advice", str(advice), "-o", str(advice)],
         "--advice", advice),
        (["advise", "latest", "--store", str(store), "--rate", "1", "--p95-ms", "1000",
          "--criteria", str(criteria), "--html", str(criteria)], "--criteria", criteria),
    ]  # fmt: skip
    for args, option, path in refused:
        before = path.read_bytes()
        code, stderr = cli(*args)
        assert code == 2 and option in stderr and str(path) in stderr, stderr
        assert path.read_bytes() == before


def test_the_batch_advice_refuses_an_html_page_it_would_not_write(store: Path) -> None:
    code, stderr = cli("advise", "latest", "--store", str(store), "--batch", "100",
                       "--p95-ms", "1000", "--html", "page.html")  # fmt: skip
    assert code == 2 and "--html" in stderr and "--batch" in stderr, stderr


def test_outputs_are_written_and_replace_an_older_file(store: Path, tmp_path: Path) -> None:
    for name, args in (("r.html", ["report", "latest"]), ("e.jsonl", ["results", "export"])):
        out = tmp_path / name
        out.write_text("old")
        code, stderr = cli(*args, "--store", str(store), "-o", str(out))
        assert code == 0, stderr
        assert out.read_text() != "old" and out.stat().st_size > 100
    assert not list(tmp_path.glob(f".*{PART_SUFFIX}"))


def test_a_write_that_fails_leaves_the_old_file_whole(tmp_path: Path) -> None:
    out = tmp_path / "export.jsonl"
    out.write_text("the old export\n")
    with pytest.raises(OSError, match="disk full") as info, replacing(out) as part:
        part.write_text("half of the new")
        raise OSError(28, "disk full", str(part))
    assert info.value.filename == str(out)  # the user's path, not our temporary one
    assert out.read_text() == "the old export\n"
    assert [p.name for p in tmp_path.iterdir()] == ["export.jsonl"]


def test_the_new_file_gets_the_mode_a_plain_write_would(tmp_path: Path) -> None:
    plain, atomic = tmp_path / "plain.txt", tmp_path / "atomic.txt"
    plain.write_text("x")
    write_text(atomic, "x")
    assert atomic.stat().st_mode == plain.stat().st_mode


def test_same_file_sees_through_spellings_and_links(tmp_path: Path) -> None:
    a = tmp_path / "a.sqlite"
    a.write_text("")
    os.link(a, tmp_path / "b.sqlite")
    assert same_file(a, tmp_path / "x" / ".." / "a.sqlite")
    assert same_file(a, tmp_path / "b.sqlite")
    assert same_file(tmp_path / "new.html", tmp_path / "new.html")  # neither exists yet
    assert not same_file(a, tmp_path / "c.sqlite")


def test_an_export_killed_mid_write_leaves_the_old_output_whole(tmp_path: Path) -> None:
    store, out = tmp_path / "big.sqlite", tmp_path / "run.jsonl"
    big_run(store, 60_000)
    out.write_text('{"the": "old export"}\n')
    proc = subprocess.Popen(
        [sys.executable, "-m", "gpubench_sdk", "results", "export", "--store", str(store),
         "-o", str(out)],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
    )  # fmt: skip
    deadline = time.monotonic() + 60
    while not any(p.stat().st_size > 0 for p in tmp_path.glob(f".*{PART_SUFFIX}")):
        assert proc.poll() is None, "the export ended before it could be killed mid-write"
        assert time.monotonic() < deadline
        time.sleep(0.005)
    proc.send_signal(signal.SIGKILL)
    proc.wait(10)
    assert json.loads(out.read_text()) == {"the": "old export"}  # whole, not half a new one


def test_a_full_stdout_is_one_line_and_exit_2(store: Path) -> None:
    if not Path("/dev/full").exists():
        pytest.skip("no /dev/full here")
    with open("/dev/full", "w") as full:
        proc = subprocess.run(
            [sys.executable, "-m", "gpubench_sdk", "results", "export", "--store", str(store)],
            stdout=full, stderr=subprocess.PIPE, text=True, timeout=60,
        )  # fmt: skip
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.strip().splitlines() == [
        "error: stdout: No space left on device: the output is incomplete"
    ], proc.stderr
