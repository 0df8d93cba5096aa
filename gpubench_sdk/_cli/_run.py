"""``gpubench run`` and ``gpubench demo``: execute a plan, print its summary."""

from __future__ import annotations

import functools
import sys
import time
from collections.abc import Callable, Sequence
from importlib import resources
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import urlsplit

import click
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from .._base._errors import ConfigError
from .._base._monitor import client_bound_spans
from .._base._types import Invocation
from .._plan._build import build_run, check_plan
from .._plan._config import RunConfig, load_config, parse_config
from .._plan._thresholds import Threshold, parse_fail_on
from .._report._summary import error_groups, render, render_errors, render_thresholds, summarize
from .._runner._multiproc import run_blocking, run_processes
from .._runner._results import RunResult
from .._runner._runner import Runner
from .._store._store import RunInfo, Store
from ..campaign._judge import check_thresholds
from ._console import (
    EXIT_CODES_HELP,
    ExitCode,
    err,
    out,
    resolve_store,
    stdout_may_close,
    store_option,
    warn,
)
from ._cost_common import price_warnings

F = TypeVar("F", bound=Callable[..., Any])

# -- run / demo ---------------------------------------------------------------------------


_FAIL_ON_HELP = (
    'fail (exit 1) when this holds, e.g. "p95>500ms", "error_rate>1%"; repeatable; '
    "adds to the plan's [thresholds] (docs/cli.md)"
)


def _output_as_store(ctx: click.Context, _: click.Parameter, value: str | None) -> str | None:
    if value is not None:
        warn(
            "-o/--output naming the store is deprecated: use --store "
            "(-o names an output file in every other command)"
        )
    return value


def _otlp_url(_: click.Context, __: click.Parameter, value: str | None) -> str | None:
    if value is not None:
        parts = urlsplit(value)
        if parts.scheme not in ("http", "https") or not parts.hostname or " " in value:
            raise ConfigError(
                "--otlp-endpoint", value, "an http(s) URL of an OTLP/HTTP collector, e.g. "
                "http://localhost:4318",
            )  # fmt: skip
    return value


def _legacy_output(f: F) -> F:
    return click.option(
        "-o", "--output", "legacy_store", hidden=True, callback=_output_as_store,
        type=click.Path(dir_okay=False), expose_value=True,
    )(f)  # fmt: skip


_OTLP = click.option(
    "--otlp-endpoint", metavar="URL", callback=_otlp_url,
    help="export spans and metrics over OTLP/HTTP",
)  # fmt: skip
_QUIET = click.option("--quiet", is_flag=True, help="no progress bar")


@click.command("run", epilog=EXIT_CODES_HELP)
@click.argument("config_path", metavar="CONFIG", type=click.Path(exists=True, dir_okay=False))
@store_option
@_legacy_output
@click.option("--fail-on", "fail_on", multiple=True, metavar="RULE", help=_FAIL_ON_HELP)
@_OTLP
@click.option(
    "--prometheus-port",
    metavar="[HOST:]PORT",
    help="serve metrics for Prometheus at http://HOST:PORT/metrics (HOST default 0.0.0.0)",
)
@_QUIET
@click.option(
    "-p",
    "--processes",
    default=1,
    show_default=True,
    type=click.IntRange(1, 256),
    help="load-generating processes (use the machine's cores)",
)
@click.option(
    "--dry-run",
    is_flag=True,
    help="print each target's requests, duration and cost per scenario; send nothing",
)
@click.option(
    "--ray",
    "ray_address",
    metavar="ADDRESS",
    help="generate the load on a Ray cluster: auto, local, host:6379 or ray://host:10001 "
    "(overrides [execution]; docs/ray.md)",
)
def run_cmd(
    config_path: str,
    store_path: str | None,
    legacy_store: str | None,
    fail_on: tuple[str, ...],
    otlp_endpoint: str | None,
    prometheus_port: str | None,
    quiet: bool,
    processes: int,
    dry_run: bool,
    ray_address: str | None,
) -> None:
    """Run the benchmark plan in CONFIG (TOML); judge it by its thresholds.

    The store is --store, else $GPUBENCH_STORE, else the plan's run.output, else
    gpubench.sqlite. After the summary, the plan's [thresholds] and each --fail-on rule are
    checked per target; a target/scenario whose every request failed always fails the run.
    """
    rules = parse_fail_on(fail_on, allow_change=False)  # a typo fails before anything runs
    if prometheus_port is not None:
        from ..telemetry import parse_prometheus_address

        parse_prometheus_address(prometheus_port)
    config = load_config(config_path)
    if dry_run:  # what the plan will send and cost, before anything is sent
        from ._cost_plans import print_dry_run

        check_plan(config)  # refused here exactly when the run would refuse it
        print_dry_run(config)
        return
    if prometheus_port and processes > 1:
        raise ConfigError(
            "--prometheus-port",
            prometheus_port,
            "a single process (-p 1); several processes export through --otlp-endpoint to a "
            "collector, which Prometheus scrapes",
        )
    store = resolve_store(store_path or legacy_store, config.run.output)
    with price_warnings(others_as_usual=True):  # one stale-price line per run
        if ray_address is not None or config.execution.backend == "ray":
            if processes > 1 or prometheus_port:
                raise ConfigError(
                    "--ray" if ray_address else "execution.backend",
                    ray_address or "ray",
                    "no --processes or --prometheus-port with Ray: set execution.workers, and "
                    "export through --otlp-endpoint",
                )
            _execute_ray(config, store, otlp_endpoint, quiet, ray_address, rules)
            return
        _execute(config, store, otlp_endpoint, quiet, processes, prometheus_port, rules)


