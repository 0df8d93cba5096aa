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
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from .._base._errors import ConfigError
from .._base._secrets import SENSITIVE, scrub
from .._base._validate import M, config_error, resolve_secret, validate_options
from .._plugins import build_scenario, wrapped_config_error
from .._scenarios import Scenario
from ._regions import check_fanned_out, fan_out


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class TargetConfig(BaseModel):
    """``[[targets]]``: a name, a provider plugin, and that provider's options (flat)."""

    model_config = ConfigDict(extra="allow", frozen=True)

    name: str = Field(min_length=1, pattern=r"^[A-Za-z0-9_.:@-]+$")
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
    # Set by the `regions = [...]` fan-out (gpubench_sdk._plan._regions): "placeholder" when
    # {region} was replaced in the options, "region" when only `region` tells them apart.
    fanned_out: Literal["placeholder", "region"] | None = Field(default=None, exclude=True)

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


class RunSection(_Strict):
    name: str = "run"
    output: str = "gpubench.sqlite"
    max_requests: int | None = Field(default=None, ge=1)
    max_cost_usd: float | None = Field(default=None, gt=0)  # all targets together (budget guard)
    # The store's commit window: every request is on disk at most this long after it ends
    # (0: committed as it ends, at a cost bench/store_bench.py measures).
    flush_interval_s: float = Field(default=0.5, ge=0, le=60, allow_inf_nan=False)


class ExecutionSection(_Strict):
    """``[execution]``: where the load is generated. ``local`` (default) is this machine
    (``gpubench run -p N`` for its cores); ``ray`` runs ``workers`` load generators as Ray
    actors on a Ray cluster (gpubench_sdk._ray, docs/ray.md). The plan's other sections are
    the same on every backend: the result differs only in capacity."""

    backend: Literal["local", "ray"] = "local"
    # ray.init's address: "auto" (RAY_ADDRESS, else the cluster on this machine), "host:6379",
    # or a Ray Client address "ray://host:10001"; None: "auto".
    address: str | None = Field(default=None, min_length=1)
    workers: int | None = Field(default=None, ge=1, le=4096)  # None: one per alive node
    num_cpus: float = Field(default=1.0, gt=0)  # each worker's CPU reservation
    resources: dict[str, float] = Field(default_factory=dict)  # custom resources per worker
    # Placement group strategy for the workers' bundles (Ray's names, lower case).
    placement: Literal["spread", "strict_spread", "pack", "strict_pack"] = "spread"
    # Node labels every worker's node must carry, e.g. {region = "us-east-1"} (Ray node labels:
    # `ray start --labels`, KubeRay rayStartParams); workers land only on matching nodes.
    labels: dict[str, str] = Field(default_factory=dict)
    # Extra environment variables the workers need (e.g. AWS_ACCESS_KEY_ID): read here and
    # sent sealed, like api_key_env, never through runtime_env's env_vars.
    env: list[str] = Field(default_factory=list)
    # Ray runtime_env for the workers (pip, working_dir, py_modules...), so plugins import there.
    runtime_env: dict[str, Any] | None = None
    # The bound on every wait for the cluster: the workers' placement, each call to a worker
    # (their first answer included), a poll. Past it the run stops with an error that names
    # what did not answer and this driver's node address (which every node must reach).
    timeout_s: float = Field(default=60.0, gt=0, le=3600)

    @field_validator("runtime_env")
    @classmethod
    def _no_env_vars(cls, value: dict[str, Any] | None) -> dict[str, Any] | None:
        if value and value.get("env_vars"):
            raise ConfigError(
                "execution.runtime_env.env_vars",
                "(hidden)",
                "no env_vars: Ray shows them in its dashboard and logs; list the variables "
                'in execution.env = ["NAME"] and gpubench sends their values sealed',
            )
        return value


