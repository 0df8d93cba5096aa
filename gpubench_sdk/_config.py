"""Run configuration: TOML -> validated models -> live targets, workload and scenarios.

Every validation failure becomes a ``ConfigError`` naming the field's dotted path, the value
given and what is expected. Secrets are referenced by environment variable or file name
(``api_key_env`` / ``api_key_file``) and only resolved when the run is built, so a stored or
printed config never holds a key.
"""

from __future__ import annotations

import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any, TypeVar

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    TypeAdapter,
    ValidationError,
    field_validator,
    model_validator,
)

from ._errors import ConfigError
from ._scenarios import Burst, ColdStarts, Rate, Scenario
from ._secrets import SENSITIVE, resolve_secret, scrub

M = TypeVar("M", bound=BaseModel)


def _location(loc: tuple[int | str, ...]) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def config_error(exc: ValidationError, prefix: str = "") -> ConfigError:
    """The first problem of a pydantic ValidationError as a ConfigError; the count of the rest."""
    errors = exc.errors(include_url=False)
    first = errors[0]
    loc = _location(tuple(first["loc"]))
    field = f"{prefix}.{loc}" if prefix and loc else (prefix or loc or "config")
    expected = first["msg"]
    value = scrub(first.get("input"))  # a nested credential-named value is never shown
    if first["type"] in ("extra_forbidden", "unexpected_keyword_argument"):
        # the value is not shown: an unknown field may well be a misplaced secret
        value, expected = "(not shown)", "no such field: remove it or check its spelling"
    elif first["type"] in ("missing", "missing_argument"):
        value, expected = "(nothing)", "a value: this field is required"
    if len(errors) > 1:
        expected += f" (and {len(errors) - 1} more problem(s))"
    return ConfigError(field, value, expected)


def validate_options(model: type[M], data: Mapping[str, Any], prefix: str) -> M:
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise config_error(exc, prefix) from None


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class TargetConfig(BaseModel):
    """``[[targets]]``: a name, a provider plugin, and that provider's options (flat)."""

    model_config = ConfigDict(extra="allow", frozen=True)

    name: str = Field(min_length=1, pattern=r"^[A-Za-z0-9_.:-]+$")
    provider: str = Field(min_length=1)
    api_key_env: str | None = None
    api_key_file: str | None = None
    # Budget guard (gpubench_sdk.cost): how this target is priced, and its own spending cap.
    # The price is the catalog's for `price_sku` (billing rules of `billing`, default the
    # provider's name), or an explicit `price_per_s_usd` (e.g. a notional price for `local`).
    price_sku: str | None = None
    price_per_s_usd: float | None = Field(default=None, ge=0)
    billing: str | None = None
    max_cost_usd: float | None = Field(default=None, gt=0)
    # Where the target runs (e.g. "us-east-1"): a tag kept with the run for campaigns and
    # reports, and passed on to a provider whose options take a `region`.
    region: str | None = Field(default=None, min_length=1)

    def provider_options(self) -> dict[str, Any]:
        return dict(self.model_extra or {})

    @model_validator(mode="after")
    def _no_inline_secrets(self) -> TargetConfig:
        for key, value in (self.model_extra or {}).items():
            if (
                isinstance(value, str)
                and SENSITIVE.search(key)
                and not key.endswith(("_env", "_file"))
            ):
                raise ConfigError(
                    f"targets[{self.name}].{key}",
                    "(hidden)",
                    "no secret written in the plan, where it would be stored with the run: "
                    'use api_key_env = "VARIABLE" or api_key_file = "path"',
                )
        return self


class WorkloadConfig(BaseModel):
    """``[workload]``: a workload plugin ``kind`` and its options (flat)."""

    model_config = ConfigDict(extra="allow", frozen=True)

    kind: str = "probe"

    def workload_options(self) -> dict[str, Any]:
        return dict(self.model_extra or {})


