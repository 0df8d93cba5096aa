"""Malformed plans, each answered by `gpubench run` with one line that names the field and the
fix, exit code 2, and no traceback or "internal error".

Run in process with click's CliRunner (the CLI exactly as installed, without an interpreter
start per case), so the whole table takes a few seconds. Nothing is ever sent: every plan here
is refused before its first request (the one target points at a closed port in any case).
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import tomli_w
from click.testing import CliRunner

from gpubench_sdk._cli import main

BASE: dict[str, Any] = {
    "run": {"name": "bad"},
    "workload": {"kind": "probe"},
    "targets": [{"name": "t", "provider": "http", "url": "http://127.0.0.1:9/x"}],
    "scenarios": [{"kind": "burst", "total": 2, "concurrency": 1}],
}
LOCAL = {"name": "t", "provider": "local", "handler": "gpubench_sdk.demo:echo", "load": ""}

Edit = Callable[[dict[str, Any]], None]


def run_(**fields: Any) -> Edit:
    return lambda plan: plan["run"].update(fields)


def target(**fields: Any) -> Edit:
    return lambda plan: plan["targets"][0].update(fields)


def local(**fields: Any) -> Edit:
    return lambda plan: plan.update(targets=[{**LOCAL, **fields}])


def workload(**fields: Any) -> Edit:
    return lambda plan: plan["workload"].update(fields)


def scenario(kind: str, **fields: Any) -> Edit:
    return lambda plan: plan.update(scenarios=[{"kind": kind, **fields}])


def drop(*path: str | int) -> Edit:
    def edit(plan: dict[str, Any]) -> None:
        node: Any = plan
        for part in path[:-1]:
            node = node[part]
        del node[path[-1]]

    return edit


def put(key: str, value: Any) -> Edit:
    return lambda plan: plan.update({key: value})


def both(*edits: Edit) -> Edit:
    def edit(plan: dict[str, Any]) -> None:
        for e in edits:
            e(plan)

    return edit


RATE = {"rps": 5, "duration_s": 1}
BURST = {"total": 5, "concurrency": 1}
COLD = {"n": 1, "idle_gap_s": 0}

# (id, an edit of BASE or the file's raw bytes, what the line must name, what fix it must say)
CASES: list[tuple[str, Edit | bytes, str, str]] = [
    # -- the file itself
    ("toml-syntax", b"[run\nname = 1\n", "plan.toml", "valid TOML"),
    ("toml-duplicate-key", b"[run]\nname = 'a'\nname = 'b'\n", "plan.toml", "valid TOML"),
    ("toml-bare-value", b"targets = \n", "plan.toml", "valid TOML"),
    ("binary", b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\xff\xfe", "plan.toml", "UTF-8"),
    ("latin-1", "[run]\nname = 'caf\u00e9'\n".encode("latin-1"), "plan.toml", "save it as UTF-8"),
    ("utf-16", "[run]\nname = 'x'\n".encode("utf-16"), "plan.toml", "UTF-8"),
    ("nul-in-utf8", b"[run]\nname = 'a\x00b'\n", "plan.toml", "NUL"),
    ("empty-file", b"", "targets", "required"),
    # -- top level and [run]
    ("top-level-typo", put("runn", {"name": "x"}), "'runn'", "did you mean 'run'?"),
    ("scenario-table-typo", put("scenario", [{"kind": "burst"}]), "'scenario'", "'scenarios'"),
    ("run-key-typo", run_(nmae="x"), "'nmae' in run", "did you mean 'name'?"),
    ("run-output-typo", run_(ouptut="x.sqlite"), "'ouptut' in run", "did you mean 'output'?"),
    ("run-name-type", run_(name=5), "run.name", "valid string"),
    ("max-requests-zero", run_(max_requests=0), "run.max_requests", "greater than or equal to 1"),
    ("max-requests-text", run_(max_requests="ten"), "run.max_requests", "valid integer"),
    ("run-max-cost-negative", run_(max_cost_usd=-1), "run.max_cost_usd", "greater than 0"),
    ("flush-negative", run_(flush_interval_s=-1), "run.flush_interval_s", "greater than or equal"),
    ("flush-huge", run_(flush_interval_s=1000), "run.flush_interval_s", "less than or equal to 60"),
    ("flush-nan", run_(flush_interval_s=float("nan")), "run.flush_interval_s", "finite"),
    ("run-not-table", put("run", "fast"), "run", "a table"),
    ("workload-array", put("workload", [{"kind": "probe"}]), "workload", "a table"),
    ("scenarios-table", put("scenarios", {"kind": "burst"}), "scenarios", "expected a list"),
    ("targets-missing", drop("targets"), "targets", "required"),
    ("targets-empty", put("targets", []), "targets", "at least 1"),
    ("scenarios-missing", drop("scenarios"), "scenarios", "required"),
    ("scenarios-empty", put("scenarios", []), "scenarios", "at least 1"),
    # -- targets
    ("target-name-missing", drop("targets", 0, "name"), "targets[0].name", "required"),
    ("target-name-space", target(name="a b"), "targets[0].name", "pattern"),
    ("target-name-empty", target(name=""), "targets[0].name", "at least 1"),
    (
        "target-duplicate",
        lambda p: p["targets"].append(dict(p["targets"][0])),
        "targets[1].name",
        "a name no other target uses",
    ),
    ("provider-missing", drop("targets", 0, "provider"), "targets[0].provider", "required"),
    ("inline-api-key", target(api_key="sk-live-abc123456789"), "targets[t].api_key", "api_key_env"),
    ("inline-token", target(auth_token="tok-abcdef123456"), "targets[t].auth_token", "api_key_env"),
    (
        "api-key-env-unset",
        target(api_key_env="GPB_SURELY_UNSET_VARIABLE"),
        "targets[t].api_key_env",
        "export GPB_SURELY_UNSET_VARIABLE=",
    ),
    (
        "api-key-env-and-file",
        target(api_key_env="HOME", api_key_file="/etc/hostname"),
        "targets[t].api_key",
        "only one of",
    ),
    ("api-key-file-missing", target(api_key_file="/nonexistent/k"), "api_key_file", "readable"),
    ("price-negative", target(price_per_s_usd=-1), "targets[0].price_per_s_usd", "greater than"),
    ("target-cap-zero", target(max_cost_usd=0), "targets[0].max_cost_usd", "greater than 0"),
    ("region-empty", target(region=""), "targets[0].region", "at least 1"),
    ("url-no-host", target(url="http://"), "targets[t].url", "host"),
    ("url-space", target(url="http://exa mple.com/x"), "targets[t].url", "no spaces"),
    ("url-no-scheme", target(url="127.0.0.1:8585"), "targets[t].url", "http://"),
    ("url-ftp", target(url="ftp://example.com/x"), "targets[t].url", "http://"),
    ("url-empty", target(url=""), "targets[t].url", "http"),
    ("url-bad-port", target(url="http://h.test:99999/x"), "targets[t].url", "Port out of range"),
    ("url-missing", drop("targets", 0, "url"), "targets[t].url", "required"),
    ("url-not-string", target(url=8080), "targets[t].url", "valid string"),
    ("health-url-no-host", target(health_url="https://"), "targets[t].health_url", "host"),
    ("timeout-zero", target(timeout_s=0), "targets[t].timeout_s", "greater than 0"),
    ("timeout-negative", target(timeout_s=-5), "targets[t].timeout_s", "greater than 0"),
    ("headers-not-table", target(headers="x"), "targets[t].headers", "a table"),
    ("header-value-int", target(headers={"X-A": 1}), "targets[t].headers.X-A", "valid string"),
    ("option-typo", target(mehtod="PUT"), "'mehtod' in targets[t]", "did you mean 'method'?"),
    ("option-typo-url", target(ulr="http://h/x"), "'ulr' in targets[t]", "did you mean 'url'?"),
    ("option-unknown", target(colour="blue"), "'colour' in targets[t]", "remove it"),
    ("method-bad", target(method="DELETE"), "targets[t].method", "'POST'"),
    ("local-max-workers-zero", local(max_workers=0), "targets[t].max_workers", "greater than"),
    (
        "local-min-over-max",
        local(min_workers=5, max_workers=2),
        "targets[t].min_workers",
        "at most max_workers (2)",
    ),
    ("local-idle-negative", local(idle_timeout_s=-1), "targets[t].idle_timeout_s", "greater"),
    ("local-handler-spec", local(handler="not a spec"), "targets[t].handler", "pattern"),
    ("local-url-no-scheme", local(url="localhost:8000"), "targets[t].url", "http://"),
    ("local-env-type", local(env={"A": 1}), "targets[t].env.A", "valid string"),
    # -- workload
    ("workload-typo", workload(sleepms=5), "'sleepms' in workload", "did you mean 'sleep_ms'?"),
    ("probe-sleep-negative", workload(sleep_ms=-1), "workload.sleep_ms", "greater than or equal"),
    ("probe-payload-huge", workload(payload_bytes=10**9), "workload.payload_bytes", "less than"),
    ("llm-prompt-zero", workload(kind="llm", prompt_tokens=0), "workload.prompt_tokens", "1 to"),
    ("llm-max-tokens-text", workload(kind="llm", max_tokens="many"), "max_tokens", "whole number"),
    ("llm-length-bool", workload(kind="llm", max_tokens=True), "workload.max_tokens", "whole"),
    (
        "llm-length-no-dist",
        workload(kind="llm", prompt_tokens={"mean": 5}),
        "prompt_tokens.dist",
        "required",
    ),
    (
        "llm-length-dist-typo",
        workload(kind="llm", prompt_tokens={"dist": "gamma"}),
        "workload.prompt_tokens.dist",
        "'lognormal'",
    ),
    (
        "llm-length-no-stdev",
        workload(kind="llm", prompt_tokens={"dist": "normal", "mean": 9}),
        "workload.prompt_tokens",
        "stdev as well",
    ),
    (
        "llm-length-key-typo",
        workload(kind="llm", max_tokens={"dist": "uniform", "maxi": 9}),
        "'maxi' in workload.max_tokens",
        "did you mean 'max'?",
    ),
    (
        "llm-length-min-above-max",
        workload(kind="llm", max_tokens={"dist": "uniform", "min": 9, "max": 3}),
        "workload.max_tokens",
        "min at most max",
    ),
    (
        "llm-length-weights",
        workload(kind="llm", max_tokens={"dist": "empirical", "values": [1, 2], "weights": [1]}),
        "workload.max_tokens",
        "one weight per value",
    ),
    (
        "llm-length-weight-nan",
        workload(
            kind="llm", max_tokens={"dist": "empirical", "values": [1], "weights": [float("nan")]}
        ),
        "workload.max_tokens.weights[0]",
        "finite",
    ),
    (
        "llm-length-stdev-uniform",
        workload(kind="llm", prompt_tokens={"dist": "uniform", "max": 9, "stdev": 1}),
        "workload.prompt_tokens",
        "uniform does not take one",
    ),
    (
        "llm-length-mean-out",
        workload(kind="llm", prompt_tokens={"dist": "normal", "mean": 5, "stdev": 1, "max": 4}),
        "workload.prompt_tokens",
        "a mean within min..max",
    ),
    (
        "dataset-missing",
        workload(kind="llm", dataset={"path": "no-such.jsonl"}),
        "workload.dataset.path",
        "a readable file",
    ),
    (
        "dataset-no-path",
        workload(kind="llm", dataset={"sample": 5}),
        "workload.dataset.path",
        "required",
    ),
    (
        "dataset-sample-zero",
        workload(kind="llm", dataset={"path": "d.jsonl", "sample": 0}),
        "workload.dataset.sample",
        "greater than or equal to 1",
    ),
    (
        "dataset-key-typo",
        workload(kind="llm", dataset={"path": "d.jsonl", "samples": 5}),
        "'samples' in workload.dataset",
        "did you mean 'sample'?",
    ),
    (
        "dataset-format",
        workload(kind="llm", dataset={"path": "d.jsonl", "format": "parquet"}),
        "workload.dataset.format",
        "'sharegpt'",
    ),
    (
        "dataset-bounds",
        workload(
            kind="llm", dataset={"path": "d.jsonl", "min_prompt_words": 9, "max_prompt_words": 3}
        ),
        "workload.dataset",
        "min_prompt_words at most max_prompt_words",
    ),
    (
        "dataset-and-prompt-tokens",
        workload(kind="llm", prompt_tokens=5, dataset={"path": "d.jsonl"}),
        "workload",
        "no prompt_tokens with a dataset",
    ),
    (
        "llm-length-huge",
        workload(kind="llm", prompt_tokens={"dist": "uniform", "max": 10**7}),
        "workload.prompt_tokens.max",
        "less than or equal",
    ),
    # -- scenarios
    ("kind-missing", put("scenarios", [{"total": 1}]), "scenarios[0].kind", "'burst'"),
    ("kind-unknown", scenario("bursty"), "scenarios[0].kind", "'burst', 'rate', 'cold_starts'"),
    ("burst-total-zero", scenario("burst", total=0, concurrency=1), "burst.total", ">= 1"),
    ("users-zero", scenario("users", users=0, duration_s=1), "users.users", ">= 1"),
    ("users-no-duration", scenario("users", users=2), "users.duration_s", "required"),
    (
        "users-think-negative",
        scenario("users", users=2, duration_s=1, think_s=-1),
        "users.think_s",
        ">= 0",
    ),
    ("users-typo", scenario("users", user=2, duration_s=1), "'user'", "did you mean 'users'?"),
    ("chat-turns-zero", workload(kind="chat", turns=0), "workload.turns", "greater than or equal"),
    ("chat-turns-huge", workload(kind="chat", turns=5000), "workload.turns", "less than or equal"),
    (
        "chat-system-negative",
        workload(kind="chat", system_prompt_tokens=-1),
        "workload.system_prompt_tokens",
        "greater than or equal",
    ),
    (
        "chat-length-bad",
        workload(kind="chat", prompt_tokens={"dist": "normal"}),
        "workload.prompt_tokens",
        "mean as well",
    ),
    ("burst-total-missing", scenario("burst", concurrency=1), "burst.total", "required"),
    (
        "burst-concurrency-typo",
        scenario("burst", total=5, concurency=2),
        "unknown key 'concurency' in scenarios[0] (burst)",
        "did you mean 'concurrency'?",
    ),
    ("burst-concurrency-bool", scenario("burst", total=5, concurrency=True), "concurrency", "int"),
    ("burst-concurrency-zero", scenario("burst", total=5, concurrency=0), "concurrency", ">= 1"),
    (
        "burst-concurrency-absurd",
        scenario("burst", total=5, concurrency=5_000_000),
        "scenarios[0].burst.concurrency",
        "at most 1,000,000",
    ),
    (
        "burst-total-absurd",
        scenario("burst", total=10**12, concurrency=1),
        "burst.total",
        "at most",
    ),
    ("burst-warmup-negative", scenario("burst", **BURST, warmup=-1), "warmup", ">="),
    ("burst-deadline-zero", scenario("burst", **BURST, deadline_s=0), "burst.deadline_s", "> 0"),
    (
        "burst-deadline-negative",
        scenario("burst", **BURST, deadline_s=-1),
        "burst.deadline_s",
        "> 0",
    ),
    (
        "burst-deadline-inf",
        scenario("burst", **BURST, deadline_s=float("inf")),
        "burst.deadline_s",
        "finite",
    ),
    ("burst-deadline-text", scenario("burst", **BURST, deadline_s="soon"), "deadline_s", "number"),
    ("rate-rps-zero", scenario("rate", rps=0, duration_s=1), "rate.rps", "> 0"),
    ("rate-rps-absurd", scenario("rate", rps=1e9, duration_s=1e9), "rate.rps", "at most 1,000,000"),
    ("rate-duration-zero", scenario("rate", rps=5, duration_s=0), "rate.duration_s", "> 0"),
    ("rate-duration-absurd", scenario("rate", rps=5, duration_s=1e9), "rate.duration_s", "at most"),
    (
        "rate-schedule-absurd",
        scenario("rate", rps=1e6, duration_s=1e6, arrivals="poisson"),
        "rate.duration_s",
        "lower rps or duration_s",
    ),
    ("rate-rps-missing", scenario("rate", duration_s=5), "rate.rps", "required"),
    ("rate-arrivals", scenario("rate", **RATE, arrivals="gaussian"), "rate.arrivals", "'poisson'"),
    ("rate-deadline-zero", scenario("rate", **RATE, deadline_s=0), "rate.deadline_s", "> 0"),
    ("rate-deadline-negative", scenario("rate", **RATE, deadline_s=-1), "rate.deadline_s", "> 0"),
    ("rate-max-inflight-zero", scenario("rate", **RATE, max_inflight=0), "max_inflight", ">= 1"),
    ("rate-seed-float", scenario("rate", **RATE, seed=1.5), "rate.seed", "integer"),
    (
        "rate-rps-typo",
        scenario("rate", rsp=5, duration_s=1),
        "'rsp' in scenarios[0] (rate)",
        "'rps'",
    ),
    ("rate-rps-nan", scenario("rate", rps=float("nan"), duration_s=1), "rate.rps", "finite"),
    ("cold-n-zero", scenario("cold_starts", n=0, idle_gap_s=0), "cold_starts.n", ">= 1"),
    (
        "cold-deadline-zero",
        scenario("cold_starts", **COLD, deadline_s=0),
        "cold_starts.deadline_s",
        "> 0",
    ),
    (
        "cold-deadline-negative",
        scenario("cold_starts", **COLD, deadline_s=-1),
        "cold_starts.deadline_s",
        "> 0",
    ),
    (
        "cold-idle-negative",
        scenario("cold_starts", n=1, idle_gap_s=-1),
        "cold_starts.idle_gap_s",
        ">= 0",
    ),
    (
        "cold-timeout-zero",
        scenario("cold_starts", **COLD, cold_timeout_s=0),
        "cold_timeout_s",
        "> 0",
    ),
    (
        "cold-warm-after-negative",
        scenario("cold_starts", **COLD, warm_after=-1),
        "warm_after",
        ">= 0",
    ),
    (
        "cold-no-idle-gap",
        scenario("cold_starts", n=1),
        "scenarios[0].cold_starts.idle_gap_s",
        "scale-down delay",
    ),
    (
        "cold-typo",
        scenario("cold_starts", n=1, idle_gap=5),
        "'idle_gap' in scenarios[0]",
        "'idle_gap_s'",
    ),
    (
        "second-scenario-bad",
        lambda p: p["scenarios"].append({"kind": "rate", "rps": -1, "duration_s": 1}),
        "scenarios[1].rate.rps",
        "> 0",
    ),
]


def _write(tmp_path: Path, case: Edit | bytes) -> Path:
    path = tmp_path / "plan.toml"
    if isinstance(case, bytes):
        path.write_bytes(case)
    else:
        plan = copy.deepcopy(BASE)
        case(plan)
        path.write_text(tomli_w.dumps(plan), encoding="utf-8")
    return path


def test_the_table_is_large_and_unique() -> None:
    assert len(CASES) >= 70
    assert len({c[0] for c in CASES}) == len(CASES)


@pytest.mark.parametrize(
    ("edit", "field", "fix"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_malformed_plan_gets_one_line_naming_field_and_fix(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, edit: Edit | bytes, field: str, fix: str
) -> None:
    plan = _write(tmp_path, edit)
    monkeypatch.chdir(tmp_path)  # where a store would be written, had the plan run
    result = CliRunner().invoke(main, ["run", str(plan), "--quiet"], catch_exceptions=True)
    stored = list(tmp_path.glob("*.sqlite"))
    err = result.stderr
    lines = [line for line in err.splitlines() if line.strip()]
    assert result.exception is None or isinstance(result.exception, SystemExit), err
    assert result.exit_code == 2, (result.exit_code, err, result.stdout)
    assert len(lines) == 1, err
    assert "Traceback" not in err and "internal error" not in err
    assert field in lines[0], lines[0]
    assert fix in lines[0], lines[0]
    assert not stored  # refused before anything was recorded
