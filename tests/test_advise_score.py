"""Weighted scores over advise's options: the metrics guide's scoring (min-max per criterion,
1 the best, a weighted mean), user criteria per provider, the ranking they change only when
weights are given, and every bad value named with its fix (Python, CLI and TOML)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner
from test_advise import _store

from gpubench_sdk import Objectives, Store, Traffic, advise
from gpubench_sdk._advise import Advice, MeasuredTarget, Scoring, advise_targets
from gpubench_sdk._base._errors import ConfigError
from gpubench_sdk._cli import main
from gpubench_sdk.cost import BillingModel

SECOND = BillingModel(granularity_s=1.0)
SLA = {"sla": {"runpod": 99.5, "pricey": 99.99}}


def _targets() -> list[MeasuredTarget]:
    """ "cheap" (a runpod target) boots in 10 s; "pricey" boots in 5 s at three times the rate."""
    rng = np.random.default_rng(4)

    def one(name: str, provider: str, cold_s: float, rate: float) -> MeasuredTarget:
        return MeasuredTarget(
            name, provider, rng.uniform(1.8, 2.2, 40), rng.uniform(0.9, 1.1, 20) * cold_s,
            SECOND, rate, "longest_idle",
        )  # fmt: skip

    return [one("cheap", "runpod", 10.0, 0.0004), one("pricey", "other", 5.0, 0.0012)]


def _advice(scoring: Scoring | None) -> Advice:
    return advise_targets(
        _targets(),
        Traffic.per_day(2000),
        Objectives(latency_s=40.0),
        resamples=10,
        scale_down_s=(5.0, 60.0),
        overflow=False,
        scoring=scoring,
    )


def test_scores_are_min_max_normalised_weighted_means() -> None:
    advice = _advice(Scoring({"cost": 3, "latency": 1}))
    assert advice.scores is not None and len(advice.scores) == len(advice.options)
    costs = np.array([e.cost_usd_per_day[0] for e in advice.options])
    lats = np.array([e.latency_s[0] for e in advice.options])
    for e in advice.options:
        s = advice.score_of(e)
        assert s is not None
        c = (costs.max() - e.cost_usd_per_day[0]) / (costs.max() - costs.min())
        lat = (lats.max() - e.latency_s[0]) / (lats.max() - lats.min())
        assert s.score == pytest.approx((3 * c + 1 * lat) / 4)
        assert set(s.contributions) == {"cost", "latency"}  # unnamed criteria weigh 0
    cheapest = min(advice.options, key=lambda e: e.cost_usd_per_day[0])
    assert advice.score_of(cheapest).contributions["cost"] == pytest.approx(0.75)  # type: ignore[union-attr]


def test_weights_rank_the_options_meeting_every_objective_and_only_when_given() -> None:
    plain = _advice(None)
    shown = _advice(Scoring(criteria=SLA))  # criteria without weights: shown, not ranking
    ranked = _advice(Scoring({"sla": 1}, SLA))  # all on the SLA: the 99.99% provider wins
    assert plain.scores is None and plain.recommended is not None
    assert "cheapest option" in plain.reason
    assert shown.recommended is not None and shown.scores is not None
    assert shown.recommended.option == plain.recommended.option
    assert plain.recommended.option.target == "cheap", plain.reason
    assert ranked.recommended is not None and ranked.recommended.option.target == "pricey"
    assert ranked.recommended.meets_all[0] >= 0.9
    assert "highest weighted score" in ranked.reason
    # among pricey's options meeting everything, ties on the SLA go to the cheaper
    sure = [e for e in ranked.options if e.option.target == "pricey" and e.meets_all[0] >= 0.9]
    assert ranked.recommended.cost_usd_per_day[0] == min(e.cost_usd_per_day[0] for e in sure)
    data = ranked.to_json()
    assert data["scoring"]["ranks"] and data["scoring"]["criteria"] == SLA
    assert data["recommended"]["score"]["values"]["sla"] == 99.99
    assert all(0 <= o["score"]["score"] <= 1 for o in data["options"])


def test_bad_weights_and_criteria_name_the_field_and_the_fix() -> None:
    with pytest.raises(ConfigError, match=r"--weight.*speed.*cost"):
        Scoring({"speed": 1})
    with pytest.raises(ConfigError, match=r"--weight cost.*>= 0"):
        Scoring({"cost": -1})
    with pytest.raises(ConfigError, match="at least one weight > 0"):
        Scoring({"cost": 0})
    with pytest.raises(ConfigError, match=r"--criterion.*cost.*new name"):
        Scoring(criteria={"cost": {"runpod": 1}})
    with pytest.raises(ConfigError, match=r"--criterion sla.runpod.*finite number"):
        Scoring(criteria={"sla": {"runpod": "high"}})  # type: ignore[dict-item]
    with pytest.raises(ConfigError, match="a value for target 'pricey'"):
        _advice(Scoring(criteria={"sla": {"runpod": 99.5}}))
    with pytest.raises(ConfigError, match="TTFT objective"):
        _advice(Scoring({"ttft": 1}))


def test_cli_weights_criteria_and_toml(tmp_path: Path) -> None:
    path = tmp_path / "m.sqlite"
    _store(path)  # slowboot and quick, both on runpod
    args = ["advise", "latest", "--store", str(path), "--per-day", "1000", "--p95-ms", "60000"]
    args += ["--resamples", "5", "--no-overflow"]
    crit = ["--criterion", "sla=slowboot:99.0,quick:99.9"]
    done = CliRunner().invoke(main, [*args, *crit, "--weight", "sla=1"])
    assert done.exit_code == 0, done.output
    assert "score" in done.output and "ranks the options" in done.output
    as_json = CliRunner().invoke(main, [*args, *crit, "--weight", "sla=1,cost=0.1", "--json"])
    data = json.loads(as_json.output)
    assert data["recommended"]["target"] == "quick"
    assert data["scoring"]["weights"] == {"sla": 1.0, "cost": 0.1}
    toml = tmp_path / "criteria.toml"
    toml.write_text("[sla]\nslowboot = 99.0\nquick = 99.9\n\n[support]\nrunpod = 3\n")
    from_file = CliRunner().invoke(main, [*args, "--criteria", str(toml), "--json"])
    data = json.loads(from_file.output)
    assert data["scoring"]["criteria"]["support"] == {"runpod": 3}
    assert not data["scoring"]["ranks"] and data["recommended"]["score"] is not None
    for bad, says in (
        (["--weight", "cost"], "NAME=NUMBER"),
        (["--weight", "speed=1"], "one of"),
        (["--criterion", "sla=runpod"], "PROVIDER:NUMBER"),
        (["--criterion", "sla=runpod:x"], "PROVIDER:NUMBER"),
        (["--criteria", str(tmp_path / "none.toml")], "a readable TOML file"),
    ):
        out = CliRunner().invoke(main, [*args, *bad])
        assert out.exit_code != 0 and says in out.output, (bad, out.output)
        assert "Traceback" not in out.output
    toml.write_text("sla = 3\n")
    out = CliRunner().invoke(main, [*args, "--criteria", str(toml)])
    assert out.exit_code != 0 and "a table" in out.output


def test_advise_takes_weights_and_criteria_from_python(tmp_path: Path) -> None:
    path = tmp_path / "m.sqlite"
    _store(path)
    with Store(path, readonly=True) as store:
        advice = advise(
            store, ["latest"], Traffic.per_day(1000), Objectives(latency_s=60.0),
            resamples=5, overflow=False, weights={"sla": 1},
            criteria={"sla": {"slowboot": 99.0, "quick": 99.9}},
        )  # fmt: skip
    assert advice.recommended is not None and advice.recommended.option.target == "quick"
