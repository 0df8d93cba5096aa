"""``regions = [...]`` on a target: one target per region, compared like providers.

A plan writes one target and the regions it runs in::

    [[targets]]
    name = "cloudrun-l4"
    provider = "cloudrun"
    regions = ["us-central1", "europe-west4"]
    service = "projects/p/locations/{region}/services/llama"

and gets the targets ``cloudrun-l4@us-central1`` and ``cloudrun-l4@europe-west4``, each with
its ``region`` set (the tag campaigns and reports keep, and the option of providers that take
a ``region``) and ``{region}`` replaced in its options. A region is only worth fanning out to
if it reaches another endpoint: a target whose provider takes no ``region`` option and whose
options name no ``{region}`` is refused when the plan is built (``check_fanned_out``).

The expansion runs on the raw ``[[targets]]`` tables, before they are validated, so every later
check (unique names, thresholds naming targets, the provider's options) sees the fanned-out
targets as if they had been written out by hand.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from .._base._errors import ConfigError

PLACEHOLDER = "{region}"
SEPARATOR = "@"  # name@region
REGION_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
# keys of a target table that are not substituted: who the target is, not where it goes
_KEEP = frozenset({"name", "provider"})
# set on each fanned-out target: whether {region} was found in its options
FANNED_OUT = "fanned_out"


def fan_out(targets: Any) -> Any:
    """The ``[[targets]]`` list with each ``regions`` target replaced by one per region.

    Anything that is not a list of tables is returned as it is, for the model to refuse.
    """
    if not isinstance(targets, list):
        return targets
    expanded: list[Any] = []
    for i, table in enumerate(targets):
        if not isinstance(table, Mapping):
            expanded.append(table)
            continue
        name = table.get("name")
        where = f"targets[{name if isinstance(name, str) and name else i}]"
        if FANNED_OUT in table:  # the fan-out's own mark, not a key a plan may write
            raise ConfigError(f"{where}.{FANNED_OUT}", table[FANNED_OUT], "no such key: drop it")
        if "regions" not in table:
            expanded.append(table)
            continue
        regions = _regions(table["regions"], f"{where}.regions")
        if "region" in table:
            raise ConfigError(
                f"{where}.region",
                table["region"],
                "either region (one) or regions (a fan-out), not both: drop region",
            )
        for region in regions:
            found: list[bool] = []
            target = {
                key: value if key in _KEEP else _substitute(value, region, found)
                for key, value in table.items()
                if key != "regions"
            }
            if isinstance(name, str):
                target["name"] = f"{name}{SEPARATOR}{region}"
            target["region"] = region
            target[FANNED_OUT] = "placeholder" if found else "region"
            expanded.append(target)
    return expanded


def check_fanned_out(
    name: str, provider: str, how: str | None, option_names: Mapping[str, Any]
) -> None:
    """Refuse a fanned-out target whose region would change nothing: its provider has no
    ``region`` option and no option of it says ``{region}``."""
    if how != "region" or "region" in option_names:
        return
    base = name.rsplit(SEPARATOR, 1)[0]
    raise ConfigError(
        f"targets[{base}].regions",
        name,  # the first fanned-out target the check met
        f"a provider that takes a region, or {PLACEHOLDER} in the option naming the regional "
        f"endpoint: provider {provider!r} has no 'region' option, so every region would reach "
        f'the same endpoint (e.g. url = "https://llama-{PLACEHOLDER}.example.com")',
    )


def _regions(value: Any, where: str) -> list[str]:
    if not isinstance(value, list) or not value:
        raise ConfigError(where, value, 'a non-empty list of region names, e.g. ["us-east-1"]')
    seen: set[str] = set()
    for item in value:
        if not isinstance(item, str) or not REGION_PATTERN.match(item):
            raise ConfigError(
                where, item, "region names of letters, digits, '-', '_' and '.' (e.g. eastus)"
            )
        if item in seen:
            raise ConfigError(where, item, "each region once")
        seen.add(item)
    return list(value)


def _substitute(value: Any, region: str, found: list[bool]) -> Any:
    if isinstance(value, str):
        if PLACEHOLDER in value:
            found.append(True)
            return value.replace(PLACEHOLDER, region)
        return value
    if isinstance(value, Mapping):
        return {k: _substitute(v, region, found) for k, v in value.items()}
    if isinstance(value, list):
        return [_substitute(v, region, found) for v in value]
    return value
