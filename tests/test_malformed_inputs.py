"""Malformed input to the newer surfaces, as a careless user types it: shapes (concurrency,
stages, sweep, max_rate), replay, thresholds, regions and input maps in a plan; the flags of
advise, cost, campaign, report, results/export, compare and run. Each must be refused with
exit 2 and one ``error:`` line naming the field or flag the user wrote (not the model field
behind it), in well under a few seconds, with no traceback and no internal error.

A plan is refused by ``gpubench run --dry-run`` exactly when the real run refuses it: every
case runs both ways (the dry run once passed input maps and regions the run refused).
Trace files and advice files have tables of their own in tests/test_refusals.py.
"""

from __future__ import annotations

import copy
import time
from pathlib import Path

import pytest
import tomli_w
from _report_store import build_store
from click.testing import CliRunner, Result
from test_malformed_plans import BASE, Edit, both, put, scenario, target, workload

from gpubench_sdk._cli import main

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
TRACE = "timestamp,n\n0.1,3\n0.3,5\n"  # beside each plan: replay cases name trace.csv
LIMIT_S = 10.0  # a refusal happens before any work: far below this even on a busy machine


def thr(**rules: object) -> Edit:
    return put("thresholds", rules)


def inp(**input_map: object) -> Edit:
    return target(input=input_map)


def llm_inp(**input_map: object) -> Edit:
    return both(workload(kind="llm"), target(input=input_map))


