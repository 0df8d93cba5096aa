"""A target's price from the plan, the catalog or its plugin's ``Capabilities.billing``,
checked before the first request."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_cli import gpubench

from gpubench_sdk import ConfigError
from gpubench_sdk._plan._config import parse_config
from gpubench_sdk.cost import BillingModel
from gpubench_sdk.cost._meter import budget_guard
from gpubench_sdk.cost._pricing import plan_prices

ACME = BillingModel(granularity_s=0.1, default_idle_timeout_s=10.0, source="acme docs")


def _plan(**target: object) -> dict[str, object]:
    return {
        "targets": [{"name": "t", **target}],
        "scenarios": [{"kind": "burst", "total": 1, "concurrency": 1}],
    }


def test_a_plugins_declared_billing_prices_a_provider_the_catalog_lacks() -> None:
    config = parse_config(_plan(provider="acme", price_per_s_usd=0.002, max_cost_usd=5))
    price = plan_prices(config, {"t": ACME})["t"]
    assert price is not None and price.billing is ACME and price.rate_usd_per_s == 0.002
    assert "plugin" in price.billing_from
    guard = budget_guard(config, {"t": ACME})
    assert guard is not None and guard.meters["t"].billing is ACME
    assert guard.meters["t"].scale_down_s == 10.0  # the plugin's default delay


def test_a_price_that_cannot_be_billed_is_refused_with_the_fix() -> None:
    config = parse_config(_plan(provider="acme", price_per_s_usd=0.002))
    with pytest.raises(ConfigError, match=r"targets\[0\]\.billing.*Capabilities|declares none"):
        plan_prices(config, {"t": None})
    # naming a catalog model fixes it
    fixed = parse_config(_plan(provider="acme", price_per_s_usd=0.002, billing="runpod"))
    price = plan_prices(fixed, {"t": None})["t"]
    assert price is not None and price.billing_from == "plan billing = 'runpod'"
    bad = parse_config(_plan(provider="acme", price_per_s_usd=0.002, billing="nope"))
    with pytest.raises(ConfigError, match=r"targets\[0\]\.billing"):
        plan_prices(bad, {"t": None})


UNPRICEABLE = (
    '[[targets]]\nname = "h"\nprovider = "http"\n'
    'url = "http://127.0.0.1:9/never"\nprice_per_s_usd = 0.001\n'
)
CAP_TOO_SMALL = (
    '[[targets]]\nname = "loc"\nprovider = "local"\n'
    'handler = "gpubench_sdk.demo:echo"\nload = ""\n'
    "price_per_s_usd = 0.01\nmax_cost_usd = 1.0\n"
)


@pytest.mark.parametrize(
    ("target", "expected"),
    [
        pytest.param(UNPRICEABLE, ["targets[0].billing"], id="unpriceable-plan"),
        pytest.param(
            CAP_TOO_SMALL,
            # (300 s + the 5 s idle tail) x $0.01/s
            ["targets[0].max_cost_usd", "timeout_s=300", "at least $3.05"],
            id="cap-too-small-for-one-request",
        ),
    ],
)
def test_gpubench_run_refuses_before_sending(
    target: str, expected: list[str], tmp_path: Path
) -> None:
    plan = tmp_path / "plan.toml"
    plan.write_text(
        f'[workload]\nkind = "probe"\n\n{target}\n'
        '[[scenarios]]\nkind = "burst"\ntotal = 5\nconcurrency = 1\n'
    )
    store = tmp_path / "s.sqlite"
    done = gpubench("run", str(plan), "--store", str(store))
    assert done.returncode == 2, done.stdout + done.stderr
    for message in expected:
        assert message in done.stderr, done.stderr
    assert "Traceback" not in done.stderr
    # refused before the run began: nothing stored, nothing sent (not a silent run of 0 requests)
    assert not store.exists()
