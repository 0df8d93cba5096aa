"""What a run found when it opened a provider, kept with the run (``TargetRecord.deployment``).

A figure published months later is only worth its metadata: the plan says what was asked for,
the provider's API says what was there. So when a run opens its providers it reads, once:

* the plugin's distribution and version (the one that measured, not the one installed when
  the results are read or exported);
* the scaling settings as the provider reports them (``get_scaling``), for a plugin that
  declares ``scaling_settings``; otherwise, or when reading fails, why not.

Reading is bounded by ``READ_TIMEOUT_S`` and never fails the run: a benchmark whose provider
will not say its settings is still a benchmark.
"""

from __future__ import annotations

import functools
import importlib.metadata
import logging
from dataclasses import asdict
from typing import Any

import anyio

from .._base._secrets import redact
from .._contract._provider import Provider
from .._plugins import plugin_distribution

log = logging.getLogger("gpubench.runner")

#: How long a provider's API may take to say its scaling settings before the run goes on (a
#: control plane answers in well under a second; one that is not reachable must not hold a
#: run's start for long).
READ_TIMEOUT_S = 5.0


async def read_deployment(provider: Provider) -> dict[str, Any]:
    """``{"plugin": {"name", "version"}, "scaling": {...} | None, "scaling_read": how}``;
    ``scaling_read`` is ``"provider"`` when the settings came from its API, else why not."""
    scaling: dict[str, Any] | None = None
    if not provider.capabilities.scaling_settings:
        how = "not readable: the plugin does not declare scaling_settings"
    else:
        how = "provider"
        try:
            with anyio.fail_after(READ_TIMEOUT_S):
                settings = await provider.get_scaling()
            scaling = {k: v for k, v in asdict(settings).items() if v is not None}
        except TimeoutError:
            how = f"not read: the provider did not answer within {READ_TIMEOUT_S:g} s"
        except Exception as exc:  # its settings are metadata: never worth the run
            how = redact(f"not read: {type(exc).__name__}: {exc}")
        if how != "provider":
            log.warning("%s: scaling settings %s", provider.name, how)
    return {"plugin": _plugin_of(provider), "scaling": scaling, "scaling_read": how}


def _plugin_of(provider: Provider) -> dict[str, str | None]:
    found = plugin_distribution(provider.name)
    if found is None:  # built in Python, not by entry point: the package its class comes from
        found = _distribution_of(type(provider).__module__.partition(".")[0])
    name, version = found if found is not None else (None, None)
    return {"name": name, "version": version, "class": _qualname(provider)}


@functools.cache  # packages_distributions reads every installed package's metadata
def _distribution_of(top_module: str) -> tuple[str, str] | None:
    dists = importlib.metadata.packages_distributions().get(top_module, [])
    return (dists[0], importlib.metadata.version(dists[0])) if dists else None


def _qualname(provider: Provider) -> str:
    cls = type(provider)
    return f"{cls.__module__}.{cls.__qualname__}"
