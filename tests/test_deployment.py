"""What a run keeps of the deployment it measured (``TargetRecord.deployment``): the plugin's
distribution and version, and the scaling settings as the provider's own API reported them
when the run opened it. Real runs of the RunPod plugin against its emulator over loopback: one
whose REST API answers, one whose REST API is not there (the run goes on and says why)."""

from __future__ import annotations

import importlib.metadata
import json
import socket
from pathlib import Path

import pytest

from gpubench_sdk import EchoProbe, Rate, Store, run
from gpubench_sdk import testing as kit
from gpubench_sdk._plugins import load_provider
from gpubench_sdk.campaign._export import _deployment

emulator = pytest.importorskip("gpubench_runpod.emulator", reason="plugins/runpod")

KEY = "rp-deployment-secret-51c0ffee"
pytestmark = pytest.mark.anyio


def _runpod(url: str, rest_url: str) -> object:
    return load_provider(
        "runpod",
        endpoint_id="emulated-endpoint",
        api_key=KEY,
        base_url=f"{url}/v2",
        rest_url=rest_url,
        mode="runsync",
    )


def _dead_port() -> int:
    with socket.socket() as s:  # bound, then closed: nothing listens there
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def test_the_run_keeps_the_plugin_and_the_scaling_the_provider_reported(
    tmp_path: Path,
) -> None:
    fleet = kit.quick_fleet(0.02, max_workers=3, idle_timeout_s=7)
    with kit.serve(emulator.make_app(fleet, api_key=KEY)) as server:
        result = await run(
            {"rp": _runpod(server.url, f"{server.url}/v1")},
            EchoProbe(sleep_ms=1),
            [Rate(rps=20, duration_s=0.3)],
            store=tmp_path / "r.sqlite",
        )
    with Store(tmp_path / "r.sqlite", readonly=True) as store:
        (target,) = store.run(result.run_id).targets
        assert (store.columns(result.run_id)["outcome"] == 0).sum() >= 5
    assert target.deployment is not None
    plugin = target.deployment["plugin"]
    assert plugin["name"] == "gpubench-runpod"
    assert plugin["version"] == importlib.metadata.version("gpubench-runpod")
    assert plugin["class"].endswith("RunPodProvider")
    # the fleet's settings, as RunPod's REST API spells them back (workersMin/Max, idleTimeout)
    assert target.deployment["scaling"] == {"min_workers": 0, "max_workers": 3, "idle_timeout_s": 7}
    assert target.deployment["scaling_read"] == "provider"
    # what runs there, as GET /v1/endpoints/{id}?includeTemplate=true says it
    assert target.deployment["deployed"] == {
        "image": "gpubench/emulated-worker:1.0",
        "template_id": "emu0template",
        "gpu_types": ["NVIDIA L4"],
        "gpu_count": 1,
        "endpoint_version": 0,
    }
    assert target.deployment["deployed_read"] == "provider"
    exported = _deployment(target)
    assert exported["deployed_read"]["details"]["image"] == "gpubench/emulated-worker:1.0"
    assert exported["plugin"] == {"name": "gpubench-runpod", "version": plugin["version"],
                                  "as": "measured"}  # fmt: skip
    assert exported["scaling_read"]["settings"]["max_workers"] == 3


async def test_a_provider_that_will_not_say_its_settings_is_still_measured(
    tmp_path: Path,
) -> None:
    fleet = kit.quick_fleet(0.02, max_workers=1)
    rest = f"http://127.0.0.1:{_dead_port()}/v1?token={KEY}"  # a key pasted into a URL, too
    with kit.serve(emulator.make_app(fleet, api_key=KEY)) as server:
        result = await run(
            {"rp": _runpod(server.url, rest)},
            EchoProbe(sleep_ms=1),
            [Rate(rps=20, duration_s=0.3)],
            store=tmp_path / "r.sqlite",
        )
    assert result.status == "completed"
    with Store(tmp_path / "r.sqlite", readonly=True) as store:
        (target,) = store.run(result.run_id).targets
        assert (store.columns(result.run_id)["outcome"] == 0).sum() >= 5  # measured all the same
    assert target.deployment is not None and target.deployment["scaling"] is None
    assert target.deployment["scaling_read"].startswith("not read: ")
    assert target.deployment["deployed"] is None
    assert target.deployment["deployed_read"].startswith("not read: ")
    assert target.deployment["plugin"]["name"] == "gpubench-runpod"
    stored = (tmp_path / "r.sqlite").read_bytes()
    assert KEY.encode() not in stored
    assert KEY not in json.dumps(_deployment(target))


async def test_a_plugin_without_the_capability_says_so(tmp_path: Path) -> None:
    from _scenario_fleet import FleetProvider, fleet_server

    with fleet_server(kit.FleetConfig(cold_start=kit.Duration.fixed(0.01))) as server:
        result = await run(
            {"f": FleetProvider(url=server.url)},
            EchoProbe(),
            [Rate(rps=10, duration_s=0.2)],
            store=tmp_path / "r.sqlite",
        )
    with Store(tmp_path / "r.sqlite", readonly=True) as store:
        (target,) = store.run(result.run_id).targets
    assert target.deployment is not None
    assert target.deployment["scaling"] is None
    assert "does not declare scaling_settings" in target.deployment["scaling_read"]
    assert target.deployment["deployed"] is None  # the hook's default: nothing to say
    assert "reads no deployment details" in target.deployment["deployed_read"]
    # a class defined in the test suite, not by an installed package's entry point
    assert target.deployment["plugin"]["class"] == "_scenario_fleet.FleetProvider"


def test_a_class_built_in_python_names_the_distribution_of_its_module() -> None:
    # what a provider no entry point names is recorded under: its module's distribution
    from gpubench_sdk._runner import _deployment as deployment

    found = deployment._distribution_of
    found.cache_clear()
    # an editable install (the dev venv's plugins), whose modules no installed file list names
    assert found("gpubench_openai") == (
        "gpubench-openai",
        importlib.metadata.version("gpubench-openai"),
    )
    # a module whose distribution is named otherwise: the installed packages' file lists
    import yaml  # noqa: F401  (a provider's module is imported before its class is asked of)

    assert found("yaml") == ("PyYAML", importlib.metadata.version("PyYAML"))
    assert found("__main__") is None  # a script: nothing to look for
    assert found("no_such_module_anywhere") is None
    # the project's own code (the test suite's modules here): in no file list, never scanned
    deployment._installed_modules.cache_clear()
    assert found("_scenario_fleet") is None
    assert deployment._installed_modules.cache_info().currsize == 0
