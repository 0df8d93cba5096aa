"""A third-party scenario kind (``examples/scenario_plugin.py``), found through the
``gpubench.scenarios`` entry point like an installed plugin, from Python and from the CLI."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import EchoProvider, LoopbackServer
from stevedore import ExtensionManager

from gpubench_sdk import ConfigError, EchoProbe, Runner, Store
from gpubench_sdk._plugins import SCENARIOS, build_scenario, list_plugins

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"

pytestmark = pytest.mark.anyio


@pytest.fixture
def installed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """The example installed as a distribution would be: a dist-info with its entry point."""
    dist = tmp_path / "site" / "pulses_plugin-0.1.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: pulses-plugin\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text(
        "[gpubench.scenarios]\npulses = scenario_plugin:Pulses\n"
    )
    monkeypatch.syspath_prepend(str(EXAMPLES))
    monkeypatch.syspath_prepend(str(dist.parent))
    # stevedore remembers each group's entry points per process: installed mid-process here
    monkeypatch.setattr(ExtensionManager, "ENTRY_POINT_CACHE", {})
    yield dist.parent


def test_the_built_in_kinds_are_registered_as_plugins() -> None:
    names = {i.name for i in list_plugins(SCENARIOS) if i.ok}
    expected = {"burst", "rate", "cold_starts", "concurrency", "stages", "sweep", "max_rate"}
    assert names >= expected | {"replay"}


async def test_a_plugin_kind_runs_from_a_plan(
    installed: Path, echo_server: LoopbackServer, tmp_path: Path
) -> None:
    assert "pulses" in {i.name for i in list_plugins(SCENARIOS) if i.ok}
    with pytest.raises(ConfigError) as info:
        build_scenario({"kind": "pulses", "pulses": 0, "every_s": 1}, "scenarios[1]")
    assert info.value.field == "scenarios[1].pulses.pulses"
    with pytest.raises(ConfigError) as info:
        build_scenario({"kind": "pulses", "pulses": 1, "every": 1}, "scenarios[1]")
    assert "did you mean 'every_s'" in str(info.value)
    sc = build_scenario(
        {"kind": "pulses", "pulses": 3, "every_s": 0.3, "size": 4, "name": "herd"}, "s[0]"
    )
    result = await Runner(
        {"a": EchoProvider(url=echo_server.url)}, EchoProbe(), [sc], store=tmp_path / "p.sqlite"
    ).run()
    with Store(tmp_path / "p.sqlite") as store:
        invs = sorted(store.invocations(result.run_id), key=lambda i: i.seq)
        assert store.run(result.run_id).scenarios[0].params["name"] == "herd"
    assert [i.seq for i in invs] == list(range(12)) and all(i.ok for i in invs)
    t0 = invs[0].scheduled_ns
    pulses = [round((i.scheduled_ns - t0) / 1e9, 3) for i in invs]
    assert pulses == [0.0] * 4 + [0.3] * 4 + [0.6] * 4


def test_a_plugin_kind_runs_from_the_cli(installed: Path, tmp_path: Path) -> None:
    plan = tmp_path / "plan.toml"
    plan.write_text(
        '[run]\noutput = "out.sqlite"\n[workload]\nkind = "probe"\nsleep_ms = 5\n'
        '[[targets]]\nname = "local"\nprovider = "local"\nmax_workers = 2\n'
        '[[scenarios]]\nkind = "pulses"\npulses = 2\nevery_s = 0.3\nsize = 3\n'
    )
    path = os.pathsep.join([str(installed), str(EXAMPLES), os.environ.get("PYTHONPATH", "")])
    env = {**os.environ, "PYTHONPATH": path}
    listed = subprocess.run(
        [sys.executable, "-m", "gpubench_sdk", "providers", "--json"],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert "pulses" in {p["name"] for p in json.loads(listed.stdout)["scenarios"]}
    done = subprocess.run(
        [sys.executable, "-m", "gpubench_sdk", "run", str(plan), "--quiet"],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    with Store(tmp_path / "out.sqlite") as store:
        (run,) = store.runs()
        assert run.samples == 6 and run.scenarios[0].kind == "pulses"


def test_the_example_runs_as_printed() -> None:
    done = subprocess.run(
        [sys.executable, str(EXAMPLES / "scenario_plugin.py")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert "pulses: 12/12 ok, status completed" in done.stdout
