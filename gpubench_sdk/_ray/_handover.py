"""What the driver hands the workers: the plan as written, the secret values it needs (sealed to
each worker by ``_seal``), and the list of plugins each worker must be able to load."""

from __future__ import annotations

import os
from typing import Any

from .._base._errors import ConfigError
from .._base._secrets import remember
from .._base._validate import resolve_secret
from .._plan._config import RunConfig
from .._plugins import plugin_distribution


def check_plan(config: RunConfig) -> None:
    """Refuse, before connecting to Ray, what cannot run on workers elsewhere."""
    for i, t in enumerate(config.targets):
        if t.provider == "local" and not t.provider_options().get("url"):
            raise ConfigError(
                f"targets[{i}].url",
                None,
                "the URL of a running local runtime the workers can reach, so they all share "
                "one (each worker would start its own): start it with `gpubench local serve`",
            )


def plugin_needs(config: RunConfig) -> dict[str, dict[str, str | None]]:
    """The plan's plugins, by entry point group, with the distribution that provides each here."""

    def dist(group: str, name: str) -> str | None:
        found = plugin_distribution(name, group)
        return None if found is None else found[0]

    providers = {t.provider for t in config.targets}
    return {
        "gpubench.providers": {p: dist("gpubench.providers", p) for p in sorted(providers)},
        "gpubench.workloads": {
            config.workload.kind: dist("gpubench.workloads", config.workload.kind)
        },
    }


def sealed_payload(config: RunConfig) -> dict[str, Any]:
    """The plan as written and the secret values the workers need (to be sealed, never sent
    in clear): each ``*_env`` a target names, ``api_key_file`` contents (the file is on this
    machine, not theirs), and the variables listed in ``execution.env``."""
    plan = config.model_dump(mode="json")
    env: dict[str, str] = {}
    for i, target in enumerate(plan["targets"]):
        path = target.get("api_key_file")
        if path:
            secret = resolve_secret(f"targets[{i}].api_key_file", env=None, file=path)
            assert secret is not None
            var = f"GPUBENCH_RAY_TARGET_{i}_API_KEY"
            env[var] = secret.get_secret_value()
            target.pop("api_key_file")
            target["api_key_env"] = var
        for key, value in target.items():
            if key.endswith("_env") and isinstance(value, str) and value not in env:
                secret = resolve_secret(f"targets[{i}].{key}", env=value, file=None)
                if secret is not None:
                    env[value] = secret.get_secret_value()
    for name in config.execution.env:
        if name not in os.environ:
            raise ConfigError("execution.env", name, "a variable set where gpubench runs")
        env[name] = os.environ[name]
        remember(env[name])  # a variable listed here is a secret until shown otherwise
    return {"plan": plan, "env": env}
