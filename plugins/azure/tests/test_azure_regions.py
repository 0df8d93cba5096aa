"""A plan's ``regions = [...]`` fan-out reaches the Azure plugin: each ``aca@REGION`` target
gets ``region`` (checked against the app's location) and ``{region}`` in its app id."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from gpubench_azure.emulator import SUBSCRIPTION, make_app

from gpubench_sdk import ConfigError, Outcome, RunConfig, Store, build_run
from gpubench_sdk.testing import quick_fleet, serve, throwaway_tls

TOKEN_ENV = "GPUBENCH_TEST_AZURE_REGIONS_TOKEN"


def plan(url: str, ca: str, regions: list[str]) -> dict[str, Any]:
    return {
        "run": {"name": "aca-regions"},
        "workload": {"kind": "probe", "sleep_ms": 5},
        "targets": [
            {
                "name": "aca",
                "provider": "azure",
                "regions": regions,
                "app": f"/subscriptions/{SUBSCRIPTION}/resourceGroups/rg-{{region}}"
                "/providers/Microsoft.App/containerApps/llama",
                "arm_endpoint": url,
                "arm_token_env": TOKEN_ENV,
                "ca_file": ca,
                "arm_poll_interval_s": 0.05,
            }
        ],
        "scenarios": [{"kind": "burst", "total": 3, "concurrency": 1}],
    }


def test_each_region_reaches_its_own_app_and_a_wrong_one_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(TOKEN_ENV, "arm-regions-6a2f")
    ca, cert, key = throwaway_tls(tmp_path / "tls")
    fleet = quick_fleet(0.05, max_workers=1)
    # one emulated app, in eastus: the plan fans out to it and to a westus3 app
    with serve(make_app(fleet, arm_token="arm-regions-6a2f"), tls=(cert, key)) as served:
        config = RunConfig.model_validate(plan(served.url, ca, ["eastus", "westus3"]))
        east, west = config.targets
        assert (east.name, west.name) == ("aca@eastus", "aca@westus3")
        assert (east.region, west.region) == ("eastus", "westus3")
        assert "/resourceGroups/rg-westus3/" in west.provider_options()["app"]
        # the westus3 target reaches the eastus app: its location check stops the run
        both = build_run(config, store=tmp_path / "both.sqlite")
        with pytest.raises(ConfigError) as info:
            asyncio.run(both.run())
        assert info.value.field == "region" and "eastus" in str(info.value)

        one = RunConfig.model_validate(plan(served.url, ca, ["eastus"]))
        runner = build_run(one, store=tmp_path / "r.sqlite")
        assert asyncio.run(runner.run()).status == "completed"
    with Store(tmp_path / "r.sqlite") as store:
        (run,) = store.runs()
        invs = store.invocations(run.id)
    assert {i.target for i in invs} == {"aca@eastus"}
    assert len(invs) == 3 and all(i.outcome is Outcome.OK for i in invs)
