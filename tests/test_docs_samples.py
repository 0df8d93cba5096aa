"""Every code sample in docs/ runs (the rules are in docs/docs-samples.md).

* ```python blocks run as a script in a fresh temp dir (the repository on ``sys.path``). The
  python blocks of one page share their names like a notebook's cells: a block runs after the
  page's earlier (not skipped) python blocks, so a page can build an example step by step.
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
    before: tuple[str, ...] = ()  # the page's earlier python blocks, run first

    @property
    def id(self) -> str:
        return f"{self.page}:{self.line}"


def samples() -> list[Sample]:
    found = []
    for path in sorted(DOCS.rglob("*.md")):
        text = path.read_text()
        earlier: list[str] = []
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
            found.append(Sample(page, line, lang, m.group(2), reason, tuple(earlier)))
            if lang == "python" and reason is None:
                earlier.append(m.group(2))
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


def run_python(sample: Sample, cwd: Path) -> None:
    script = cwd / "sample.py"
    script.write_text("\n\n".join([*sample.before, sample.code]))
    proc = subprocess.run(
        [sys.executable, str(script)], cwd=cwd, env=_env(), capture_output=True, text=True,
        timeout=300,
    )  # fmt: skip
    assert proc.returncode == 0, f"{sample.id}\n{proc.stdout}\n{proc.stderr}"


ALL = samples()


def test_samples_are_found() -> None:
    assert len(ALL) > 20
    assert any(s.page == "observability.md" and s.lang == "python" for s in ALL)


@pytest.mark.parametrize("sample", ALL, ids=[s.id for s in ALL])
def test_doc_sample_runs(sample: Sample, workspace: Path, tmp_path: Path) -> None:
    if sample.skip:
        pytest.skip(sample.skip)
    cwd = tmp_path / "work"
    shutil.copytree(workspace, cwd)
    if sample.lang == "python":
        run_python(sample, cwd)
    else:
        run_shell(sample, cwd)
