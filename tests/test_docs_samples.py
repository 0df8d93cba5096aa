"""Every code sample in docs/ runs (the rules are in docs/docs-samples.md).

* ```python blocks run in a fresh temp dir (the repository on ``sys.path``), the (not skipped)
  blocks of one page in one interpreter, in page order, sharing their names like a notebook's
  cells: a page can build an example step by step. A failure names its block (page:line).
* ```bash / ```console / ```sh blocks run command by command in bash in a temp dir (``$ ``
  prompts stripped, ``\\`` continuations joined, a here-document kept with its command).
  Commands that install software (``pip install``, ``python3 -m venv``, ``. .venv/bin/activate``,
  ``apt-get``) are not run: the test environment is already installed. A command ending in ``&``
  starts a background process, waited for until its ``--port N`` accepts connections, and
  stopped when the block ends.
* The temp dir holds ``gpubench.sqlite`` and ``gpubench-demo.sqlite`` (three synthetic runs on
  three days, targets ``runpod`` and ``replicate``), ``plan.toml`` (a short local plan) and
  ``examples/`` (the repository's).
* ``<!-- skip-test: REASON -->`` on the line before a block skips it, e.g. a block that needs a
  cloud account; the reason shows in the test report.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest
from _report_store import build_store

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
FENCE = re.compile(r"^```(\w+)[^\n]*\n(.*?)^```\s*$", re.M | re.S)
SKIP = re.compile(r"<!--\s*skip-test:\s*(.+?)\s*-->\s*$")
INSTALLS = re.compile(r"^(pip3? install|python3? -m (pip|venv)|\. \S*activate|source |(sudo )?apt)")
PLAN = """
[workload]
kind = "probe"

[[targets]]
name = "local"
provider = "local"
handler = "gpubench_sdk.demo:echo"
load = ""

[[scenarios]]
kind = "burst"
total = 10
concurrency = 2
"""


@dataclass(frozen=True)
class Sample:
    page: str
    line: int
    lang: str
    code: str
    skip: str | None

    @property
    def id(self) -> str:
        return f"{self.page}:{self.line}"


def samples() -> list[Sample]:
    found = []
    for path in sorted(DOCS.rglob("*.md")):
        text = path.read_text()
        for m in FENCE.finditer(text):
            lang = m.group(1).lower()
            if lang not in ("python", "bash", "console", "sh", "shell"):
                continue
            skip = None
            for before in reversed(text[: m.start()].rstrip("\n").split("\n")):
                if not before.startswith("<!--"):
                    break  # the comments right above the block: skip-test, fmt: off...
                skip = skip or SKIP.search(before)
            line = text.count("\n", 0, m.start()) + 1
            page = str(path.relative_to(DOCS))
            reason = skip.group(1) if skip else None
            found.append(Sample(page, line, lang, m.group(2), reason))
    return found


@pytest.fixture(scope="module")
def workspace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A template dir; each sample gets a fresh copy."""
    base = tmp_path_factory.mktemp("docs-template")
    build_store(base / "gpubench.sqlite", names=("runpod", "replicate"))
    shutil.copy(base / "gpubench.sqlite", base / "gpubench-demo.sqlite")
    (base / "plan.toml").write_text(PLAN)
    shutil.copytree(ROOT / "examples", base / "examples")
    return base


HEREDOC = re.compile(r"<<-?\s*['\"]?(\w+)['\"]?")


def _commands(code: str, console: bool) -> list[str]:
    """Commands to run one by one: continuations joined, a here-document kept with its command."""
    lines, pending, until = [], "", None
    for raw in code.splitlines():
        line = raw.rstrip()
        if until is not None:  # inside a here-document: taken verbatim
            pending += "\n" + raw
            if line == until:
                lines.append(pending)
                pending, until = "", None
            continue
        if console:
            if not line.startswith("$ ") and not pending:
                continue  # output shown in a console block
            line = line.removeprefix("$ ")
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        line, pending = pending + line, ""
        heredoc = HEREDOC.search(line)
        if heredoc:
            pending, until = line, heredoc.group(1)
        elif line.strip() and not line.lstrip().startswith("#"):
            lines.append(line.strip())
    return lines