class RunConfig(_Strict):
    """A whole benchmark plan, as written in a TOML file."""

    run: RunSection = RunSection()
    workload: WorkloadConfig = WorkloadConfig()
    targets: list[TargetConfig] = Field(min_length=1)
    scenarios: list[dict[str, Any]] = Field(min_length=1)
    execution: ExecutionSection = ExecutionSection()
    # rules the run must hold (grammar and checks: gpubench_sdk._plan._thresholds)
    thresholds: dict[str, Any] = Field(default_factory=dict)

    @model_validator(mode="before")
    @classmethod
    def _fan_out_regions(cls, data: Any) -> Any:
        if isinstance(data, Mapping) and "targets" in data:
            return {**data, "targets": fan_out(data["targets"])}
        return data

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
        from ._thresholds import plan_thresholds  # raises ConfigError naming the rule's field

        plan_thresholds(self.thresholds, [t.name for t in self.targets])
        return self

    def build_scenarios(self) -> list[Scenario]:
        return [build_scenario(data, f"scenarios[{i}]") for i, data in enumerate(self.scenarios)]

    def stored(self) -> dict[str, Any]:
        """The config as stored with a run: references to secrets, never their values
        (credential-named headers and options masked, URLs without user:password)."""
        # [execution] is kept only when set: the plan is the same on every backend, and most
        # runs are local.
        local = self.execution == ExecutionSection()
        data: dict[str, Any] = scrub(
            self.model_dump(mode="json", exclude={"execution"} if local else None)
        )
        return data


def parse_config(data: Mapping[str, Any], source: str = "config") -> RunConfig:
    try:
        return RunConfig.model_validate(data)
    except ConfigError:
        raise
    except ValidationError as exc:
        inner = wrapped_config_error(exc)
        if inner is not None:
            raise inner from None
        raise config_error(exc, model=RunConfig) from None


def load_config(path: str | Path) -> RunConfig:
    """Read and validate a TOML plan. Relative ``run.output`` resolves against the CWD."""
    path = Path(path)
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise ConfigError("config", str(path), f"a readable TOML file ({exc.strerror})") from None
    try:
        text = raw.decode("utf-8-sig")  # a BOM (Notepad, a spreadsheet) is no syntax error
    except UnicodeDecodeError as exc:
        kind = "binary data" if b"\0" in raw else "text in another encoding"
        raise ConfigError(
            str(path),
            "(not UTF-8)",
            f"a UTF-8 TOML file: byte {exc.start} is {raw[exc.start : exc.start + 1]!r}, "
            f"not UTF-8 ({kind}); save it as UTF-8",
        ) from None
    if "\0" in text:
        raise ConfigError(str(path), "(binary data)", "a TOML text file: it holds NUL bytes")
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(str(path), "(TOML syntax)", f"valid TOML: {exc}") from None
    _files_beside(data, path.parent)
    return parse_config(data, str(path))


def _files_beside(data: dict[str, Any], folder: Path) -> None:
    """A scenario's relative ``path`` (a replayed trace), a workload's dataset, tokenizer and
    media files are read beside the plan, wherever gpubench runs from; stored absolute, the run
    says which file."""
    scenarios = data.get("scenarios")
    tables = list(scenarios) if isinstance(scenarios, list) else []
    workload = data.get("workload")
    if isinstance(workload, dict):
        tables.append(workload.get("dataset"))  # a workload's dataset file, likewise
    for table in tables:
        trace = table.get("path") if isinstance(table, dict) else None
        if isinstance(trace, str) and trace and not Path(trace).is_absolute():
            table["path"] = str((folder / trace).resolve())
    # a workload's tokenizer (else a model id in the local cache), audio file or picture
    media = workload if isinstance(workload, dict) else {}
    for key in ("tokenizer", "file", "image_file"):
        given = media.get(key)
        if isinstance(given, str) and given and (folder / given).exists():
            media[key] = str((folder / given).resolve())


def provider_options(target: TargetConfig, options_model: type[M]) -> M:
    """Validate a target's provider options and resolve its API key reference."""
    prefix = f"targets[{target.name}]"
    if target.fanned_out is not None:
        fields = options_model.model_fields
        check_fanned_out(target.name, target.provider, target.fanned_out, fields)
    data = target.provider_options()
    if target.region is not None and "region" in options_model.model_fields:
        data["region"] = target.region
    key = resolve_secret(f"{prefix}.api_key", env=target.api_key_env, file=target.api_key_file)
    if key is not None:
        data["api_key"] = key
    return validate_options(options_model, data, prefix, also=TargetConfig.model_fields)
