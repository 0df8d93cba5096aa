"""Run configuration: TOML -> validated models -> live targets, workload and scenarios.

Every validation failure becomes a ``ConfigError`` naming the field's dotted path, the value
given and what is expected. Secrets are referenced by environment variable or file name
(``api_key_env`` / ``api_key_file``) and only resolved when the run is built, so a stored or
printed config never holds a key.
"""

from __future__ import annotations

import dataclasses
import difflib
import functools
import importlib.metadata
import tomllib
import typing
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, Literal, TypeVar
from urllib.parse import urlsplit

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
from ._regions import check_fanned_out, fan_out
from ._scenarios import BUILTIN_SCENARIOS, Scenario
from ._secrets import SENSITIVE, resolve_secret, scrub

M = TypeVar("M", bound=BaseModel)


def _location(loc: tuple[int | str, ...]) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def config_error(
    exc: ValidationError,
    prefix: str = "",
    model: Any = None,
    where: str | None = None,
    also: Iterable[str] = (),
) -> ConfigError:
    """The clearest problem of a pydantic ValidationError as a ConfigError, with the count of
    the rest: a ConfigError a validator raised first, then an unknown key (named with the
    closest valid one of ``model``, the model or dataclass validated), then the first error."""
    errors = exc.errors(include_url=False)
    more = f" (and {len(errors) - 1} more problem(s))" if len(errors) > 1 else ""
    for err in errors:
        inner = (err.get("ctx") or {}).get("error")
        if isinstance(inner, ConfigError):  # raised by a validator: it names its own field
            loc = _location(tuple(err["loc"]))
            field = ".".join(p for p in (prefix, loc, inner.field) if p)
            return ConfigError(field, inner.value, inner.expected)
    extra = [e for e in errors if e["type"] in _UNKNOWN]
    first = extra[0] if extra else errors[0]
    loc = _location(tuple(first["loc"]))
    field = f"{prefix}.{loc}" if prefix and loc else (prefix or loc or "config")
    if extra:
        *parent, key = first["loc"]
        inside, base = _location(tuple(parent)), where or prefix
        place = f"{base}.{inside}" if base and inside else (base or inside or "the plan")
        valid = {*_keys_at(model, parent), *also} - {"api_key"}  # api_key: never in a plan
        return unknown_key(field, str(key), place, valid, more)
    expected = first["msg"]
    value = scrub(first.get("input"))  # a nested credential-named value is never shown
    if first["type"] in ("missing", "missing_argument"):
        value, expected = "(nothing)", "a value: this field is required"
    return ConfigError(field, value, expected + more)


_UNKNOWN = ("extra_forbidden", "unexpected_keyword_argument")


def unknown_key(
    field: str, key: str, place: str, valid: Iterable[str], more: str = ""
) -> ConfigError:
    """A key that is no field, named with the closest valid one. Its value is never shown:
    an unknown field may well be a misplaced secret."""
    names = sorted(valid)
    close = difflib.get_close_matches(key, names, n=1, cutoff=0.6)
    if close:
        fix = f"did you mean {close[0]!r}?"
    elif names:
        fix = f"remove it (valid keys: {', '.join(names)})"
    else:
        fix = "remove it"
    message = f"unknown key {key!r} in {place}; {fix}{more}"
    return ConfigError(field, "(not shown)", f"no such field: {fix}", message=message)


def _keys_at(model: Any, loc: Sequence[int | str]) -> list[str]:
    """The field names of ``model`` (a pydantic model or dataclass) at the path ``loc``."""
    for part in loc:
        if model is None:
            return []
        if isinstance(part, int):
            args = [a for a in typing.get_args(model) if a is not type(None)]
            model = args[0] if args else None
            continue
        model = _field_types(model).get(str(part))
        args = [a for a in typing.get_args(model) if a is not type(None)]
        if args and typing.get_origin(model) is not list:
            model = args[0]  # Optional[X] -> X
    return list(_field_types(model)) if model is not None else []


