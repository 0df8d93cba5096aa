"""The price catalog: prices as data (``data/prices.json``), lookups as pure functions.

Modelled on libcloud's ``pricing.py`` + bundled ``data/pricing.json``: the package ships a
versioned file with the unit, source and date read of every price; a user override (a file or
a mapping) replaces or adds entries; looking up a price older than ``max_age_days`` warns with
``StalePriceWarning``, every time it is used from a new place (never silenced by gpubench).
"""

from __future__ import annotations

import datetime as dt
import json
import tomllib
import warnings
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from .._base._errors import ConfigError
from .._base._validate import config_error  # the project's one ValidationError -> ConfigError
from .._contract._billing import BilledPhase, BilledUnit, BillingModel

PriceUnit = Literal[
    "usd_per_second",
    "usd_per_minute",
    "usd_per_hour",
    "usd_per_vcpu_second",
    "usd_per_gib_second",
]
_PER_S = {"usd_per_second": 1.0, "usd_per_minute": 1 / 60, "usd_per_hour": 1 / 3600}
DEFAULT_MAX_AGE_DAYS = 180


class StalePriceWarning(UserWarning):
    """A price used was read longer ago than the catalog's ``max_age_days``: check it.

    ``entry`` and ``age_days`` say which and how old, so a caller that collects them can
    warn once, naming the oldest (``stale_summary``)."""

    def __init__(
        self, message: str, entry: PriceEntry | None = None, age_days: int | None = None
    ) -> None:
        super().__init__(message)
        self.entry = entry
        self.age_days = age_days


def stale_summary(caught: Iterable[StalePriceWarning], limit: int = 3) -> str | None:
    """One line for every stale price a run or command used: how many, and the oldest."""
    seen: dict[tuple[str, str], StalePriceWarning] = {}
    for w in caught:
        if w.entry is not None:
            seen.setdefault(_key(w.entry.provider, w.entry.sku), w)
    if not seen:
        return None
    oldest = sorted(seen.values(), key=lambda w: w.entry.read_on if w.entry else dt.date.max)
    named = ", ".join(
        f"{w.entry.provider} {w.entry.sku} (read {w.entry.read_on}, {w.age_days} days ago)"
        for w in oldest[:limit]
        if w.entry is not None
    )
    more = f" and {len(oldest) - limit} more" if len(oldest) > limit else ""
    return (
        f"{len(oldest)} catalog price(s) used are older than max_age_days; oldest: {named}"
        f"{more}; check their sources: gpubench cost catalog --stale"
    )


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class PriceEntry(_Strict):
    """One price: what it costs per unit, where it was read, and when."""

    provider: str = Field(min_length=1)
    sku: str = Field(min_length=1)
    price_usd: float = Field(ge=0)
    unit: PriceUnit
    source: str = Field(min_length=1)
    read_on: dt.date
    note: str = ""
    # Instance shapes that force CPU and memory charges on top (Cloud Run: L4 needs 4 vCPU, 16 GiB)
    min_vcpu: float | None = Field(default=None, ge=0)
    min_memory_gib: float | None = Field(default=None, ge=0)

    @property
    def usd_per_s(self) -> float:
        """The price per second of use (GPU prices only; CPU/memory prices are per unit-second)."""
        return self.price_usd * _PER_S.get(self.unit, 1.0)


class BillingSpec(_Strict):
    """A ``BillingModel`` as written in the catalog file."""

    granularity_s: float = Field(gt=0)
    billed_phases: list[BilledPhase]
    billed_unit: BilledUnit = "worker"
    min_billed_s: float = Field(default=0.0, ge=0)
    min_idle_timeout_s: float = Field(default=0.0, ge=0)
    default_idle_timeout_s: float | None = Field(default=None, ge=0)
    per_request_usd: float = Field(default=0.0, ge=0)
    per_million_input_tokens_usd: float = Field(default=0.0, ge=0)
    per_million_output_tokens_usd: float = Field(default=0.0, ge=0)
    source: str = Field(min_length=1)

    def model(self) -> BillingModel:
        data = self.model_dump()
        data["billed_phases"] = frozenset(self.billed_phases)
        return BillingModel(**data)


class UnknownPrice(_Strict):
    provider: str
    what: str
    why: str


class CatalogFile(_Strict):
    """The schema of ``prices.json`` and of override files (every section optional there)."""

    schema_version: int = 1
    catalog_version: str = ""
    about: str = ""
    prices: list[PriceEntry] = []
    billing: dict[str, BillingSpec] = {}
    unknown: list[UnknownPrice] = []


def _key(provider: str, sku: str) -> tuple[str, str]:
    return provider.strip().lower(), " ".join(sku.lower().split())


def _base_provider(provider: str) -> str:
    """``replicate/public`` -> ``replicate``: a billing plan shares its provider's prices."""
    return provider.split("/", 1)[0].strip().lower()