@click.command("demo", epilog=EXIT_CODES_HELP)
@store_option
@_legacy_output
@_OTLP
@_QUIET
def demo_cmd(
    store_path: str | None, legacy_store: str | None, otlp_endpoint: str | None, quiet: bool
) -> None:
    """Start the local serverless runtime and run the quickstart plan against it.

    Its runs go where `gpubench results` looks: --store, else $GPUBENCH_STORE, else
    gpubench.sqlite."""
    config = load_config(_quickstart_path())
    out.print(
        f"[bold]gpubench demo[/]: {len(config.scenarios)} scenarios against the "
        "embedded local runtime (real worker processes, real cold starts)"
    )
    _execute(config, resolve_store(store_path or legacy_store), otlp_endpoint, quiet)


def _quickstart_path() -> Path:
    bundled = resources.files("gpubench_sdk").joinpath("_quickstart.toml")
    if bundled.is_file():
        return Path(str(bundled))
    # editable install: the file lives in the repository's examples/
    return Path(__file__).resolve().parents[2] / "examples" / "quickstart.toml"


PROGRESS_PUSH_S = 0.1  # rich redraws the bar 10 times a second


def _progress(quiet: bool) -> Progress:
    """One bar per scenario (or one for a multi-process run), on stderr."""
    return Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.fields[errors]} errors"),
        TimeElapsedColumn(),
        console=err,
        disable=quiet,
    )


def _scenario_bars(
    progress: Progress, config: RunConfig
) -> tuple[Callable[[Invocation], None], Callable[[], None]]:
    """One bar per scenario: the observer that counts each request, and ``push`` that shows
    the counts (the observer pushes at most every PROGRESS_PUSH_S; push once at the end)."""
    # A Poisson rate's planned count is its expectation: the bar's total grows past it rather
    # than showing 210/200.
    totals = [s.planned(len(config.targets)) for s in config.build_scenarios()]
    tasks = [
        progress.add_task(f"{i}:{s.kind}", total=totals[i], errors=0)
        for i, s in enumerate(config.build_scenarios())
    ]
    errors = [0] * len(tasks)
    done = [0] * len(tasks)

    pushed = [0.0]

    def push() -> None:
        for i, task in enumerate(tasks):
            progress.update(task, total=totals[i], completed=done[i], errors=errors[i])

    def advance(inv: Invocation) -> None:
        # Counted per request, shown at most every PROGRESS_PUSH_S: rich's update (a lock, a
        # speed sample) per request was CPU the requests' own timing needed.
        i = inv.scenario
        if not inv.ok:
            errors[i] += 1
        done[i] += 1
        totals[i] = max(totals[i], done[i])
        now = time.monotonic()
        if now - pushed[0] >= PROGRESS_PUSH_S:
            pushed[0] = now
            push()

    return advance, push


