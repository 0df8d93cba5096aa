"""The estimated bill of a stored run's targets, priced from the plan or given specs.

Shared by ``gpubench cost run``, the run summary, reports and campaigns (so it lives here,
below the CLI, and not in it).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from .._base._errors import ConfigError
from ._calc import RunCost, run_cost
from ._catalog import PriceCatalog
from ._pricing import billing_for, declared_billing
from ._tables import TargetSpec

if TYPE_CHECKING:
    from .._store._store import RunInfo, Store


def target_rate(catalog: PriceCatalog, spec: TargetSpec) -> float:
    """USD per second of ``spec``: its explicit rate, else its SKU's catalog price."""
    if spec.rate_usd_per_s is not None:
        return spec.rate_usd_per_s
    assert spec.sku is not None  # parse_target_spec demands a SKU or a rate
    return catalog.rate_usd_per_s(spec.provider, spec.sku)


def plan_has_prices(info: RunInfo) -> bool:
    """Whether any target of the run's plan names a price (``price_sku``/``price_per_s_usd``)."""
    return any(
        isinstance(t, dict) and (t.get("price_sku") or t.get("price_per_s_usd") is not None)
        for t in info.config.get("targets", [])
    )


def priced_targets(
    store: Store,
    info: RunInfo,
    catalog: PriceCatalog,
    given: Mapping[str, TargetSpec],
    scale_down_s: float | None = None,
    *,
    require_price: bool,
) -> list[RunCost]:
    """The estimated bill of each target of a stored run that has a price.

    A target's price comes from ``given`` (``--price``), else from its plan entry
    (``price_sku``/``price_per_s_usd``, ``billing``). Without one, a target is skipped, or is
    an error naming the fix when ``require_price``.
    """
    entries = [t for t in info.config.get("targets", []) if isinstance(t, dict)]
    plans = {t.get("name"): t for t in entries}
    units = workload_units(info)
    costs = []
    for t in info.targets:
        plan = plans.get(t.name, {})
        index = entries.index(plan) if plan in entries else 0
        spec = given.get(t.name) or TargetSpec(
            t.name,
            plan.get("billing") or t.provider,
            plan.get("price_sku"),
            0.0,
            plan.get("price_per_s_usd"),
        )
        if spec.sku is None and spec.rate_usd_per_s is None:
            if not require_price:
                continue
            raise ConfigError(
                "--price",
                t.name,
                f"{t.name}=provider:SKU or {t.name}=provider,rate=USD_PER_S"
                " (the plan names no price_sku or price_per_s_usd for it)",
            )
        if t.name in given:
            billing = catalog.billing_model(spec.provider)
        else:  # the plan's billing, else the plugin's declared rules, else the catalog's
            billing, _ = billing_for(
                index, plan.get("billing"), t.provider, declared_billing(t.provider), catalog
            )
        rate = target_rate(catalog, spec)
        # the delay the target ran with (e.g. the local runtime's idle_timeout_s), if stored
        delay = scale_down_s if scale_down_s is not None else t.options.get("idle_timeout_s")
        costs.append(
            run_cost(
                store,
                info.id,
                t.name,
                billing=billing,
                rate_usd_per_s=rate,
                scale_down_s=None if delay is None else float(delay),
                units=units,
            )
        )
    return costs


def workload_units(info: RunInfo) -> tuple[str, str]:
    """What the run's workload counts as input and output units (``Workload.units``); tokens
    when its plugin is not installed here (the counts were stored as the workload read them)."""
    from .._plugins import workload_class

    kind = info.config.get("workload", {}).get("kind")
    try:
        units: tuple[str, str] = workload_class(str(kind)).units
    except Exception:
        return ("tokens", "tokens")
    return units