ST = [{"to_rps": 2, "over_s": 0}, {"to_rps": 2, "over_s": 1}]
R = {"path": "trace.csv"}
# (id, an edit of test_malformed_plans.BASE, what the one error line must name)
PLAN_CASES: list[tuple[str, Edit, str]] = [
    # concurrency
    ("conc-zero", scenario("concurrency", concurrency=0, duration_s=1), "concurrency.concurrency"),
    ("conc-missing", scenario("concurrency", duration_s=1), "concurrency.concurrency"),
    ("conc-dur-zero", scenario("concurrency", concurrency=1, duration_s=0), "duration_s"),
    ("conc-dur-inf", scenario("concurrency", concurrency=1, duration_s=float("inf")), "duration_s"),
    ("conc-think-neg", scenario("concurrency", concurrency=1, duration_s=1, think_s=-1), "think_s"),
    (
        "conc-warm-neg",
        scenario("concurrency", concurrency=1, duration_s=1, warmup_s=-1),
        "warmup_s",
    ),
    (
        "conc-text",
        scenario("concurrency", concurrency="four", duration_s=1),
        "concurrency.concurrency",
    ),
    (
        "conc-huge",
        scenario("concurrency", concurrency=10**9, duration_s=1),
        "concurrency.concurrency",
    ),
    ("conc-typo", scenario("concurrency", concurency=1, duration_s=1), "concurency"),
    # stages
    ("stages-missing", scenario("stages"), "stages.stages"),
    ("stages-empty", scenario("stages", stages=[]), "stages.stages"),
    ("stages-not-list", scenario("stages", stages={"to_rps": 1}), "stages.stages"),
    ("stage-neg-rate", scenario("stages", stages=[{"to_rps": -1, "over_s": 1}]), "to_rps"),
    (
        "stage-nan-rate",
        scenario("stages", stages=[{"to_rps": float("nan"), "over_s": 1}]),
        "to_rps",
    ),
    ("stage-neg-over", scenario("stages", stages=[{"to_rps": 1, "over_s": -1}]), "over_s"),
    ("stage-missing-over", scenario("stages", stages=[{"to_rps": 1}]), "over_s"),
    ("stage-typo", scenario("stages", stages=[{"rps": 1, "over_s": 1}]), "rps"),
    ("stage-text", scenario("stages", stages=["4 rps"]), "stages[0]"),
    ("stages-all-zero", scenario("stages", stages=[{"to_rps": 0, "over_s": 5}]), "stages"),
    ("stages-zero-length", scenario("stages", stages=[{"to_rps": 5, "over_s": 0}]), "stages"),
    ("stages-window-zero", scenario("stages", stages=ST, window_s=0), "window_s"),
    ("stages-tol-neg", scenario("stages", stages=ST, tolerance=-0.5), "tolerance"),
    ("stages-start-neg", scenario("stages", stages=ST, start_rps=-1), "start_rps"),
    ("stages-arrivals", scenario("stages", stages=ST, arrivals="gamma"), "arrivals"),
    ("stages-inflight-zero", scenario("stages", stages=ST, max_inflight=0), "max_inflight"),
    ("stages-absurd", scenario("stages", stages=[{"to_rps": 1e6, "over_s": 1e6}]), "stages"),
    ("stages-seed-float", scenario("stages", stages=ST, arrivals="poisson", seed=1.5), "seed"),
    # sweep
    ("sweep-dur-zero", scenario("sweep", duration_s=0), "sweep.duration_s"),
    ("sweep-rates-zero", scenario("sweep", duration_s=1, rates=0), "rates"),
    ("sweep-rates-float", scenario("sweep", duration_s=1, rates=2.5), "rates"),
    ("sweep-maxconc-zero", scenario("sweep", duration_s=1, max_concurrency=0), "max_concurrency"),
    ("sweep-rates-huge", scenario("sweep", duration_s=1, rates=10**6), "rates"),
    ("sweep-typo", scenario("sweep", duration_s=1, rate=3), "'rate'"),
    # max_rate
    ("maxrate-missing-p95", scenario("max_rate"), "p95_ms"),
    ("maxrate-p95-zero", scenario("max_rate", p95_ms=0), "p95_ms"),
    ("maxrate-err-neg", scenario("max_rate", p95_ms=100, error_rate=-0.1), "error_rate"),
    ("maxrate-err-one", scenario("max_rate", p95_ms=100, error_rate=1.5), "error_rate"),
    ("maxrate-conf-one", scenario("max_rate", p95_ms=100, confidence=1), "confidence"),
    ("maxrate-conf-zero", scenario("max_rate", p95_ms=100, confidence=0), "confidence"),
    (
        "maxrate-start-above-max",
        scenario("max_rate", p95_ms=100, start_rps=100, max_rps=10),
        "max_rps",
    ),
    ("maxrate-trial-zero", scenario("max_rate", p95_ms=100, trial_s=0), "trial_s"),
    ("maxrate-precision-zero", scenario("max_rate", p95_ms=100, precision=0), "precision"),
    ("maxrate-precision-big", scenario("max_rate", p95_ms=100, precision=2), "precision"),
    ("maxrate-trials-zero", scenario("max_rate", p95_ms=100, max_trials=0), "max_trials"),
    ("maxrate-p95-text", scenario("max_rate", p95_ms="500ms"), "p95_ms"),
    # replay (plan fields)
    ("replay-path-missing", scenario("replay"), "replay.path"),
    ("replay-file-missing", scenario("replay", path="nope.csv"), "replay.path"),
    ("replay-dir", scenario("replay", path="."), "replay.path"),
    ("replay-time-col", scenario("replay", **R, time_column="ts"), "time_column"),
    ("replay-unit", scenario("replay", **R, time_unit="h"), "time_unit"),
    ("replay-unit-iso-numbers", scenario("replay", **R, time_unit="iso"), "time_column (row 2)"),
    ("replay-speed-zero", scenario("replay", **R, speed=0), "speed"),
    ("replay-speed-neg", scenario("replay", **R, speed=-2), "speed"),
    ("replay-loops-zero", scenario("replay", **R, loops=0), "loops"),
    ("replay-start-neg", scenario("replay", **R, start_s=-1), "start_s"),
    ("replay-start-past-end", scenario("replay", **R, start_s=1000), "start_s"),
    ("replay-dur-zero", scenario("replay", **R, duration_s=0), "duration_s"),
    ("replay-fields-list", scenario("replay", **R, fields=["n"]), "fields"),
    ("replay-fields-col", scenario("replay", **R, fields={"echo": "zz"}), "zz"),
    ("replay-fields-int", scenario("replay", **R, fields={"echo": 3}), "fields"),
    ("replay-duration-col", scenario("replay", **R, duration_column="zz"), "duration_column"),
    ("replay-typo", scenario("replay", **R, time_col="x"), "time_col"),
    # thresholds
    ("thr-not-table", put("thresholds", "p95<1s"), "thresholds"),
    ("thr-metric", thr(p96="< 1s"), "p96"),
    ("thr-op", thr(p95="~ 1s"), "thresholds.p95"),
    ("thr-unit", thr(p95="< 1 parsec"), "thresholds.p95"),
    ("thr-empty", thr(p95=""), "thresholds.p95"),
    ("thr-number", thr(p95=5), "thresholds.p95"),
    ("thr-no-value", thr(p95="<"), "thresholds.p95"),
    ("thr-neg", thr(p95="< -1s"), "thresholds.p95"),
    ("thr-pct-over", thr(error_rate="< 150%"), "error_rate"),
    ("thr-unit-mismatch", thr(error_rate="< 5s"), "error_rate"),
    ("thr-rule-bad", thr(rules=["p95 << 1s"]), "rules[0]"),
    ("thr-rule-metric", thr(rules=["latency < 1s"]), "rules[0]"),
    ("thr-rule-int", thr(rules=[5]), "rules[0]"),
    ("thr-target-unknown", thr(other={"p95": "< 1s"}), "other"),
    ("thr-target-bad", thr(t={"p95": "<< 1s"}), "thresholds.t.p95"),
    ("thr-target-not-table", thr(t="p95 < 1s"), "thresholds.t"),
    ("thr-nan", thr(p95="< nan s"), "thresholds.p95"),
    ("thr-cost-unit", thr(rules=["cost_per_1k_requests < 5ms"]), "rules[0]"),
    ("thr-percentile-over", thr(rules=["p101 < 1s"]), "rules[0]"),
    # regions
    ("regions-empty", target(regions=[]), "regions"),
    ("regions-str", target(regions="us-east-1"), "regions"),
    ("regions-chars", target(regions=["us east"], url="http://127.0.0.1:9/{region}"), "regions"),
    ("regions-dup", target(regions=["a", "a"], url="http://127.0.0.1:9/{region}"), "regions"),
    (
        "regions-and-region",
        target(regions=["a"], region="b", url="http://127.0.0.1:9/{region}"),
        "region",
    ),
    ("regions-same-endpoint", target(regions=["a", "b"]), "same endpoint"),
    ("regions-int", target(regions=[1], url="http://127.0.0.1:9/{region}"), "regions"),
    ("region-empty", target(region=""), "region"),
    ("region-int", target(region=5), "region"),
    (
        "regions-placeholder-typo",
        target(regions=["a", "b"], url="http://127.0.0.1:9/{regoin}"),
        "regions",
    ),
    (
        "regions-threshold-unfanned",
        both(target(regions=["a", "b"], url="http://127.0.0.1:9/{region}"), thr(t={"p95": "< 1s"})),
        "thresholds",
    ),
    # input map
    ("input-not-table", target(input="x"), "input"),
    ("input-typo", inp(renames={"echo": "e"}), "renames"),
    ("input-rename-unknown", inp(rename={"zz": "e"}), "rename.zz"),
    ("input-rename-int", inp(rename={"echo": 5}), "rename"),
    ("input-drop-unknown", inp(drop=["zz"]), "drop"),
    ("input-drop-str", inp(drop="echo"), "drop"),
    ("input-set-list", inp(set=["a"]), "set"),
    ("input-template-unknown", inp(template={"x": "{zz}"}), "zz"),
    ("input-template-brace", inp(template={"x": "{echo"}), "template"),
    ("input-template-and-rename", inp(template={"x": "{echo}"}, rename={"echo": "e"}), "template"),
    ("input-template-str", inp(template="{echo}"), "template"),
    ("input-template-empty-name", inp(template={"x": "{}"}), "template"),
    ("input-llm-rename", llm_inp(rename={"promt": "inputs"}), "promt"),
    ("input-rename-clash", inp(rename={"echo": "sleep_ms"}), "rename"),
]