@dataclass(frozen=True)
class PriceCatalog:
    """Prices and billing models by provider; build one with ``load_catalog``."""

    prices: Mapping[tuple[str, str], PriceEntry]
    billing: Mapping[str, BillingModel]
    unknown: tuple[UnknownPrice, ...] = ()
    version: str = ""
    max_age_days: float = DEFAULT_MAX_AGE_DAYS
    today: dt.date | None = None

    def providers(self) -> list[str]:
        return sorted({p for p, _ in self.prices} | set(self.billing))

    def skus(self, provider: str) -> list[str]:
        base = _base_provider(provider)
        return [e.sku for (p, _), e in self.prices.items() if p == base]

    def price(self, provider: str, sku: str) -> PriceEntry:
        """The entry for ``provider`` (or a plan of it, ``replicate/public``) and ``sku``.

        Warns ``StalePriceWarning`` when the entry is older than ``max_age_days``."""
        entry = self.prices.get(_key(_base_provider(provider), sku))
        if entry is None:
            known = self.skus(provider)
            hint = f"one of {known}" if known else f"a provider among {self.providers()}"
            raise ConfigError(
                "price_sku",
                f"{provider}:{sku}",
                f"{hint}, or an explicit price_per_s_usd / a catalog override",
            )
        today = self.today or dt.date.today()
        age_days = (today - entry.read_on).days
        if age_days > self.max_age_days:
            message = (
                f"price of {entry.provider} {entry.sku} (${entry.price_usd:g} {entry.unit}) "
                f"was read {age_days} days ago ({entry.read_on}; max_age_days="
                f"{self.max_age_days:g}): check {entry.source}"
            )
            warnings.warn(StalePriceWarning(message, entry, age_days), stacklevel=2)
        return entry

    def rate_usd_per_s(
        self,
        provider: str,
        sku: str,
        *,
        vcpu: float | None = None,
        memory_gib: float | None = None,
    ) -> float:
        """What one worker of ``sku`` costs per second, with CPU and memory charges where
        the provider adds them (at least the SKU's ``min_vcpu`` / ``min_memory_gib``)."""
        entry = self.price(provider, sku)
        if entry.unit not in _PER_S:
            raise ConfigError("price_sku", sku, "a GPU or instance SKU, not a vCPU/memory price")
        rate = entry.usd_per_s
        cpu = max(vcpu or 0.0, entry.min_vcpu or 0.0)
        mem = max(memory_gib or 0.0, entry.min_memory_gib or 0.0)
        if cpu:
            rate += cpu * self.price(provider, "vCPU").price_usd
        if mem:
            rate += mem * self.price(provider, "memory").price_usd
        return rate

    def billing_model(self, provider: str) -> BillingModel:
        """The billing rules of ``provider`` (``replicate/public`` for a plan of it)."""
        name = provider.strip().lower()
        model = self.billing.get(name) or self.billing.get(_base_provider(name))
        if model is None:
            raise ConfigError(
                "provider", provider, f"a provider with billing rules: {sorted(self.billing)}"
            )
        return model

    def with_overrides(self, overrides: str | Path | Mapping[str, Any]) -> PriceCatalog:
        """A new catalog where ``overrides`` (a TOML/JSON file or a mapping in the catalog's
        schema) replace entries with the same provider and SKU, and add new ones."""
        data = _read_override(overrides)
        parsed = _validate(
            data, str(overrides) if isinstance(overrides, str | Path) else "override"
        )
        prices = dict(self.prices)
        prices.update({_key(e.provider, e.sku): e for e in parsed.prices})
        billing = dict(self.billing)
        billing.update({k.lower(): v.model() for k, v in parsed.billing.items()})
        return PriceCatalog(
            prices, billing, self.unknown, self.version, self.max_age_days, self.today
        )


def _read_override(source: str | Path | Mapping[str, Any]) -> Mapping[str, Any]:
    if isinstance(source, Mapping):
        return source
    path = Path(source)
    try:
        text = path.read_text(encoding="utf-8-sig")
    except OSError as exc:
        raise ConfigError(
            "price overrides", str(path), f"a readable file ({exc.strerror})"
        ) from None
    try:
        if path.suffix.lower() == ".toml":
            return tomllib.loads(text)
        loaded: Mapping[str, Any] = json.loads(text)
        return loaded
    except (tomllib.TOMLDecodeError, json.JSONDecodeError) as exc:
        raise ConfigError(str(path), "(syntax)", f"valid TOML (.toml) or JSON: {exc}") from None


def _validate(data: Mapping[str, Any], where: str) -> CatalogFile:
    try:
        return CatalogFile.model_validate(data)
    except ValidationError as exc:
        raise config_error(exc, where) from None


_BUNDLED: CatalogFile | None = None


def _bundled() -> CatalogFile:
    global _BUNDLED
    if _BUNDLED is None:
        text = resources.files(__package__ or "gpubench_sdk.cost").joinpath("data/prices.json")
        _BUNDLED = _validate(json.loads(text.read_text(encoding="utf-8")), "prices.json")
    return _BUNDLED


def load_catalog(
    overrides: Iterable[str | Path | Mapping[str, Any]] | str | Path | Mapping[str, Any] = (),
    *,
    max_age_days: float = DEFAULT_MAX_AGE_DAYS,
    today: dt.date | None = None,
) -> PriceCatalog:
    """The bundled catalog, with ``overrides`` applied in order.

    ``max_age_days``: prices read longer ago than this warn (``StalePriceWarning``) when used;
    ``today`` fixes the date they are aged against (default: the real date).
    """
    if max_age_days < 0:
        raise ConfigError("max_age_days", max_age_days, "a number of days >= 0")
    base = _bundled()
    catalog = PriceCatalog(
        prices={_key(e.provider, e.sku): e for e in base.prices},
        billing={k.lower(): v.model() for k, v in base.billing.items()},
        unknown=tuple(base.unknown),
        version=base.catalog_version,
        max_age_days=max_age_days,
        today=today,
    )
    if isinstance(overrides, str | Path | Mapping):
        overrides = [overrides]
    for item in overrides:
        catalog = catalog.with_overrides(item)
    return catalog
