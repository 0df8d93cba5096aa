"""End to end through the command line: emulators started as their own processes on loopback
(``python -m <module> --port 0``), a plan run by the real ``gpubench run``, and its store read.

The pytest fixture ``gpubench_cli`` gives a ``CliEndToEnd`` working in the test's
``tmp_path``; it stops the emulators when the test ends::

    def test_the_example(gpubench_cli):
        gpubench_cli.env["ACME_KEY"] = KEY
        url = gpubench_cli.emulator("gpubench_acme.emulator", "--api-key-env", "ACME_KEY")
        done = gpubench_cli.run(EXAMPLE, replace={"http://127.0.0.1:8787": url})
        assert len(done.measured(secret=KEY)) == 36  # exit 0, KEY never printed, all OK
"""

from __future__ import annotations

import functools
import os
import subprocess
import sys
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .. import Invocation, RunInfo, Store

STOP_TIMEOUT_S = 10.0
START_TIMEOUT_S = 60.0  # an emulator imports its provider's server package: seconds, not minutes


@dataclass
class CliRun:
    """What one ``gpubench run`` did: its exit code, what it printed, and its store."""

    returncode: int
    stdout: str
    stderr: str
    store_path: Path

    @property
    def output(self) -> str:
        """Everything printed, stdout then stderr (to check that no secret was)."""
        return self.stdout + self.stderr

    def store(self) -> Store:
        """The run's store, opened (use it as a context manager)."""
        from .. import Store

        return Store(self.store_path)

    @functools.cached_property
    def run(self) -> RunInfo:
        """The store's one run."""
        with self.store() as store:
            (run,) = store.runs()
        return run

    @functools.cached_property
    def invocations(self) -> list[Invocation]:
        """Every request the run recorded, in order."""
        with self.store() as store:
            return store.invocations(self.run.id)

    def measured(self, secret: str | None = None) -> list[Invocation]:
        """Check that the run went through cleanly, and return its invocations: exit code 0
        (else its stderr is the message), ``secret`` nowhere in what it printed, the run
        ``completed``, and every invocation ``OK`` in the measure phase."""
        from .. import Outcome, Phase

        assert self.returncode == 0, self.stderr
        assert secret is None or secret not in self.output
        assert self.run.status == "completed"
        invocations = self.invocations
        assert all(i.outcome is Outcome.OK and i.phase is Phase.MEASURE for i in invocations)
        return invocations


class CliEndToEnd:
    """Emulator processes and ``gpubench run`` in ``workdir``. ``env`` is added to the
    environment of both (the keys the emulators require and the plan reads)."""

    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        self.env: dict[str, str] = {}
        self._processes: list[subprocess.Popen[str]] = []

    def emulator(self, module: str, *args: str, start_timeout_s: float = START_TIMEOUT_S) -> str:
        """Start ``python -m module --port 0 *args`` and return the URL it prints first.

        Raises ``RuntimeError`` naming the module if it prints no URL within
        ``start_timeout_s`` (the process is stopped), or exits or prints something else.
        """
        proc = subprocess.Popen(
            [sys.executable, "-m", module, "--port", "0", *args],
            stdout=subprocess.PIPE,
            text=True,
            env={**os.environ, **self.env},
        )
        self._processes.append(proc)
        stdout = proc.stdout
        assert stdout is not None
        first: list[str] = []
        # readline() has no timeout of its own: a thread reads, and the wait on it is bounded.
        reader = threading.Thread(target=lambda: first.append(stdout.readline()), daemon=True)
        reader.start()
        reader.join(start_timeout_s)
        if not first:
            self._stop(proc)  # this one only: the emulators started before it still serve
            raise RuntimeError(
                f"{module} printed no URL within {start_timeout_s:g} s (stopped; it hung while"
                " starting: run it by hand with --port 0 to see where)"
            )
        url = first[0].strip()
        if not url.startswith(("http://127.0.0.1:", "https://127.0.0.1:")):
            self._stop(proc)
            raise RuntimeError(f"{module} printed {url!r}, not its URL (exit {proc.poll()})")
        return url

    def run(
        self,
        plan: Path,
        *,
        replace: Mapping[str, str] | None = None,
        args: Sequence[str] = ("--quiet",),
        env: Mapping[str, str] | None = None,
        timeout_s: float = 300.0,
    ) -> CliRun:
        """``gpubench run`` of ``plan`` with each ``replace`` key swapped for its value (the
        example's URLs for the emulators'), into a store of its own in ``workdir``."""
        text = plan.read_text()
        for old, new in (replace or {}).items():
            if old not in text:
                raise ValueError(f"{old!r} is not in {plan}: the example changed")
            text = text.replace(old, new)
        config = self.workdir / plan.name
        config.write_text(text)
        store = self.workdir / "out.sqlite"
        command = [sys.executable, "-m", "gpubench_sdk", "run", str(config), "--store", str(store)]
        done = subprocess.run(
            [*command, *args],
            cwd=self.workdir,
            env={**os.environ, **self.env, **(env or {})},
            capture_output=True,
            text=True,
            timeout=timeout_s,
        )
        return CliRun(done.returncode, done.stdout, done.stderr, store)

    def close(self) -> None:
        """Stop every emulator started (idempotent)."""
        while self._processes:
            self._stop(self._processes[-1])

    def _stop(self, proc: subprocess.Popen[str]) -> None:
        self._processes.remove(proc)
        proc.terminate()
        try:
            proc.wait(STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(STOP_TIMEOUT_S)
