"""``regions = [...]`` fans one target out to one per region (gpubench_sdk._plan._regions): names,
``region`` and ``{region}`` set per target, bad fan-outs named by field, and a real run over
loopback whose targets are compared like providers."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from gpubench_http.emulator import make_app

from gpubench_sdk import ConfigError, Outcome, ProviderOptions, Store
from gpubench_sdk._plan._build import build_run
from gpubench_sdk._plan._config import parse_config, provider_options
from gpubench_sdk.testing import Duration, FleetConfig, SimulatedFleet, serve


def plan(**target: Any) -> dict[str, Any]:
    return {
        "run": {"name": "regions"},
        "workload": {"kind": "probe", "sleep_ms": 5},
        "targets": [{"name": "t", "provider": "http", **target}],
        "scenarios": [{"kind": "burst", "total": 4, "concurrency": 2}],
    }


def test_one_target_per_region_with_placeholders_replaced() -> None:
    config = parse_config(
        plan(
            regions=["eastus", "swedencentral"],
            url="https://llama-{region}.example.com/predict",
            headers={"x-zone": "{region}"},
            api_key_env="KEY_{region}",
        )
    )
    assert [t.name for t in config.targets] == ["t@eastus", "t@swedencentral"]
    assert [t.region for t in config.targets] == ["eastus", "swedencentral"]
    first = config.targets[0].provider_options()
    assert first["url"] == "https://llama-eastus.example.com/predict"
    assert first["headers"] == {"x-zone": "eastus"} and "regions" not in first
    assert config.targets[1].api_key_env == "KEY_swedencentral"
    stored = config.stored()["targets"]  # what the run keeps: the targets as fanned out
    assert [t["name"] for t in stored] == ["t@eastus", "t@swedencentral"]
    assert all("fanned_out" not in t and "regions" not in t for t in stored)


def test_thresholds_and_other_targets_see_the_fanned_out_names() -> None:
    data = plan(regions=["a1", "b2"], url="https://{region}.example.com")
    data["targets"].append({"name": "other", "provider": "local"})
    data["thresholds"] = {"t@a1": {"p95": "< 5s"}}  # one region's own rules
    config = parse_config(data)
    assert [t.name for t in config.targets] == ["t@a1", "t@b2", "other"]
    data["thresholds"] = {"t": {"p95": "< 5s"}}  # the unexpanded name is no target any more
    with pytest.raises(ConfigError) as info:
        parse_config(data)
    assert info.value.field.startswith("thresholds.t")


@pytest.mark.parametrize(
    ("target", "field", "fragment"),
    [
        ({"regions": []}, "targets[t].regions", "non-empty list"),
        ({"regions": "eastus"}, "targets[t].regions", "non-empty list"),
        ({"regions": ["eastus", "eastus"]}, "targets[t].regions", "each region once"),
        ({"regions": ["east us"]}, "targets[t].regions", "letters, digits"),
        ({"regions": [3]}, "targets[t].regions", "letters, digits"),
        ({"regions": ["eastus"], "region": "westus"}, "targets[t].region", "not both"),
        ({"fanned_out": "region"}, "targets[t].fanned_out", "no such key"),
    ],
)
def test_bad_fan_out_names_the_field(target: dict[str, Any], field: str, fragment: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse_config(plan(url="https://{region}.example.com", **target))
    assert info.value.field == field and fragment in str(info.value), str(info.value)


class WithRegion(ProviderOptions):
    region: str | None = None


class WithoutRegion(ProviderOptions):
    url: str


def test_a_provider_without_region_needs_the_placeholder() -> None:
    same = parse_config(plan(regions=["eastus", "westus"], url="https://one.example.com"))
    with pytest.raises(ConfigError) as info:
        provider_options(same.targets[0], WithoutRegion)
    assert info.value.field == "targets[t].regions"
    assert "no 'region' option" in str(info.value) and "{region}" in str(info.value)
    placed = parse_config(plan(regions=["eastus"], url="https://{region}.example.com"))
    assert provider_options(placed.targets[0], WithoutRegion).url == "https://eastus.example.com"
    regional = parse_config(plan(regions=["eastus", "westus"]))
    assert [provider_options(t, WithRegion).region for t in regional.targets] == [
        "eastus",
        "westus",
    ]


def test_fanned_out_targets_run_and_are_stored_per_region(tmp_path: Any) -> None:
    """Two "regions" of one emulated service (a path per region): each fanned-out target
    sends its own requests to its own endpoint, and the store keeps them apart."""
    fleet = SimulatedFleet(FleetConfig(cold_start=Duration.fixed(0.05), max_workers=2))
    with serve(make_app(fleet)) as served:
        config = parse_config(
            plan(
                regions=["r1", "r2"],
                url=served.url + "/predict?region={region}",
                output_path="$.output",
            )
        )
        runner = build_run(config, store=tmp_path / "r.sqlite")
        result = asyncio.run(runner.run())
    assert result.status == "completed"
    with Store(tmp_path / "r.sqlite") as store:
        (run,) = store.runs()
        invs = store.invocations(run.id)
    by_target = {t: [i for i in invs if i.target == t] for t in ("t@r1", "t@r2")}
    assert all(len(v) == 4 and all(i.outcome is Outcome.OK for i in v) for v in by_target.values())
    assert len(fleet.truths()) == 8