# Flags: STORE is a results store with two days of runs (tests/_report_store.py), DIR a folder
# holding trace.csv (two rows), bad.toml (not TOML), notjson.json, crit.toml (an unknown
# criterion), prices.toml (a price override of the wrong shape); nope.* do not exist.
S = "STORE"
d = Path("DIR")
PLAN = str(EXAMPLES / "campaign.toml")
A = ["advise", "latest", "--store", S, "--price", "slow=runpod:0.0004"]
AR = [*A, "--p95-ms", "1000", "--rate", "1"]
W = ["cost", "whatif", "-t", "runpod,rate=0.0004", "--rps", "1", "--exec-s", "0.5", "--cold-s", "5"]
C = ["campaign", "create", PLAN, "--store", str(d / "c.sqlite"), "--for", "1d", "--every", "4h"]
# (command line, what the one error line must name)
FLAG_CASES: list[tuple[list[str], str]] = [
    # advise
    ([*A, "--rate", "1"], "--p95-ms"),
    ([*A, "--p95-ms", "0", "--rate", "1"], "--p95-ms"),
    ([*A, "--p95-ms", "-5", "--rate", "1"], "--p95-ms"),
    ([*A, "--p95-ms", "nan", "--rate", "1"], "--p95-ms"),
    ([*A, "--p95-ms", "inf", "--rate", "1"], "--p95-ms"),
    ([*A, "--p95-ms", "fast", "--rate", "1"], "--p95-ms"),
    ([*A, "--p95-ms", "1000"], "--rate"),
    ([*AR, "--per-day", "100"], "--per-day"),
    ([*A, "--p95-ms", "1000", "--per-day", "-1"], "--per-day"),
    ([*A, "--p95-ms", "1000", "--rate", "nan"], "--rate"),
    ([*A, "--p95-ms", "1000", "--rate", "inf"], "--rate"),
    ([*AR, "--profile", "1,x"], "--profile"),
    ([*AR, "--profile", "1,-1"], "--profile"),
    ([*AR, "--profile", ""], "--profile"),
    ([*AR, "--trace", str(d / "trace.csv")], "--trace"),
    ([*A, "--p95-ms", "1000", "--trace", str(d / "nope.csv")], "--trace"),
    (
        [*A, "--p95-ms", "1000", "--trace", str(d / "trace.csv"), "--trace-time-unit", "h"],
        "--trace-time-unit",
    ),
    (
        [*A, "--p95-ms", "1000", "--trace", str(d / "trace.csv"), "--trace-time-unit", "iso"],
        "--trace-time-column",
    ),
    ([*AR, "--percentile", "0"], "--percentile"),
    ([*AR, "--max-cold-rate", "2"], "--max-cold-rate"),
    ([*AR, "--max-cold-rate", "-0.1"], "--max-cold-rate"),
    ([*AR, "--budget-usd-per-day", "-1"], "--budget-usd-per-day"),
    ([*AR, "--budget-usd-per-day", "nan"], "--budget-usd-per-day"),
    ([*AR, "--price", "fast"], "--price"),
    ([*AR, "--price", "fast=runpod"], "--price"),
    ([*AR, "--price", "nope=runpod:1"], "--price"),
    ([*AR, "--price", "fast=runpod:-1"], "--price"),
    ([*AR, "--price", "fast=runpod:abc"], "--price"),
    ([*AR, "--committed", "fast=-1"], "--committed"),
    ([*AR, "--committed", "fast"], "--committed"),
    ([*AR, "--committed", "nope=1"], "--committed"),
    ([*AR, "--commit", "fast=100,terms=3"], "--commit"),
    ([*AR, "--commit", "fast=abc"], "--commit"),
    ([*AR, "--horizon-months", "0"], "--horizon-months"),
    ([*AR, "--horizon-months", "-1"], "--horizon-months"),
    ([*AR, "--overflow-depth", "0"], "--overflow-depth"),
    ([*A, "--p95-ms", "1000", "--batch", "0"], "--batch"),
    ([*A, "--p95-ms", "1000", "--batch", "-5"], "--batch"),
    ([*A, "--p95-ms", "1000", "--batch", "10", "--batch-hours", "0"], "--batch-hours"),
    ([*A, "--p95-ms", "1000", "--batch", "10", "--batch-hours", "25"], "--batch-hours"),
    ([*AR, "--campaign", "nope"], "--campaign"),
    ([*AR, "--resamples", "1"], "--resamples"),
    ([*AR, "--confidence", "0"], "--confidence"),
    ([*AR, "--confidence", "1.5"], "--confidence"),
    ([*AR, "--max-workers", "0"], "--max-workers"),
    ([*AR, "--ttft-p95-ms", "-1"], "--ttft-p95-ms"),
    ([*AR, "--ttft-percentile", "101"], "--ttft-percentile"),
    ([*AR, "--weight", "cost=x"], "--weight"),
    ([*AR, "--weight", "speed=1"], "--weight"),
    ([*AR, "--weight", "cost=-1"], "--weight"),
    ([*AR, "--weight", "cost"], "--weight"),
    ([*AR, "--criterion", "x=runpod:1"], "--criterion"),
    ([*AR, "--criterion", "uptime"], "--criterion"),
    ([*AR, "--criteria", str(d / "nope.toml")], "--criteria"),
    ([*AR, "--criteria", str(d / "bad.toml")], "--criteria"),
    ([*AR, "--criteria", str(d / "crit.toml")], "zz"),
    (["advise", "999", "--store", S, "--p95-ms", "1000", "--rate", "1"], "999"),
    (["advise", "abc", "--store", S, "--p95-ms", "1000", "--rate", "1"], "abc"),
    (
        ["advise", "latest", "--store", str(d / "none.sqlite"), "--p95-ms", "1000", "--rate", "1"],
        "none.sqlite",
    ),
    ([*AR, "--html", str(d)], "--html"),
    ([*AR, "--html", str(d / "no" / "dir" / "a.html")], "--html"),
    ([*AR, "--seed", "x"], "--seed"),
    # cost whatif
    (["cost", "whatif", "--rps", "1", "--exec-s", "1", "--cold-s", "1"], "--target"),
    ([*W[:4], "--exec-s", "1", "--cold-s", "1"], "--rps"),
    ([*W, "--hours", "0"], "--hours"),
    ([*W, "--scale-down", "5,x"], "--scale-down"),
    ([*W, "--scale-down", "-5"], "--scale-down"),
    ([*W, "--scale-down", ""], "--scale-down"),
    ([*W, "--min-workers", "a"], "--min-workers"),
    ([*W, "--min-workers", "-1"], "--min-workers"),
    ([*W, "--max-workers", "0"], "--max-workers"),
    ([*W, "--concurrency", "0"], "--concurrency"),
    ([*W, "--slo-s", "-1"], "--slo-s"),
    ([*W, "--slo-percentile", "0"], "--slo-percentile"),
    ([*W, "--slo-percentile", "101"], "--slo-percentile"),
    ([*W, "--exec-s", "nan"], "--exec-s"),
    ([*W, "--cold-s", "inf"], "--cold-s"),
    ([*W, "--rps", "nan"], "--rps"),
    ([*W, "--profile", "a,b"], "--profile"),
    ([*W, "--worker-policy", "oldest"], "--worker-policy"),
    ([*W, "--max-age-days", "-1"], "--max-age-days"),
    ([*W, "--prices", str(d / "nope.toml")], "--prices"),
    ([*W, "--prices", str(d / "bad.toml")], "bad.toml"),
    ([*W, "--prices", str(d / "prices.toml")], "prices.toml"),
    (
        [
            "cost",
            "whatif",
            "-t",
            "runpod,rate=0.0004",
            "--from-run",
            "999",
            "--store",
            S,
            "--run-target",
            "fast",
        ],
        "999",
    ),
    (
        [
            "cost",
            "whatif",
            "-t",
            "runpod,rate=0.0004",
            "--from-run",
            "latest",
            "--store",
            S,
            "--run-target",
            "zz",
        ],
        "--run-target",
    ),
    ([*W, "--from-run", "latest", "--store", S], "--from-run"),
    # cost scenario / break-even / run
    (["cost", "scenario", "-t", "zz"], "--target"),
    (["cost", "scenario", "-t", "runpod,cold=-1"], "--target"),
    (["cost", "scenario", "-t", "runpod", "--requests", "-1"], "--requests"),
    (["cost", "scenario", "-t", "runpod", "--events", "0"], "--events"),
    (["cost", "scenario", "--with-rules"], "--with-rules"),
    (["cost", "break-even", "-t", "runpod"], "--hourly"),
    (["cost", "break-even", "-t", "runpod:A100 80GB", "--hourly", "x"], "--hourly"),
    (["cost", "break-even", "-t", "runpod:A100 80GB", "--monthly", "100,term=-1"], "--monthly"),
    (
        ["cost", "break-even", "-t", "runpod:A100 80GB", "--hourly", "1", "--need-months", "0"],
        "--need-months",
    ),
    (["cost", "run", "999", "--store", S], "999"),
    (["cost", "run", "latest", "--store", S, "--price", "fast"], "--price"),
    (["cost", "run", "latest", "--store", S, "--price", "zz=runpod"], "--price"),
    (["cost", "run", "latest", "--store", S, "--scale-down-s", "-1"], "--scale-down-s"),
    # campaign
    ([*C[:7], "--every", "0"], "--every"),
    ([*C[:7], "--every", "4x"], "--every"),
    ([*C[:5], "--for", "0", "--every", "4h"], "--for"),
    ([*C[:5], "--for", "-1d", "--every", "4h"], "--for"),
    (C[:7], "--every"),
    ([*C, "--cron", "0 * * * *"], "--cron"),
    ([*C, "--grace", "x"], "--grace"),
    ([*C, "--start", "yesterday"], "--start"),
    ([*C, "--slot-max-requests", "0"], "--slot-max-requests"),
    ([*C, "--max-cost-usd", "-1"], "--max-cost-usd"),
    ([*C, "--name", ""], "--name"),
    ([*C, "--cron", "61 * * * *"], "--cron"),
    (
        [
            "campaign",
            "create",
            str(d / "bad.toml"),
            "--store",
            str(d / "c2.sqlite"),
            "--for",
            "1d",
            "--every",
            "4h",
        ],
        "bad.toml",
    ),
    (
        [
            "campaign",
            "create",
            str(d / "nope.toml"),
            "--store",
            str(d / "c2.sqlite"),
            "--for",
            "1d",
            "--every",
            "4h",
        ],
        "nope.toml",
    ),
    (["campaign", "show", "nope", "--store", S], "nope"),
    (["campaign", "run", "nope", "--store", S], "nope"),
    (["campaign", "status", "nope", "--store", S], "nope"),
    (["campaign", "run", "nope", "--store", S, "--heartbeat", "0"], "--heartbeat"),
    # report
    (["report", "999", "--store", S, "-o", str(d / "r.html")], "999"),
    (["report", "abc", "--store", S, "-o", str(d / "r.html")], "abc"),
    (["report", "latest", "--store", S], "--output"),
    (["report", "latest", "--store", S, "-o", str(d / "r.html"), "--format", "pdf"], "--format"),
    (["report", "latest", "--store", S, "-o", str(d / "r.html"), "--layout", "grid"], "--layout"),
    (
        ["report", "latest", "--store", S, "-o", str(d / "r.html"), "--requests-per-day", "-1"],
        "--requests-per-day",
    ),
    (
        [
            "report",
            "latest",
            "--store",
            S,
            "-o",
            str(d / "r.html"),
            "--advice",
            str(d / "nope.json"),
        ],
        "--advice",
    ),
    (
        [
            "report",
            "latest",
            "--store",
            S,
            "-o",
            str(d / "r.html"),
            "--advice",
            str(d / "notjson.json"),
        ],
        "--advice",
    ),
    (
        ["report", "latest", "--store", S, "-o", str(d / "r.html"), "--scale-down-s", "-1"],
        "--scale-down-s",
    ),
    (["report", "--campaign", "nope", "--store", S, "-o", str(d / "r.html")], "nope"),
    (["report", "latest", "--store", S, "-o", str(d / "no" / "r.html")], "--output"),
    (["report", "latest", "--store", S, "-o", str(d)], "--output"),
    # export / results
    (["results", "export", "999", "--store", S], "999"),
    (["results", "export", "latest", "--store", S, "--format", "xml"], "--format"),
    (["results", "export", "latest", "--store", S, "-o", str(d / "no" / "x.csv")], "--output"),
    (["results", "export", "latest", "--store", S, "-o", str(d)], "--output"),
    (["results", "export", "latest", "--store", str(d / "trace.csv")], "trace.csv"),
    (["results", "show", "999", "--store", S], "999"),
    (["results", "compare", "fast", "zz", "--store", S], "zz"),
    (["results", "compare", "fast", "slow", "--store", S, "--scenario", "9"], "--scenario"),
    (["compare", "--baseline", "999", "--store", S, "--fail-on", "p95>+10%"], "999"),
    (["compare", "--baseline", "latest", "--store", S, "--fail-on", "p95>>1"], "--fail-on"),
    (
        ["compare", "--baseline", "1", "--store", S, "--target", "zz", "--fail-on", "p95>+10%"],
        "--target",
    ),
    # run flags
    (["run", PLAN, "--fail-on", "p95<<1s"], "--fail-on"),
    (["run", PLAN, "--fail-on", "p95>+20%"], "--fail-on"),
    (["run", PLAN, "--fail-on", "p95>1s,,p99>2s"], "--fail-on"),
    (["run", PLAN, "--prometheus-port", "host:abc"], "--prometheus-port"),
    (["run", PLAN, "--prometheus-port", "99999"], "--prometheus-port"),
    (["run", PLAN, "-p", "0"], "--processes"),
    (["run", PLAN, "--otlp-endpoint", "not a url"], "--otlp-endpoint"),
    (["run", str(d / "nope.toml")], "nope.toml"),
    (["run", PLAN, "--store", str(d)], "--store"),
    (["run", PLAN, "--prometheus-port", "9100", "-p", "2"], "--prometheus-port"),
]


