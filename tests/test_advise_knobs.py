"""Only the settings a platform has: each provider plugin declares which scaling knobs its
platform lets a user set (``Capabilities.scaling_knobs``), and ``advise`` offers values of
those alone, saying what it left out. A knob no platform has is refused where it is declared."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from gpubench_sdk import Capabilities, ConfigError, Objectives, Traffic
from gpubench_sdk._advise import MeasuredTarget, advise_targets
from gpubench_sdk._advise._inputs import declared_knobs
from gpubench_sdk._contract._capabilities import SCALING_KNOBS
from gpubench_sdk.cost import BillingModel

BILLING = BillingModel(granularity_s=1.0, default_idle_timeout_s=60.0)


def _target(knobs: frozenset[str] | None) -> MeasuredTarget:
    rng = np.random.default_rng(2)
    return MeasuredTarget(
        "t", "x", rng.uniform(0.2, 0.4, 60), rng.uniform(2, 4, 20), BILLING, 0.0004,
        "longest_idle", knobs=knobs,
    )  # fmt: skip


def _advise(knobs: frozenset[str] | None, **kw: object):  # type: ignore[no-untyped-def]
    return advise_targets(
        [_target(knobs)], Traffic(0.5), Objectives(latency_s=30.0), resamples=4, seed=1,
        scale_down_s=(5.0, 60.0, 300.0), **kw,  # type: ignore[arg-type]
    )  # fmt: skip


def test_every_knob_is_searched_where_a_platform_has_them_all() -> None:
    every = _advise(SCALING_KNOBS)
    undeclared = _advise(None)
    settings = {(e.option.min_workers, e.option.max_workers, e.option.scale_down_s)
                for e in every.options}  # fmt: skip
    assert {s[2] for s in settings} == {5.0, 60.0, 300.0}
    assert {s[0] for s in settings} >= {0, 1} and len({s[1] for s in settings}) > 1
    assert settings == {(e.option.min_workers, e.option.max_workers, e.option.scale_down_s)
                        for e in undeclared.options}  # fmt: skip
    assert not any(" has no " in n or "does not say" in n for n in every.notes)
    assert any("does not say which scaling settings" in n for n in undeclared.notes)


def test_a_platform_without_a_scale_down_setting_keeps_its_own_delay() -> None:
    advice = _advise(frozenset({"min_workers", "max_workers"}))
    assert {e.option.scale_down_s for e in advice.options} == {60.0}  # the platform's default
    assert any("has no scale_down_s setting" in n and "own 60 s" in n for n in advice.notes)
    assert advice.recommended is not None


def test_a_platform_without_min_or_cap_scales_from_zero_as_far_as_the_load_takes_it() -> None:
    advice = _advise(frozenset({"scale_down_s"}))
    assert {e.option.min_workers for e in advice.options} == {0}
    assert len({e.option.max_workers for e in advice.options}) == 1
    (note,) = [n for n in advice.notes if "has no" in n]
    assert "min_workers, max_workers" in note and "scaled from zero only" in note
    # concurrency options appear only where the knob is there (and the platform documents it)
    assert all(e.option.concurrency == 1 for e in advice.options)


def test_the_plugins_declare_their_platforms_knobs() -> None:
    pytest.importorskip("gpubench_runpod")
    assert declared_knobs("runpod") == SCALING_KNOBS
    assert declared_knobs("cloudrun") == frozenset({"min_workers", "max_workers", "concurrency"})
    assert declared_knobs("replicate") == frozenset({"min_workers", "max_workers"})
    assert declared_knobs("huggingface") == frozenset(
        {"min_workers", "max_workers", "scale_down_s"}
    )
    assert declared_knobs("openai") is None  # any OpenAI-compatible server: unknown
    assert declared_knobs("no-such-plugin") is None


def test_a_knob_no_platform_has_is_refused() -> None:
    with pytest.raises(ConfigError, match="scaling_knobs"):
        Capabilities(scaling_knobs=frozenset({"min_workers", "warm_pool"}))
    assert dataclasses.replace(Capabilities(), scaling_knobs=SCALING_KNOBS).scaling_knobs
