"""Bad config names the field, the value and the fix; good config builds a runner."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpubench_sdk import ConfigError, load_config
from gpubench_sdk._plan._build import build_run
from gpubench_sdk._plan._config import parse_config

GOOD = {
    "run": {"name": "t"},
    "workload": {"kind": "probe", "sleep_ms": 5},
    "targets": [{"name": "a", "provider": "local", "max_workers": 2}],
    "scenarios": [{"kind": "burst", "total": 10, "concurrency": 2}],
}


def _with(**changes: object) -> dict[str, object]:
    data = {k: (list(v) if isinstance(v, list) else dict(v)) for k, v in GOOD.items()}  # type: ignore[call-overload]
    data.update(changes)
    return data


@pytest.mark.parametrize(
    ("data", "field", "fragment"),
    [
        (
            _with(scenarios=[{"kind": "burst", "total": 0, "concurrency": 5}]),
            "scenarios[0].burst.total",
            "an integer >= 1",
        ),
        (
            _with(scenarios=[{"kind": "bursty", "total": 1}]),
            "scenarios[0].kind",
            "'burst', 'rate', 'cold_starts'",
        ),
        (
            _with(scenarios=[{"kind": "burst", "concurrency": 5}]),
            "scenarios[0].burst.total",
            "expected a value: this field is required",
        ),
        (
            _with(scenarios=[{"kind": "rate", "rps": 5, "duration_s": float("inf")}]),
            "scenarios[0].rate.duration_s",
            "finite number",
        ),
        (
            _with(scenarios=[{"kind": "burst", "total": 10, "concurrency": True}]),
            "scenarios[0].burst.concurrency",
            "valid integer",
        ),
        (
            _with(scenarios=[{"kind": "cold_starts", "n": 2, "idle_gap_s": -1}]),
            "scenarios[0].cold_starts.idle_gap_s",
            "seconds >= 0",
        ),
        (
            _with(scenarios=[{"kind": "rate", "rps": 5, "duration_s": 1, "arrivals": "gaussian"}]),
            "scenarios[0].rate.arrivals",
            "'constant' or 'poisson'",
        ),
        (
            _with(scenarios=[{"kind": "burst", "total": 1, "concurrency": 1, "concurency": 2}]),
            "scenarios[0].burst.concurency",
            "unknown key 'concurency' in scenarios[0] (burst); did you mean 'concurrency'?",
        ),
        (  # the typo is named, not the required field it left missing
            _with(scenarios=[{"kind": "burst", "total": 1, "concurency": 2}]),
            "scenarios[0].burst.concurency",
            "unknown key 'concurency' in scenarios[0] (burst); did you mean 'concurrency'?",
        ),
        (_with(targets=[]), "targets", "at least 1"),
        (
            _with(targets=[{"name": "a", "provider": "local"}, {"name": "a", "provider": "local"}]),
            "targets[1].name",
            "no other target",
        ),
        (_with(run={"nmae": "x"}), "run.nmae", "unknown key 'nmae' in run; did you mean 'name'?"),
        (_with(runn={}), "runn", "unknown key 'runn' in the plan; did you mean 'run'?"),
    ],
)
def test_bad_config_names_field_and_fix(data: dict[str, object], field: str, fragment: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse_config(data)
    assert info.value.field == field
    assert fragment in str(info.value)


def test_bad_provider_option_is_reported_against_the_target(tmp_path: Path) -> None:
    cfg = parse_config(_with(targets=[{"name": "a", "provider": "local", "max_workers": -1}]))
    with pytest.raises(ConfigError) as info:
        build_run(cfg, store=tmp_path / "x.sqlite")
    assert info.value.field == "targets[a].max_workers"
    assert "-1" in str(info.value)


def test_bad_workload_option(tmp_path: Path) -> None:
    cfg = parse_config(_with(workload={"kind": "probe", "sleep_ms": "slow"}))
    with pytest.raises(ConfigError, match=r"workload.sleep_ms: got 'slow'"):
        build_run(cfg, store=tmp_path / "x.sqlite")


def test_missing_secret_env_names_the_variable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("GPB_NOT_SET", raising=False)
    cfg = parse_config(
        _with(targets=[{"name": "a", "provider": "local", "api_key_env": "GPB_NOT_SET"}])
    )
    with pytest.raises(
        ConfigError, match=r"api_key_env: got 'GPB_NOT_SET'; expected .*export GPB_NOT_SET="
    ):
        build_run(cfg, store=tmp_path / "x.sqlite")


def test_toml_errors(tmp_path: Path) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text("[run\nname = 1")
    with pytest.raises(ConfigError, match="valid TOML"):
        load_config(bad)
    with pytest.raises(ConfigError, match="readable TOML file"):
        load_config(tmp_path / "missing.toml")


def test_quickstart_example_is_valid() -> None:
    cfg = load_config(Path(__file__).parents[1] / "examples" / "quickstart.toml")
    kinds = [s.kind for s in cfg.build_scenarios()]
    assert kinds == ["cold_starts", "burst", "rate"]
    burst = cfg.build_scenarios()[1]
    assert (burst.total, burst.concurrency) == (200, 5)  # type: ignore[union-attr]


def test_region_is_a_target_tag_passed_only_to_providers_that_take_it() -> None:
    from pydantic import BaseModel

    from gpubench_sdk._plan._config import provider_options

    class WithRegion(BaseModel):
        region: str | None = None

    class Without(BaseModel):
        model_config = {"extra": "forbid"}

    config = parse_config(
        {
            "targets": [{"name": "a", "provider": "local", "region": "eu-west-1"}],
            "scenarios": [{"kind": "burst", "total": 1, "concurrency": 1}],
        }
    )
    target = config.targets[0]
    assert target.region == "eu-west-1" and "region" not in target.provider_options()
    assert provider_options(target, WithRegion).region == "eu-west-1"
    provider_options(target, Without)  # not passed on: no "extra field" error