def _flag_id(args: list[str]) -> str:
    text = " ".join(args).replace(" --store STORE", "").replace(" --price slow=runpod:0.0004", "")
    return text.replace(PLAN, "PLAN")


def test_the_tables_are_large_and_unique() -> None:
    assert len(PLAN_CASES) + len(FLAG_CASES) >= 150
    assert len({c[0] for c in PLAN_CASES}) == len(PLAN_CASES)
    assert len({_flag_id(a) for a, _ in FLAG_CASES}) == len(FLAG_CASES)


def _refused(result: Result, started: float, names: str) -> None:
    """Exit 2, one error line naming ``names``, quickly, nothing else gone wrong."""
    took = time.monotonic() - started
    err = result.stderr
    errors = [line for line in err.splitlines() if line.lower().startswith("error")]
    assert result.exception is None or isinstance(result.exception, SystemExit), err
    assert "Traceback" not in err and "internal error" not in err, err
    assert result.exit_code == 2, (result.exit_code, err, result.stdout[-500:])
    assert len(errors) == 1, err
    assert names in errors[0], errors[0]
    assert took < LIMIT_S, f"{took:.1f} s to refuse"


@pytest.mark.parametrize(
    ("edit", "names"), [c[1:] for c in PLAN_CASES], ids=[c[0] for c in PLAN_CASES]
)
def test_a_malformed_plan_is_refused_by_the_dry_run_and_the_run_alike(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, edit: Edit, names: str
) -> None:
    (tmp_path / "trace.csv").write_text(TRACE)
    plan = copy.deepcopy(BASE)
    edit(plan)
    path = tmp_path / "plan.toml"
    path.write_text(tomli_w.dumps(plan), encoding="utf-8")
    monkeypatch.chdir(tmp_path)  # where a store would be written, had the plan run
    for mode in ("--dry-run", "--quiet"):
        started = time.monotonic()
        _refused(CliRunner().invoke(main, ["run", str(path), mode]), started, names)
    assert not list(tmp_path.glob("*.sqlite"))  # refused before anything was recorded


