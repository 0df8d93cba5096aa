"""Where a target's price comes from: the plan, the catalog, or the provider plugin.

A target is priced by a rate (``price_per_s_usd``, else ``price_sku`` looked up in the catalog)
and billing rules: the plan's ``billing`` (a catalog name), else the rules its provider plugin
declares (``Capabilities.billing``), else the catalog's for its provider. The budget guard,
``gpubench run --dry-run`` and the bill after a run all resolve it here, so a plan that names a
price it cannot be billed by is refused before the first request, never after the last.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from .._base._errors import ConfigError
from .._contract._billing import BillingModel

if TYPE_CHECKING:
    from ._catalog import PriceCatalog


class PlanTarget(Protocol):
    """What pricing reads of a plan's target (``[[targets]]``): the plan model satisfies it,
    and cost, below the plan, names only this shape of it."""

    @property
    def name(self) -> str: ...
    @property
    def provider(self) -> str: ...
    @property
    def price_sku(self) -> str | None: ...
    @property
    def price_per_s_usd(self) -> float | None: ...
    @property
    def billing(self) -> str | None: ...
    @property
    def max_cost_usd(self) -> float | None: ...
    def provider_options(self) -> dict[str, Any]: ...


class RunCaps(Protocol):
    @property
    def max_cost_usd(self) -> float | None: ...


class PricedPlan(Protocol):
    """What pricing reads of a plan: its targets and the run's spending cap."""

    @property
    def targets(self) -> Sequence[PlanTarget]: ...
    @property
    def run(self) -> RunCaps: ...


@dataclass(frozen=True, slots=True)
class TargetPrice:
    """How one target is billed: its rules, its rate, and where each came from."""

    billing: BillingModel
    rate_usd_per_s: float
    billing_from: str  # "plan billing = ...", "plugin ...", "catalog ..."
    rate_from: str


def declared_billing(provider: str) -> BillingModel | None:
    """The billing rules the provider plugin declares, if it is installed and declares any (the
    catalog may still know a provider whose plugin is not installed)."""
    from .._plugins import declared_capabilities

    declared = declared_capabilities(provider)
    return None if declared is None else declared.billing


def billing_for(
    index: int,
    billing: str | None,
    provider: str,
    declared: BillingModel | None,
    catalog: PriceCatalog,
) -> tuple[BillingModel, str]:
    """The billing rules of target ``index``, or a ``ConfigError`` naming the fix."""
    if billing is not None:
        try:
            return catalog.billing_model(billing), f"plan billing = {billing!r}"
        except ConfigError:
            raise ConfigError(
                f"targets[{index}].billing", billing, f"one of {sorted(catalog.billing)}"
            ) from None
    if declared is not None:
        return declared, f"plugin {provider!r} (Capabilities.billing)"
    try:
        return catalog.billing_model(provider), f"catalog {provider!r}"
    except ConfigError:
        raise ConfigError(
            f"targets[{index}].billing",
            None,
            f"billing rules for provider {provider!r}: its plugin declares none and the catalog "
            f"has none; name a catalog model (one of {sorted(catalog.billing)}) or add one "
            "with --prices",
        ) from None


def target_price(
    index: int,
    target: PlanTarget,
    declared: BillingModel | None,
    catalog: PriceCatalog,
) -> TargetPrice | None:
    """The price of ``target`` (``None`` if the plan names no rate for it)."""
    if target.price_per_s_usd is not None:
        rate, rate_from = target.price_per_s_usd, "plan price_per_s_usd"
    elif target.price_sku is not None:
        try:
            rate = catalog.rate_usd_per_s(target.billing or target.provider, target.price_sku)
        except ConfigError as exc:
            raise ConfigError(
                f"targets[{index}].price_sku", target.price_sku, exc.expected
            ) from None
        rate_from = f"catalog {target.billing or target.provider}:{target.price_sku}"
    else:
        return None
    model, billing_from = billing_for(index, target.billing, target.provider, declared, catalog)
    return TargetPrice(model, rate, billing_from, rate_from)


def plan_prices(
    config: PricedPlan,
    declared: Mapping[str, BillingModel | None] | None = None,
    catalog: PriceCatalog | None = None,
) -> dict[str, TargetPrice | None]:
    """Every target's price (``None``: no rate named), checked before anything is sent.

    ``declared`` maps target names to their plugin's ``Capabilities.billing``; a target not in
    it is looked up by its provider name. A target with a cap (``max_cost_usd``, or the run's)
    and no rate is an error naming the fix."""
    from ._catalog import load_catalog

    catalog = catalog or load_catalog()
    out: dict[str, TargetPrice | None] = {}
    for i, t in enumerate(config.targets):
        plugin = (
            declared[t.name]
            if declared is not None and t.name in declared
            else declared_billing(t.provider)
        )
        price = target_price(i, t, plugin, catalog)
        capped = t.max_cost_usd is not None or config.run.max_cost_usd is not None
        if price is None and capped:
            raise ConfigError(
                f"targets[{i}].price_sku",
                None,
                'a catalog SKU (e.g. price_sku = "A100 80GB") or price_per_s_usd, so the '
                "budget guard can price this target's requests",
            )
        out[t.name] = price
    return out
