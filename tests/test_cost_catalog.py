"""The bundled price catalog: complete, cited, overridable, and loud about stale prices."""

from __future__ import annotations

import datetime as dt
import json
import warnings
from pathlib import Path

import pytest

from gpubench_sdk import ConfigError
from gpubench_sdk.cost import StalePriceWarning, load_catalog

FRESH = dt.date(2026, 6, 2)  # the day after most prices were read


def test_every_price_has_unit_source_and_date() -> None:
    catalog = load_catalog(today=FRESH)
    assert len(catalog.prices) >= 40
    for entry in catalog.prices.values():
        assert entry.source and entry.read_on <= dt.date(2026, 12, 1), entry
        assert entry.unit.startswith("usd_per_")
    for provider in (
        "runpod",
        "replicate",
        "huggingface",
        "inferless",
        "cloudrun",
        "modal",
        "sagemaker",
    ):
        assert catalog.skus(provider), provider
    # every provider with prices has billing rules, and providers without prices say why
    assert {p for p, _ in catalog.prices} <= set(catalog.billing)
    assert {"fal", "baseten"} <= {u.provider for u in catalog.unknown}


def test_lookups_convert_units_to_per_second() -> None:
    catalog = load_catalog(today=FRESH)
    assert catalog.rate_usd_per_s("runpod", "A100 80GB") == 0.00076
    assert catalog.rate_usd_per_s("RunPod", "a100  80gb") == 0.00076  # case and spaces
    assert catalog.rate_usd_per_s("huggingface", "aws/A100") == pytest.approx(2.50 / 3600)
    assert catalog.rate_usd_per_s("replicate/public", "A100 80GB") == 0.0014  # a plan's prices


def test_cloud_run_adds_its_cpu_and_memory_charges() -> None:
    catalog = load_catalog(today=FRESH)
    # L4 0.0001867/s + at least 4 vCPU x 0.000018 + 16 GiB x 0.000002 (PROVIDERS.md)
    assert catalog.rate_usd_per_s("cloudrun", "L4") == pytest.approx(
        0.0001867 + 0.000072 + 0.000032
    )
    bigger = catalog.rate_usd_per_s("cloudrun", "L4", vcpu=8, memory_gib=32)
    assert bigger == pytest.approx(0.0001867 + 8 * 0.000018 + 32 * 0.000002)


def test_billing_models_follow_the_providers_rules() -> None:
    catalog = load_catalog(today=FRESH)
    assert catalog.billing_model("huggingface").granularity_s == 60
    hf = catalog.billing_model("huggingface")  # 15 min is the default delay, not a minimum
    assert hf.default_idle_timeout_s == 900 and hf.min_idle_timeout_s == 0
    assert hf.effective_idle_timeout_s(60) == 60 and hf.effective_idle_timeout_s(None) == 900
    assert catalog.billing_model("cloudrun").granularity_s == 0.1
    assert catalog.billing_model("replicate/public").billed_phases == {"execution"}
    assert "idle" in catalog.billing_model("replicate").billed_phases
    assert catalog.billing_model("modal").default_idle_timeout_s == 60


def test_stale_prices_warn_when_used_and_fresh_ones_do_not() -> None:
    catalog = load_catalog(today=FRESH)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        catalog.price("runpod", "H100 PRO")  # a day old: quiet
    with pytest.warns(StalePriceWarning, match="inferless A100"):
        catalog.price("inferless", "A100 (shared)")  # read in 2023
    aged = load_catalog(today=dt.date(2027, 6, 1))
    with pytest.warns(StalePriceWarning, match=r"365 days ago"):
        aged.price("runpod", "H100 PRO")
    lenient = load_catalog(today=dt.date(2027, 6, 1), max_age_days=400)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        lenient.price("runpod", "H100 PRO")


