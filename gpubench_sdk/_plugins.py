"""Plugin discovery over entry points, with stevedore.

Listing loads every plugin but never fails: a broken one is reported and skipped (stevedore's
``ExtensionManager``). Asking for one by name loads only that one and fails loudly, with an
install hint, when it is missing or broken (``DriverManager``). Loaded classes are type-checked,
so a plugin pointing at the wrong object is caught before a run starts.
"""

from __future__ import annotations

import difflib
import functools
import importlib.metadata
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from pydantic import TypeAdapter, ValidationError
from stevedore import DriverManager, ExtensionManager
from stevedore.exception import NoMatches

from ._base._errors import ConfigError, PluginLoadError, PluginNotFoundError
from ._base._validate import config_error, validate_options
from ._contract._capabilities import Capabilities
from ._contract._provider import Provider
from ._contract._workload import Workload
from ._scenarios import BUILTIN_SCENARIOS, Scenario

log = logging.getLogger("gpubench.plugins")

PROVIDERS = "gpubench.providers"
WORKLOADS = "gpubench.workloads"
SCENARIOS = "gpubench.scenarios"
_BASES: dict[str, type] = {PROVIDERS: Provider, WORKLOADS: Workload, SCENARIOS: Scenario}
_HINT = {
    PROVIDERS: "pip install gpubench-{name}",
    WORKLOADS: "pip install the package that provides workload {name!r}",
    SCENARIOS: "pip install the package that provides scenario kind {name!r}",
}

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class PluginInfo:
    """One entry point in a plugin group, loaded or not."""

    name: str
    group: str
    target: str  # "module:attribute"
    distribution: str | None
    cls: type | None
    error: str | None

    @property
    def ok(self) -> bool:
        return self.error is None

    @property
    def capabilities(self) -> list[str]:
        if self.cls is not None and issubclass(self.cls, Provider):
            return self.cls.capabilities.names()
        return []


def _distributions(group: str) -> dict[str, str]:
    """Entry point name -> "distribution version". stevedore's cached entry points lack it."""
    found = {}
    for ep in importlib.metadata.entry_points(group=group):
        if ep.dist is not None:
            found[ep.name] = f"{ep.dist.name} {ep.dist.version}"
    return found


@functools.cache  # reading every installed package's metadata is slow; it does not change
def plugin_distribution(name: str, group: str = PROVIDERS) -> tuple[str, str] | None:
    """``(distribution, version)`` of the package whose entry point ``name`` is in ``group``;
    None where no installed distribution declares it (a class defined in a script)."""
    for ep in importlib.metadata.entry_points(group=group, name=name):
        if ep.dist is not None:
            return str(ep.dist.name), str(ep.dist.version)
    return None


def _check_type(group: str, name: str, obj: Any) -> type:
    base = _BASES[group]
    if not (isinstance(obj, type) and issubclass(obj, base)):
        raise PluginLoadError(
            f"{group} plugin {name!r} points at {obj!r}, which is not a subclass of "
            f"{base.__module__.split('.')[0]}.{base.__name__}"
        )
    return obj


def list_plugins(group: str = PROVIDERS) -> list[PluginInfo]:
    """Every plugin installed in ``group``, sorted by name; broken ones carry ``error``."""
    failures: dict[str, tuple[Any, str]] = {}

    def on_failure(_manager: Any, ep: Any, exc: BaseException) -> None:
        failures[ep.name] = (ep, f"{type(exc).__name__}: {exc}")
        log.warning("skipping %s plugin %r: %s", group, ep.name, exc)

    manager = ExtensionManager(group, invoke_on_load=False, on_load_failure_callback=on_failure)
    dists = _distributions(group)
    infos = []
    for ext in manager.extensions:
        cls: type | None
        try:
            cls, error = _check_type(group, ext.name, ext.plugin), None
        except PluginLoadError as exc:
            cls, error = None, str(exc)
        infos.append(
            PluginInfo(ext.name, group, ext.entry_point.value, dists.get(ext.name), cls, error)
        )
    for name, (ep, error) in failures.items():
        infos.append(PluginInfo(name, group, ep.value, dists.get(name), None, error))
    return sorted(infos, key=lambda i: i.name)


def _load(group: str, name: str) -> type:
    try:
        manager = DriverManager(group, name, invoke_on_load=False, on_load_failure_callback=_raise)
    except NoMatches:
        installed = ", ".join(i.name for i in list_plugins(group)) or "none"
        hint = _HINT[group].format(name=name)
        raise PluginNotFoundError(
            f"no {group} plugin named {name!r} (installed: {installed}); to add it: {hint}"
        ) from None
    except PluginLoadError:
        raise
    except Exception as exc:
        raise PluginLoadError(f"{group} plugin {name!r} failed to load: {exc}") from exc
    return _check_type(group, name, manager.driver)


def _raise(_manager: Any, ep: Any, exc: BaseException) -> None:
    raise PluginLoadError(
        f"plugin {ep.name!r} ({ep.value}) failed to import: {type(exc).__name__}: {exc}"
    ) from exc


def provider_class(name: str) -> type[Provider]:
    """The Provider class registered under ``name``; fails loudly if missing or broken."""
    cls = _load(PROVIDERS, name)
    assert issubclass(cls, Provider)
    return cls


def workload_class(name: str) -> type[Workload]:
    """The Workload class registered under ``name``; fails loudly if missing or broken."""
    cls = _load(WORKLOADS, name)
    assert issubclass(cls, Workload)
    return cls


def scenario_class(name: str) -> type[Scenario]:
    """The Scenario class registered under ``name`` (the plan's ``kind``)."""
    cls = _load(SCENARIOS, name)
    assert issubclass(cls, Scenario)
    return cls


def declared_capabilities(name: str) -> Capabilities | None:
    """What the provider plugin ``name`` declares (its ``Capabilities``), or None when it is
    not installed here or does not load: a stored run is still read without it."""
    try:
        return provider_class(name).capabilities
    except Exception:
        return None


def load_provider(name: str, **options: Any) -> Provider:
    """Instantiate the provider plugin ``name`` with validated ``options``."""
    cls = provider_class(name)
    return cls(validate_options(cls.Options, options, f"provider {name!r}"))


def load_workload(kind: str, **options: Any) -> Workload:
    """Instantiate the workload plugin ``kind`` with validated ``options`` (as a plan's
    ``[workload]`` table would)."""
    cls = workload_class(kind)
    return cls(validate_options(cls.Options, options, "workload"))


@functools.cache
def _scenario_adapter(kind: str) -> tuple[type[Scenario], TypeAdapter[Scenario]]:
    """The class registered for ``kind`` under ``gpubench.scenarios``, and its validator."""
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
        inner = wrapped_config_error(exc)
        if inner is not None:  # raised by the dataclass's own checks: "burst.total" etc.
            raise ConfigError(f"{where}.{inner.field}", inner.value, inner.expected) from None
        raise config_error(exc, f"{where}.{kind}", cls, where=f"{where} ({kind})") from None


def wrapped_config_error(exc: ValidationError) -> ConfigError | None:
    """pydantic wraps a ConfigError raised inside a validator; find it."""
    for err in exc.errors(include_url=False):
        inner = (err.get("ctx") or {}).get("error")
        if isinstance(inner, ConfigError):
            return inner
    return None
