"""A local worker loads the demo handlers (``gpubench_sdk.demo``) the way a deployed handler
loads: without importing the gpubench_sdk package (httpx, aiohttp, pydantic), whose import
every cold start would otherwise pay. Plans naming the demo's old private address still run."""

from __future__ import annotations

import json
import subprocess
import sys

from gpubench_sdk._local._process import _WORKER_FILE

PROBE = """
import importlib.util, json, sys
spec = importlib.util.spec_from_file_location('_gpubench_worker', {worker!r})
worker = sys.modules[spec.name] = importlib.util.module_from_spec(spec)
spec.loader.exec_module(worker)
echo = worker.resolve({spec!r})
print(json.dumps({{"out": echo({{"x": 1}}), "package": "gpubench_sdk" in sys.modules,
                  "httpx": "httpx" in sys.modules}}))
"""


def _load(spec: str) -> dict[str, object]:
    code = PROBE.format(worker=_WORKER_FILE, spec=spec)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def test_the_demo_loads_without_the_package() -> None:
    got = _load("gpubench_sdk.demo:echo")
    assert got["package"] is False and got["httpx"] is False
    assert isinstance(got["out"], dict)


def test_the_old_private_address_still_resolves() -> None:
    got = _load("gpubench_sdk._local.demo:echo")
    assert isinstance(got["out"], dict)