def _execute(
    config: RunConfig,
    store: str,
    otlp_endpoint: str | None,
    quiet: bool,
    processes: int = 1,
    prometheus_port: str | None = None,
    rules: Sequence[Threshold] = (),
) -> None:
    if processes > 1:
        _execute_processes(config, store, otlp_endpoint, quiet, processes, rules)
        return
    setup = None
    if otlp_endpoint or prometheus_port:
        from ..telemetry import configure, parse_prometheus_address

        host, port = parse_prometheus_address(prometheus_port)
        setup = configure(otlp_endpoint=otlp_endpoint, prometheus_port=port, prometheus_host=host)
    progress = _progress(quiet)
    advance, push = _scenario_bars(progress, config)
    runner = build_run(
        config, store=store, instruments=setup.instruments() if setup else None, observers=[advance]
    )
    try:
        with progress:
            result = run_blocking(runner)
            push()  # the final counts
    finally:
        if setup is not None:
            setup.shutdown()
    _report(result, rules)


def _build_for_process(
    config: dict[str, Any], store: str, otlp_endpoint: str | None, processes: int
) -> Runner:
    """Runs in each load-generating process (it must be picklable, hence module level).

    Each process meters only its own requests, so each gets 1/N of any ``max_cost_usd``."""
    instruments = None
    if otlp_endpoint:
        from ..telemetry import configure

        instruments = configure(otlp_endpoint=otlp_endpoint).instruments()
    return build_run(
        parse_config(config), store=store, instruments=instruments, budget_share=1 / processes
    )


def _execute_processes(
    config: RunConfig,
    store: str,
    otlp_endpoint: str | None,
    quiet: bool,
    processes: int,
    rules: Sequence[Threshold] = (),
) -> None:
    for i, t in enumerate(config.targets):
        if t.provider == "local" and not t.provider_options().get("url"):
            raise ConfigError(
                f"targets[{i}].url",
                None,
                "the URL of a running local runtime when --processes > 1, so all processes "
                "share one: start it with `gpubench local serve`",
            )
    total = sum(s.planned(len(config.targets)) for s in config.build_scenarios())
    progress = _progress(quiet)
    task = progress.add_task(f"{processes} processes", total=total, errors="-")
    # The plan as written, not as stored: stored() masks header and query values, which the
    # processes must send. Each process stores its own masked copy.
    plan = config.model_dump(mode="json")
    build = functools.partial(_build_for_process, plan, store, otlp_endpoint, processes)
    with progress:
        result = run_processes(
            build, processes, on_progress=lambda n: progress.update(task, completed=n)
        )
    _report(result, rules)


def _execute_ray(
    config: RunConfig,
    store: str,
    otlp_endpoint: str | None,
    quiet: bool,
    address: str | None,
    rules: Sequence[Threshold] = (),
) -> None:
    from .._ray import run_on_ray

    progress = _progress(quiet)  # every worker's requests, as the driver stores them
    advance, push = _scenario_bars(progress, config)
    with progress:
        result = run_on_ray(
            config, store=store, address=address, otlp_endpoint=otlp_endpoint, observers=[advance]
        )
        push()  # the final counts
    workers = result.run.config.get("ray", {}).get("workers", [])
    where = ", ".join(
        f"{w['name']} on {w['node_ip']} (clock {w['clock_offset_ms']:+.2f} ms "
        f"+-{w['rtt_ms'] / 2:.2f})"
        for w in workers
    )
    err.print(f"ray: {len(workers)} worker(s): {escape(where)}", highlight=False, soft_wrap=True)
    if result.status == "failed":  # a worker lost: the run is partial, and says so first
        err.print(f"[bold red]FAIL[/]: {escape(result.run.error or 'failed')}", soft_wrap=True)
    _report(result, rules)
    if result.status == "failed":
        sys.exit(ExitCode.THRESHOLD_FAILED)