@pytest.fixture(scope="module")
def inputs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    folder = tmp_path_factory.mktemp("malformed")
    store = tmp_path_factory.mktemp("store") / "runs.sqlite"  # apart: readers add -wal, -shm
    build_store(store, days=2)
    (folder / "trace.csv").write_text("timestamp\n0.5\n1.5\n")
    (folder / "bad.toml").write_text("[x\n")
    (folder / "notjson.json").write_text("{nope")
    (folder / "crit.toml").write_text("[criteria]\nzz = 1\n")
    (folder / "prices.toml").write_text("[[prices]]\nprovider = 1\n")
    return {"STORE": str(store), "DIR": str(folder)}


@pytest.mark.parametrize(("args", "names"), FLAG_CASES, ids=[_flag_id(a) for a, _ in FLAG_CASES])
def test_a_malformed_flag_is_refused_naming_it(
    inputs: dict[str, str], args: list[str], names: str
) -> None:
    filled = [a.replace("STORE", inputs["STORE"]).replace("DIR", inputs["DIR"]) for a in args]
    before = sorted(p.name for p in Path(inputs["DIR"]).iterdir())
    started = time.monotonic()
    _refused(CliRunner().invoke(main, filled), started, names)
    assert sorted(p.name for p in Path(inputs["DIR"]).iterdir()) == before  # no file left