def _wait_for_port(command: str, proc: subprocess.Popen[bytes], timeout_s: float = 30.0) -> None:
    match = re.search(r"--port[ =](\d+)", command)
    if not match:
        return
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        assert proc.poll() is None, f"{command!r} exited with {proc.returncode}"
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", int(match.group(1)))) == 0:
                return
        time.sleep(0.1)
    raise AssertionError(f"{command!r} never listened on port {match.group(1)}")


def _env() -> dict[str, str]:
    env = os.environ | {
        "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])
    }
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    return env


def run_shell(sample: Sample, cwd: Path) -> None:
    env = _env()
    background: list[subprocess.Popen[bytes]] = []
    try:
        for command in _commands(sample.code, sample.lang == "console"):
            if INSTALLS.match(command):
                continue
            if command.startswith("export "):
                for assignment in shlex.split(command)[1:]:  # export A=1 B="two words"
                    name, _, value = assignment.partition("=")
                    env[name] = value
                continue
            if command.endswith("&"):
                started = subprocess.Popen(
                    ["bash", "-c", "exec " + command[:-1]], cwd=cwd, env=env,
                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
                )  # fmt: skip
                background.append(started)
                _wait_for_port(command, started)
                continue
            proc = subprocess.run(
                ["bash", "-c", command], cwd=cwd, env=env, capture_output=True, text=True,
                timeout=300,
            )  # fmt: skip
            assert proc.returncode == 0, f"{sample.id}: {command}\n{proc.stdout}\n{proc.stderr}"
    finally:
        for p in background:
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGTERM)
                p.wait(20)


# Runs a page's python blocks (a JSON list of [id, code]) in one namespace, as __main__; a
# failing block is named before its traceback. One interpreter per page: a process and its
# imports per block, each re-running the page's earlier blocks, cost CI minutes.
PAGE_RUNNER = """
import json, sys, traceback
namespace = {"__name__": "__main__"}
for block_id, code in json.load(open(sys.argv[1])):
    print(f"--- {block_id}", flush=True)
    try:
        exec(compile(code, block_id, "exec"), namespace)
    except BaseException:
        print(f"FAILED: the block at {block_id}", file=sys.stderr)
        traceback.print_exc()
        sys.exit(1)
"""


def run_python_page(blocks: list[Sample], cwd: Path) -> None:
    (cwd / "blocks.json").write_text(json.dumps([[b.id, b.code] for b in blocks]))
    (cwd / "run_blocks.py").write_text(PAGE_RUNNER)
    proc = subprocess.run(
        [sys.executable, "run_blocks.py", "blocks.json"], cwd=cwd, env=_env(),
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert proc.returncode == 0, f"{blocks[0].page}\n{proc.stdout}\n{proc.stderr}"


ALL = samples()
# every block but the python ones that run, which run page by page
ONE_BY_ONE = [s for s in ALL if s.lang != "python" or s.skip]
PAGES: dict[str, list[Sample]] = {}
for _sample in ALL:
    if _sample.lang == "python" and not _sample.skip:
        PAGES.setdefault(_sample.page, []).append(_sample)


def test_samples_are_found() -> None:
    assert len(ALL) > 20
    assert "observability.md" in PAGES


@pytest.mark.parametrize("sample", ONE_BY_ONE, ids=[s.id for s in ONE_BY_ONE])
def test_doc_sample_runs(sample: Sample, workspace: Path, tmp_path: Path) -> None:
    if sample.skip:
        pytest.skip(sample.skip)
    cwd = tmp_path / "work"
    shutil.copytree(workspace, cwd)
    run_shell(sample, cwd)


@pytest.mark.parametrize("page", list(PAGES))
def test_doc_python_blocks_run(page: str, workspace: Path, tmp_path: Path) -> None:
    cwd = tmp_path / "work"
    shutil.copytree(workspace, cwd)
    run_python_page(PAGES[page], cwd)


def test_a_failing_block_fails_its_page_and_is_named(tmp_path: Path) -> None:
    # the second block uses the first's name (one namespace); the third fails
    blocks = [Sample("x.md", 3, "python", "n = 41\n", None),
              Sample("x.md", 9, "python", "n += 1\nassert n == 42\n", None),
              Sample("x.md", 15, "python", "raise ValueError('boom')\n", None)]  # fmt: skip
    run_python_page(blocks[:2], tmp_path)
    with pytest.raises(AssertionError, match=r"(?s)FAILED: the block at x\.md:15.*boom"):
        run_python_page(blocks, tmp_path)