_SCENARIOS: dict[str, TypeAdapter[Scenario]] = {
    "burst": TypeAdapter(Burst),
    "rate": TypeAdapter(Rate),
    "cold_starts": TypeAdapter(ColdStarts),
}


def build_scenario(data: Mapping[str, Any], where: str) -> Scenario:
    """A scenario dataclass from its TOML table; the dataclass itself holds the rules."""
    kind = data.get("kind")
    adapter = _SCENARIOS.get(kind) if isinstance(kind, str) else None
    if adapter is None:
        raise ConfigError(f"{where}.kind", kind, f"one of {', '.join(map(repr, _SCENARIOS))}")
    try:
        return adapter.validate_python({k: v for k, v in data.items() if k != "kind"})
    except ValidationError as exc:
        inner = _wrapped_config_error(exc)
        if inner is not None:  # raised by the dataclass's own checks: "burst.total" etc.
            raise ConfigError(f"{where}.{inner.field}", inner.value, inner.expected) from None
        raise config_error(exc, f"{where}.{kind}") from None


def _wrapped_config_error(exc: ValidationError) -> ConfigError | None:
    """pydantic wraps a ConfigError raised inside a validator; find it."""
    for err in exc.errors(include_url=False):
        inner = (err.get("ctx") or {}).get("error")
        if isinstance(inner, ConfigError):
            return inner
    return None


class RunSection(_Strict):
    name: str = "run"
    output: str = "gpubench.sqlite"
    max_requests: int | None = Field(default=None, ge=1)
    max_cost_usd: float | None = Field(default=None, gt=0)  # all targets together (budget guard)


class RunConfig(_Strict):
    """A whole benchmark plan, as written in a TOML file."""

    run: RunSection = RunSection()
    workload: WorkloadConfig = WorkloadConfig()
    targets: list[TargetConfig] = Field(min_length=1)
    scenarios: list[dict[str, Any]] = Field(min_length=1)

    @field_validator("scenarios")
    @classmethod
    def _scenarios_valid(cls, scenarios: list[dict[str, Any]]) -> list[dict[str, Any]]:
        for i, data in enumerate(scenarios):
            build_scenario(data, f"scenarios[{i}]")
        return scenarios

    @model_validator(mode="after")
    def _unique_names(self) -> RunConfig:
        seen: set[str] = set()
        for i, t in enumerate(self.targets):
            if t.name in seen:
                raise ConfigError(f"targets[{i}].name", t.name, "a name no other target uses")
            seen.add(t.name)
        return self

    def build_scenarios(self) -> list[Scenario]:
        return [build_scenario(data, f"scenarios[{i}]") for i, data in enumerate(self.scenarios)]

    def stored(self) -> dict[str, Any]:
        """The config as stored with a run: references to secrets, never their values
        (credential-named headers and options masked, URLs without user:password)."""
        data: dict[str, Any] = scrub(self.model_dump(mode="json"))
        return data


def parse_config(data: Mapping[str, Any], source: str = "config") -> RunConfig:
    try:
        return RunConfig.model_validate(data)
    except ConfigError:
        raise
    except ValidationError as exc:
        inner = _wrapped_config_error(exc)
        if inner is not None:
            raise inner from None
        raise config_error(exc) from None


def load_config(path: str | Path) -> RunConfig:
    """Read and validate a TOML plan. Relative ``run.output`` resolves against the CWD."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError("config", str(path), f"a readable TOML file ({exc.strerror})") from None
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(str(path), "(TOML syntax)", f"valid TOML: {exc}") from None
    return parse_config(data, str(path))


def provider_options(target: TargetConfig, options_model: type[M]) -> M:
    """Validate a target's provider options and resolve its API key reference."""
    prefix = f"targets[{target.name}]"
    data = target.provider_options()
    if target.region is not None and "region" in options_model.model_fields:
        data["region"] = target.region
    key = resolve_secret(f"{prefix}.api_key", env=target.api_key_env, file=target.api_key_file)
    if key is not None:
        data["api_key"] = key
    return validate_options(options_model, data, prefix)
