"""What a run found when it opened a provider, kept with the run (``TargetRecord.deployment``).

A figure published months later is only worth its metadata: the plan says what was asked for,
the provider's API says what was there. So when a run opens its providers it reads, once:

* the plugin's distribution and version (the one that measured, not the one installed when
  the results are read or exported);
* the scaling settings as the provider reports them (``get_scaling``), for a plugin that
  declares ``scaling_settings``; otherwise, or when reading fails, why not;
* what is deployed as the provider reports it (``deployed``: model or image and its revision
  or digest, hardware), for a plugin that implements the hook.

Reading is bounded by ``READ_TIMEOUT_S`` and never fails the run: a benchmark whose provider
will not say its settings is still a benchmark.
"""

from __future__ import annotations

import functools
import importlib.metadata
import logging
import sys
from collections.abc import Awaitable, Mapping
from dataclasses import asdict
from pathlib import Path
from typing import Any, TypeVar

import anyio

from .._base._secrets import redact, scrub
from .._contract._provider import Provider
from .._plugins import plugin_distribution

log = logging.getLogger("gpubench.runner")
T = TypeVar("T")

#: How long a provider's API may take to say its scaling settings, or what is deployed,
#: before the run goes on without them (a control plane answers in well under a second; one
#: that is not reachable must not hold a run's start for long).
READ_TIMEOUT_S = 5.0


async def read_deployment(provider: Provider) -> dict[str, Any]:
    """``{"plugin": {...}, "scaling": {...} | None, "scaling_read": how, "deployed": {...} |
    None, "deployed_read": how}``; each ``how`` is ``"provider"`` when the values came from
    its API, else why not."""
    scaling: dict[str, Any] | None = None
    if not provider.capabilities.scaling_settings:
        how = "not readable: the plugin does not declare scaling_settings"
    else:
        settings, how = await _ask(provider, provider.get_scaling(), "scaling settings")
        if settings is not None:
            scaling = {k: v for k, v in asdict(settings).items() if v is not None}
    deployed, deployed_how = await _ask(provider, provider.deployed(), "deployment")
    if deployed is not None and not deployed:
        deployed, deployed_how = None, "not described: the plugin reads no deployment details"
    return {
        "plugin": _plugin_of(provider),
        "scaling": scaling,
        "scaling_read": how,
        "deployed": None if deployed is None else scrub(dict(deployed)),
        "deployed_read": deployed_how,
    }


async def _ask(provider: Provider, call: Awaitable[T], what: str) -> tuple[T | None, str]:
    """``call``'s answer and ``"provider"``, or None and why not (logged): metadata is never
    worth the run, and a control plane that does not answer must not hold its start."""
    try:
        with anyio.fail_after(READ_TIMEOUT_S):
            return await call, "provider"
    except TimeoutError:
        how = f"not read: the provider did not answer within {READ_TIMEOUT_S:g} s"
    except Exception as exc:
        how = redact(f"not read: {type(exc).__name__}: {exc}")
    log.warning("%s: %s %s", provider.name, what, how)
    return None, how


def _plugin_of(provider: Provider) -> dict[str, str | None]:
    found = plugin_distribution(provider.name)
    if found is None:  # built in Python, not by entry point: the package its class comes from
        found = _distribution_of(type(provider).__module__.partition(".")[0])
    name, version = found if found is not None else (None, None)
    return {"name": name, "version": version, "class": _qualname(provider)}


@functools.cache
def _distribution_of(top_module: str) -> tuple[str, str] | None:
    # A distribution named as its module (``gpubench_sdk``'s ``gpubench-sdk``, a plugin's) is
    # found by name in a millisecond; only another is looked for in every installed package's
    # file list (0.3-0.7 s of CPU, once per process, before the first request), and only for
    # a module installed in site-packages: an editable install's modules and a project's own
    # (a provider class in the user's code) are in no file list.
    if top_module == "__main__":  # a script's class: no installed package to name
        return None
    try:
        dist = importlib.metadata.distribution(top_module)
    except importlib.metadata.PackageNotFoundError:
        if not _in_site_packages(top_module):
            return None
        dists = _installed_modules().get(top_module, [])
        return (dists[0], importlib.metadata.version(dists[0])) if dists else None
    return str(dist.name), str(dist.version)


def _in_site_packages(top_module: str) -> bool:
    """Whether the imported module ``top_module`` was loaded from an installed package."""
    module = sys.modules.get(top_module)
    where = getattr(module, "__file__", None) or next(iter(getattr(module, "__path__", ())), None)
    if not where:
        return False
    parts = Path(where).parts
    return "site-packages" in parts or "dist-packages" in parts


@functools.cache  # it reads every installed package's metadata
def _installed_modules() -> Mapping[str, list[str]]:
    return importlib.metadata.packages_distributions()


def _qualname(provider: Provider) -> str:
    cls = type(provider)
    return f"{cls.__module__}.{cls.__qualname__}"