def _report(result: RunResult, rules: Sequence[Threshold]) -> None:
    """The summary, why requests failed, the thresholds; then the exit code they decide."""
    from ..metrics import shape_summary

    status = result.status + (f" ({result.stop_reason})" if result.stop_reason else "")
    with Store(result.store_path, readonly=True) as store:
        report = check_thresholds(store, result.run.id, rules)  # the verdict first
        with stdout_may_close():
            print_run(store, result.run, status)
            for line in shape_summary(store, result.run.id):  # stages, sweep, max_rate
                out.print(line, highlight=False, soft_wrap=True)
            table = render_thresholds(report)
            if table is not None:
                out.print(table)
            out.print(
                f"stored in {result.store_path} (run {result.run.uuid}); "
                f"see: gpubench results show {result.run.id} --store {result.store_path}"
            )
    # "stopped by SIGINT/SIGTERM" is run_until_signal's reason; a budget stops for its own
    if result.status == "cancelled" and (result.stop_reason or "").startswith("stopped by SIG"):
        err.print(
            f"interrupted: the {result.run.samples} requests measured so far are kept in "
            f"{result.store_path} (run {result.run.id}, {result.run.uuid})",
            highlight=False,
            soft_wrap=True,
        )
        sys.exit(ExitCode.INTERRUPTED)
    if report.failed:
        failed = "; ".join(
            f"{r.target}{'' if r.scenario == 'all' else ' ' + r.scenario}: {r.rule.describe()}"
            + (f" ({r.note})" if r.note else f" (measured {r.shown})")
            for r in report.failed
        )
        err.print(f"[bold red]FAIL[/]: {escape(failed)}", highlight=False, soft_wrap=True)
        sys.exit(ExitCode.THRESHOLD_FAILED)


def cold_start_mode_lines(store: Store, run: RunInfo) -> list[str]:
    """Where a target's cold starts fall in more than one mode, one line saying each mode's
    share and median: a median of such a mixture describes no real request."""
    from ..metrics import run_cold_start_modes
    from ..metrics._modes import MIN_SAMPLES, modes_line

    lines = []
    for target in run.targets:
        modes = run_cold_start_modes(store, run, target=target.name)
        if modes.n >= MIN_SAMPLES and len(modes.modes) > 1:
            lines.append(modes_line(target.name, modes))
    return lines


def false_ready_lines(store: Store, run: RunInfo) -> list[str]:
    """Where a target's readiness signal came before it could serve, one line saying how many
    requests it slowed and that they are counted as cold."""
    from ..metrics import run_false_ready

    lines = []
    for target in run.targets:
        if "fleet_state" not in target.capabilities:
            continue
        found = run_false_ready(store, run, target=target.name)
        if found is not None and found.count:
            lines.append(f"{target.name}: {found.text} (counted as cold)")
    return lines


def print_run(store: Store, run: RunInfo, status: str) -> None:
    """The summary table, then why requests failed (if any did), cost, probe results."""
    out.print(render(summarize(store, run), f"run {run.id} {run.name!r}: {status}"))
    groups = error_groups(store, run)
    for line in render_errors(groups) if groups else ():
        out.print(escape(line), highlight=False, soft_wrap=True)
    for line in cold_start_mode_lines(store, run) + false_ready_lines(store, run):
        out.print(escape(line), highlight=False, soft_wrap=True)
    for i, sc in enumerate(run.scenarios):
        if sc.status == "deadline":
            out.print(
                f"[yellow]note:[/] scenario {i} ({sc.kind}) was cut by its deadline_s="
                f"{sc.params.get('deadline_s', '?')}: its requests in flight are stored as "
                "cancelled and it did not run to its planned end",
                highlight=False,
            )
    for target, wait in store.retry_after(run.id).items():
        out.print(
            f"{escape(target)}: {wait.count} throttled answer(s) asked to retry after "
            f"median {wait.median_s:g} s, max {wait.max_s:g} s (Retry-After)",
            highlight=False,
        )
    from ._cost import print_run_costs  # the cost catalog loads only when a plan has prices

    print_run_costs(store, run)
    workload = run.config.get("workload")
    if isinstance(workload, dict) and workload.get("kind") == "gpu_probe":
        from ..probe import print_probe_results  # reads every invocation: only for probe runs

        print_probe_results(store, run, console=out)
    spans = client_bound_spans(store.health_windows(run.id))
    if spans:
        total = sum(b - a for a, b in spans)
        where = ", ".join(f"{a:.0f}-{b:.0f} s" for a, b in spans[:8])
        more = f" and {len(spans) - 8} more" if len(spans) > 8 else ""
        out.print(
            f"[yellow]warning:[/] the client was the bottleneck for {total:.0f} s of this run "
            f"({where}{more} from its start; event-loop lag or CPU): latencies then include the "
            "load generator's own queueing; lower the load or add --processes"
        )