def _field_types(model: Any) -> dict[str, Any]:
    if isinstance(model, type) and issubclass(model, BaseModel):
        return {n: f.annotation for n, f in model.model_fields.items()}
    if dataclasses.is_dataclass(model):
        return {f.name: f.type for f in dataclasses.fields(model)}
    return {}


def validate_options(
    model: type[M], data: Mapping[str, Any], prefix: str, also: Iterable[str] = ()
) -> M:
    """``model`` from ``data``; ``also`` are other keys valid where ``data`` was written."""
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise config_error(exc, prefix, model, also=also) from None


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
    # Set by the `regions = [...]` fan-out (gpubench_sdk._regions): "placeholder" when
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


@functools.cache
def _scenario_adapter(kind: str) -> tuple[type[Scenario], TypeAdapter[Scenario]]:
    """The class registered for ``kind`` under ``gpubench.scenarios``, and its validator."""
    from ._plugins import SCENARIOS, scenario_class

    registered = {ep.name for ep in importlib.metadata.entry_points(group=SCENARIOS)}
    if kind in registered:
        cls = scenario_class(kind)
    elif kind in BUILTIN_SCENARIOS:  # installed without its entry points (stale metadata)
        cls = BUILTIN_SCENARIOS[kind]
    else:
        kinds = [*BUILTIN_SCENARIOS, *sorted(registered - set(BUILTIN_SCENARIOS))]
        close = difflib.get_close_matches(kind, kinds, n=1, cutoff=0.6)
        hint = f"did you mean {close[0]!r}? " if close else ""
        raise ConfigError("kind", kind, f"{hint}one of {', '.join(map(repr, kinds))}")
    return cls, TypeAdapter(cls)


def build_scenario(data: Mapping[str, Any], where: str) -> Scenario:
    """A scenario from its TOML table; its class (found by ``kind``) holds the rules."""
    kind = data.get("kind")
    if not isinstance(kind, str):
        raise ConfigError(
            f"{where}.kind", kind, f"one of {', '.join(map(repr, BUILTIN_SCENARIOS))}"
        )
    try:
        cls, adapter = _scenario_adapter(kind)
    except ConfigError as exc:
        raise ConfigError(f"{where}.kind", exc.value, exc.expected) from None
    try:
        return adapter.validate_python({k: v for k, v in data.items() if k != "kind"})
    except ValidationError as exc:
        inner = _wrapped_config_error(exc)
        if inner is not None:  # raised by the dataclass's own checks: "burst.total" etc.
            raise ConfigError(f"{where}.{inner.field}", inner.value, inner.expected) from None
        raise config_error(exc, f"{where}.{kind}", cls, where=f"{where} ({kind})") from None


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
    # rules the run must hold (grammar and checks: gpubench_sdk._thresholds)
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
        inner = _wrapped_config_error(exc)
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
        text = raw.decode("utf-8")
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
    """A scenario's relative ``path`` (a replayed trace) is read beside the plan, wherever
    gpubench runs from; it is stored absolute, so the run says which file it replayed."""
    scenarios = data.get("scenarios")
    for table in scenarios if isinstance(scenarios, list) else ():
        trace = table.get("path") if isinstance(table, dict) else None
        if isinstance(trace, str) and trace and not Path(trace).is_absolute():
            table["path"] = str((folder / trace).resolve())


def check_url(field: str, url: str, *, host_only_ok: bool = False) -> None:
    """Refuse what is not an absolute http(s) URL with a host (``ConfigError`` naming
    ``field``); ``host_only_ok`` also accepts a bare ``host[:port]`` (an API endpoint host)."""
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - raises ValueError for a port that is not a number
    except ValueError as exc:
        raise ConfigError(field, url, f"a URL like https://host/path ({exc})") from None
    if any(c.isspace() for c in url) or not url:
        problem = "no spaces" if url else "not empty"
    elif host_only_ok and "://" not in url:
        return
    elif parts.scheme not in ("http", "https"):
        problem = "a scheme, http:// or https://"
    elif not parts.hostname:
        problem = "a host after the scheme"
    else:
        return
    raise ConfigError(field, url, f"a URL like https://host/path: {problem}")


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
