"""Billing arithmetic, checked against cases computed by hand for every rounding rule."""

from __future__ import annotations

import pytest

from gpubench_sdk import BillingModel, Capabilities, ConfigError
from gpubench_sdk.cost import WorkerInterval, price_worker_intervals

MS = BillingModel(granularity_s=0.001)
TENTH = BillingModel(granularity_s=0.1)
SECOND = BillingModel(granularity_s=1.0)
MINUTE = BillingModel(granularity_s=60.0)


@pytest.mark.parametrize(
    ("model", "duration_s", "billed_s"),
    [
        (MS, 0.0004, 0.001),  # 0.4 ms -> one 1 ms step
        (MS, 1.2341, 1.235),
        (TENTH, 0.01, 0.1),  # Cloud Run: up to the next 100 ms
        (TENTH, 2.0, 2.0),
        (TENTH, 2.01, 2.1),
        (SECOND, 0.2, 1.0),  # RunPod: per second, rounded up
        (SECOND, 12.0, 12.0),
        (SECOND, 12.000000000001, 12.0),  # float noise from summed timestamps is not a second
        (SECOND, 12.001, 13.0),
        (MINUTE, 1.0, 60.0),  # Hugging Face: per minute
        (MINUTE, 60.0, 60.0),
        (MINUTE, 221.3, 240.0),
        (SECOND, 0.0, 0.0),  # nothing ran: nothing billed, even with a minimum
    ],
)
def test_rounding_up_to_the_granularity(
    model: BillingModel, duration_s: float, billed_s: float
) -> None:
    assert model.billed_s(duration_s) == pytest.approx(billed_s, abs=1e-12)
    assert float(model.billed_s_array([duration_s])[0]) == pytest.approx(billed_s, abs=1e-12)


def test_minimum_billed_duration_per_interval() -> None:
    model = BillingModel(granularity_s=1.0, min_billed_s=60.0)
    assert model.billed_s(1.0) == 60.0
    assert model.billed_s(60.5) == 61.0  # above the minimum, the granularity rules
    assert model.billed_s(0.0) == 0.0


def test_effective_idle_timeout_never_below_the_platform_minimum() -> None:
    hf = BillingModel(granularity_s=60, min_idle_timeout_s=900, default_idle_timeout_s=900)
    assert hf.effective_idle_timeout_s(60) == 900
    assert hf.effective_idle_timeout_s(None) == 900
    assert hf.effective_idle_timeout_s(3600) == 3600


def test_fees_per_request_and_per_token() -> None:
    model = BillingModel(
        per_request_usd=0.001, per_million_input_tokens_usd=0.5, per_million_output_tokens_usd=2.0
    )
    # 10 requests: 0.01; 200k input tokens: 0.1; 50k output tokens: 0.1
    assert model.fees_usd(10, 200_000, 50_000) == pytest.approx(0.21)


def _life(
    worker: int, boot: tuple[float, float], *spans: tuple[str, float, float]
) -> list[WorkerInterval]:
    out = [WorkerInterval(worker, "cold_boot", *boot)]
    out += [WorkerInterval(worker, phase, a, b) for phase, a, b in spans]  # type: ignore[arg-type]
    return out


def test_worker_lifetime_is_one_interval_rounded_once() -> None:
    # boot 0.3 s + run 0.3 s + idle 0.3 s = 0.9 s of life -> 1 s (rounding each phase: 3 s)
    ivs = _life(0, (0.0, 0.3), ("execution", 0.3, 0.6), ("idle", 0.6, 0.9))
    bill = price_worker_intervals(ivs, SECOND, rate_usd_per_s=0.5)
    assert (bill.billed_s, bill.intervals, bill.cost_usd) == (1.0, 1, 0.5)
    assert bill.raw_s == pytest.approx(0.9)


def test_unbilled_phases_and_gaps_split_intervals() -> None:
    public = BillingModel(
        granularity_s=1.0, billed_phases=frozenset({"execution"}), billed_unit="request"
    )
    ivs = _life(
        0, (0.0, 30.0), ("execution", 30.0, 30.2), ("idle", 30.2, 40.0), ("execution", 40.0, 41.5)
    )
    bill = price_worker_intervals(ivs, public, 1.0)
    assert bill.billed_s == 1.0 + 2.0  # each request rounded up on its own
    assert bill.seconds_by_phase["cold_boot"] == 30.0  # seen, not billed
    # a worker model that does not bill idle: two stretches (boot+run, run), each rounded
    no_idle = BillingModel(granularity_s=1.0, billed_phases=frozenset({"cold_boot", "execution"}))
    assert price_worker_intervals(ivs, no_idle, 1.0).billed_s == 31.0 + 2.0
    # two workers are two intervals
    both = ivs + _life(1, (5.0, 5.5), ("execution", 5.5, 6.0))
    assert price_worker_intervals(both, SECOND, 1.0).billed_s == 42.0 + 1.0  # 41.5 s, 1 s


def test_per_minute_billing_of_a_short_worker_life() -> None:
    ivs = _life(0, (0.0, 20.0), ("execution", 20.0, 32.0), ("idle", 32.0, 92.0))
    assert price_worker_intervals(ivs, MINUTE, 0.108333333 / 60).billed_s == 120.0


def test_bad_models_and_intervals_name_the_field() -> None:
    with pytest.raises(ConfigError, match=r"billing\.granularity_s"):
        BillingModel(granularity_s=0)
    with pytest.raises(ConfigError, match=r"billing\.billed_phases"):
        BillingModel(billed_phases=frozenset({"lunch"}))  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match=r"interval\.phase"):
        price_worker_intervals([WorkerInterval(0, "nap", 0, 1)], SECOND, 1.0)  # type: ignore[arg-type]


def test_capabilities_still_take_a_billing_model() -> None:
    caps = Capabilities(billing=SECOND)
    assert "billing" in caps.names()
    assert Capabilities().billing is None