def test_dates_are_as_the_source_states_them() -> None:
    # a source that names the month it states ("... (2026-05)", "docs read 2026-06") is
    # recorded in that month: neither later nor earlier than what it cites
    import re

    for e in load_catalog(today=FRESH).prices.values():
        months = re.findall(r"(?<!\d)(20\d\d-\d\d)(?:-\d\d)?(?!\d)", e.source)
        if months:
            assert e.read_on.isoformat()[:7] == months[-1], (e.provider, e.sku, e.source)


def test_one_stale_warning_names_the_oldest_prices() -> None:
    from gpubench_sdk.cost._catalog import stale_summary

    catalog = load_catalog(today=FRESH.replace(year=FRESH.year + 3))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for provider, sku in (("runpod", "A100 80GB"), ("inferless", "A100 (shared)")):
            for _ in range(3):
                catalog.price(provider, sku)
    stale = [w.message for w in caught if isinstance(w.message, StalePriceWarning)]
    line = stale_summary(stale)  # type: ignore[arg-type]
    assert line is not None and line.startswith("2 catalog price(s)")
    assert line.index("inferless A100 (shared)") < line.index("runpod A100 80GB")  # oldest first
    assert stale_summary([]) is None


def test_unknown_sku_lists_the_known_ones() -> None:
    with pytest.raises(ConfigError, match=r"price_sku.*A100 80GB"):
        load_catalog(today=FRESH).price("runpod", "TPU v5")
    with pytest.raises(ConfigError, match="provider"):
        load_catalog(today=FRESH).billing_model("nowhere")


def test_override_files_replace_and_add_entries(tmp_path: Path) -> None:
    toml = tmp_path / "mine.toml"
    toml.write_text(
        '[[prices]]\nprovider = "runpod"\nsku = "A100 80GB"\nprice_usd = 0.000552777\n'
        'unit = "usd_per_second"\nsource = "my invoice"\nread_on = 2026-06-01\n'
        '[billing.acme]\ngranularity_s = 0.5\nbilled_phases = ["execution"]\nsource = "acme docs"\n'
    )
    js = tmp_path / "more.json"
    js.write_text(
        json.dumps(
            {
                "prices": [
                    {
                        "provider": "acme",
                        "sku": "X1",
                        "price_usd": 3.6,
                        "unit": "usd_per_hour",
                        "source": "acme.example/pricing",
                        "read_on": "2026-06-01",
                    }
                ]
            }
        )
    )
    catalog = load_catalog([toml, js], today=FRESH)
    assert catalog.rate_usd_per_s("runpod", "A100 80GB") == 0.000552777
    assert catalog.rate_usd_per_s("acme", "X1") == pytest.approx(0.001)
    assert catalog.billing_model("acme").granularity_s == 0.5
    assert catalog.rate_usd_per_s("runpod", "H200") == 0.00155  # the rest untouched
    # a Python mapping works the same way
    again = load_catalog(today=FRESH).with_overrides(
        {
            "prices": [
                {
                    "provider": "modal",
                    "sku": "H100",
                    "price_usd": 0.002,
                    "unit": "usd_per_second",
                    "source": "x",
                    "read_on": "2026-06-01",
                }
            ]
        }
    )
    assert again.rate_usd_per_s("modal", "H100") == 0.002


def test_bad_overrides_name_the_field(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"prices\[0\]\.price_usd"):
        load_catalog(
            {
                "prices": [
                    {
                        "provider": "a",
                        "sku": "b",
                        "price_usd": -1,
                        "unit": "usd_per_second",
                        "source": "s",
                        "read_on": "2026-01-01",
                    }
                ]
            }
        )
    with pytest.raises(ConfigError, match="unit"):
        load_catalog(
            {
                "prices": [
                    {
                        "provider": "a",
                        "sku": "b",
                        "price_usd": 1,
                        "unit": "eur_per_fortnight",
                        "source": "s",
                        "read_on": "2026-01-01",
                    }
                ]
            }
        )
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(ConfigError, match="valid TOML"):
        load_catalog(bad)
    with pytest.raises(ConfigError, match="readable"):
        load_catalog(tmp_path / "missing.toml")
